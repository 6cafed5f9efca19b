"""Build issue 48's short families: texts people paste, of one subject or of several, seeded.

Three JSONL files in ``benchmarks/data/`` (one object a line: ``id``, ``text``, ``boundaries`` as
character offsets at unit starts, ``source``, the format of ``short_sections_dev.jsonl``; and
``origins``, the source documents one by one), each a data set of ``benchmarks.common.DATASETS``:

* ``short_one_dev.jsonl``, **one subject in 2-4 paragraphs** (reference: one segment): the first
  sentences of ONE section of one source document, laid out as 2-4 paragraphs of 2-5 sentences
  between blank lines.  Sources: Wiki-50 dev sections, Clinical dev sections, prose sections of this
  repository's docs, prose sections of the Markdown and README files the machine's Debian packages
  ship (``/usr/share/doc``), the manifestos' segments, and everyday texts (the 4-sentence
  paragraphs of ``everyday_paragraphs.txt`` as 2 + 2, the 6-sentence messages of
  ``everyday_messages.txt`` as 2 + 2 + 2 or 3 + 3).
* ``short_unrelated_dev.jsonl``, **2-3 unrelated subjects of 1-2 paragraphs each** (reference: a
  boundary where a subject opens): subjects from different sources (or different everyday texts),
  at most 4 paragraphs in all; the ``source`` part of the id says whether every subject is one
  paragraph (``1para``: a rule cutting at every paragraph is right) or some subject has two
  (``2para``: that rule is wrong).  Each text twice: paragraphs between blank lines (``blank``) and
  run together with single spaces (``space``).
* ``short_adjacent_dev.jsonl``, **two adjacent sections of one article** (reference: the section
  boundary): consecutive reference segments of one Wiki-50 dev or Clinical dev document, each
  written as 1-2 paragraphs of 2-4 sentences; ``blank`` and ``space`` as above.

An id reads ``KIND/SOURCE/JOIN/NN@ORIGIN``: ORIGIN names the source documents (a Debian file's path,
a docs file and heading, a data set's document and section index).  Texts stay under
``MAX_TOKENS`` of the default model's tokens.  Sentences are the data
sets' reference units (one sentence a unit, a full stop added where none ends it) or, in Markdown and
README prose, a simple rule.

The repository's docs change with every commit and ``/usr/share/doc`` differs between machines, so
their prose sections are extracted once into ``short_prose_sections.jsonl`` (``--extract``,
committed; the families are built from that snapshot): ``--check`` then verifies the committed
families anywhere the shared data is.

    python -m benchmarks.short_families --extract   # refresh the prose snapshot (this machine's files)
    python -m benchmarks.short_families             # write the three families
    python -m benchmarks.short_families --check     # exit 1 if a committed family differs
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import BENCH_DATA, REPO, data_root, default_tokenizer
from benchmarks.short_docs import _sentence, everyday_paragraphs
from headseg.segmenter.evaluation.loaders import iter_documents, parse_jsonl

MESSAGES = BENCH_DATA / "everyday_messages.txt"
PROSE = BENCH_DATA / "short_prose_sections.jsonl"
#: family name (a data set of benchmarks.common.DATASETS) -> its file
FAMILIES = {"short_one_dev": BENCH_DATA / "short_one_dev.jsonl",
            "short_unrelated_dev": BENCH_DATA / "short_unrelated_dev.jsonl",
            "short_adjacent_dev": BENCH_DATA / "short_adjacent_dev.jsonl"}
#: texts per source (one subject), per join (unrelated subjects), per source and join (adjacent sections)
ONE_PER_SOURCE = 40
UNRELATED_TEXTS = 80
ADJACENT_PER_SOURCE = 30
#: the default model's tokens a text holds at most (:func:`size`)
MAX_TOKENS = 340
JOINS = {"blank": "\n\n", "space": " "}
#: the labelled dev sets the sections come from (name, folder under the data root)
SHARED = (("wiki50", "segmentation/wiki50_dev"), ("clinical", "segmentation/clinical_dev"), ("manifestos", "corpus"))
#: the Debian sections kept per package (in file order; Node.js alone ships hundreds of API pages)
DEBIAN_PER_PACKAGE = 15
DEBIAN_GLOBS = ("/usr/share/doc/**/*.md", "/usr/share/doc/**/*.markdown", "/usr/share/doc/**/README",
                "/usr/share/doc/**/README.*")

# a sentence ends at . ! ? (a closing quote or bracket may follow) before a capital
_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(]?[A-Z])")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|Mr|Mrs|Ms|Dr|St|No|Fig|[A-Z])\.$")
_LINK = re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")


@dataclass
class Section:
    """One subject: the sentences of one section of one document, in order."""

    source: str
    origin: str
    sentences: list[str]
    document: str = ""
    index: int = 0

    @property
    def group(self) -> str:
        """What draws spread over: a Debian file's package (Node.js ships hundreds of API pages), else the document."""
        return self.document.split("/")[4] if self.source == "debian" else self.document


def split_simple(paragraph: str) -> list[str]:
    """A paragraph's sentences by the simple rule (no cut after a common abbreviation or an initial)."""
    out: list[str] = []
    for piece in _SPLIT.split(paragraph):
        if out and _ABBREV.search(out[-1]):
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def _good_sentence(s: str) -> bool:
    words = s.split()
    return 4 <= len(words) <= 60 and s[0].isalnum() and s.endswith((".", "!", "?")) and "***" not in s


def _usable_run(sentences: list[str]) -> list[str]:
    """The section's leading sentences up to the first that is not a plain sentence."""
    out = []
    for s in sentences:
        if not _good_sentence(s):
            break
        out.append(s)
    return out


# ---- the prose snapshot: this repository's docs and the Debian packages' Markdown and READMEs ----

def _clean(paragraph: str) -> str:
    text = _LINK.sub(r"\1", paragraph)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("**", "").replace("__", "")
    return " ".join(text.split())


def _prose(paragraph: str) -> list[str] | None:
    """The sentences of a prose paragraph, or None where it is not plain prose."""
    if re.search(r"[{}|$\\]|https?:|www\.|\.\.\.|\s--\s*$", paragraph) \
            or sum(not c.isascii() for c in paragraph) > 0.02 * len(paragraph):  # another language
        return None
    words = paragraph.split()
    alpha = sum(w.strip(".,;:!?()\"'").replace("-", "").replace("'", "").isalpha() for w in words)
    if len(words) < 12 or alpha < 0.85 * len(words):
        return None
    sentences = split_simple(paragraph)
    return sentences if all(_good_sentence(s) for s in sentences) else None


def markdown_sections(text: str, per_paragraph: bool = False) -> list[tuple[str, list[list[str]]]]:
    """``(heading, [paragraph's sentences, ...])`` of each section of a Markdown (or plain) text, prose
    paragraphs only: code blocks, tables, lists, quotes and HTML are left out.  ``per_paragraph``: each
    paragraph a section of its own (a plain README, whose subjects have no headings)."""
    sections: list[tuple[str, list[list[str]]]] = [("", [])]
    block: list[str] = []
    bad = False
    fence = False

    def flush():
        nonlocal block, bad
        if block and not bad:
            sentences = _prose(_clean(" ".join(l.strip() for l in block)))
            if sentences:
                if per_paragraph:
                    sections.append((f"paragraph {len(sections)}", [sentences]))
                else:
                    sections[-1][1].append(sentences)
        block, bad = [], False

    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            flush()
            fence = not fence
            continue
        if fence:
            continue
        if re.match(r"#{1,6}\s", stripped):
            flush()
            sections.append((stripped.lstrip("#").strip(), []))
            continue
        if re.fullmatch(r"(=+|-+)", stripped) and len(block) == 1 and len(stripped) >= 3:
            title, block = block[0].strip(), []
            flush()
            sections.append((title, []))
            continue
        if not stripped:
            flush()
            continue
        if (line.startswith(("    ", "\t")) and not block) or stripped.startswith(("|", "-", "*", "+", ">", "<", "!", "[")) \
                or re.match(r"\d+[.)]\s", stripped):
            bad = True
        block.append(line)
    flush()
    return [(h, ps) for h, ps in sections if ps]


def extract_prose() -> list[dict]:
    """Every prose section of this repository's docs and of the Debian packages' Markdown and READMEs."""
    out = []
    repo_files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for path in repo_files:
        for heading, paras in markdown_sections(path.read_text(encoding="utf-8")):
            out.append({"source": "repo", "path": str(path.relative_to(REPO)), "heading": heading, "paragraphs": paras})
    seen_texts = set()
    per_package: dict[str, int] = {}
    files = sorted({f for g in DEBIAN_GLOBS for f in glob.glob(g, recursive=True)})
    for f in files:
        p = Path(f)
        if p.is_symlink() or not p.is_file() or p.suffix in (".gz", ".html", ".txt.gz") or p.stat().st_size > 200_000:
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text in seen_texts:  # the same file shipped by several packages
            continue
        seen_texts.add(text)
        markdown = p.suffix in (".md", ".markdown")
        package = p.parts[4]
        for heading, paras in markdown_sections(text, per_paragraph=not markdown):
            if per_package.get(package, 0) < DEBIAN_PER_PACKAGE and sum(map(len, paras)) >= 2:
                per_package[package] = per_package.get(package, 0) + 1
                out.append({"source": "debian", "path": f, "heading": heading, "paragraphs": paras})
    return out


# ---- the sections of every source ----

def shared_sections(source: str, rel: str) -> list[Section]:
    """Every reference segment of a labelled dev set, in document order, as a section."""
    out = []
    for doc in iter_documents(data_root() / rel):
        starts = [0, *doc.boundaries, doc.n]
        for i, (a, b) in enumerate(zip(starts, starts[1:])):
            out.append(Section(source, f"{rel}/{doc.id}#{i}", [_sentence(u) for u in doc.units[a:b]], doc.id, i))
    return out


def everyday_sections() -> list[Section]:
    """The everyday paragraphs (4 sentences) and messages (6 sentences), each a section."""
    out = [Section("everyday", f"everyday_paragraphs.txt:{i}", split_simple(p), f"p{i}")
           for i, p in enumerate(everyday_paragraphs())]
    messages = [l.strip() for l in MESSAGES.read_text(encoding="utf-8").splitlines() if l.strip() and not l.startswith("#")]
    out += [Section("everyday", f"everyday_messages.txt:{i}", split_simple(m), f"m{i}") for i, m in enumerate(messages)]
    return out


def prose_sections() -> list[Section]:
    """The snapshot's sections (``--extract``), each paragraph's sentences run together."""
    out = []
    for line in PROSE.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out.append(Section(r["source"], f"{r['path']}#{r['heading']}", [s for p in r["paragraphs"] for s in p], r["path"]))
    return out


def all_sections() -> dict[str, list[Section]]:
    """source name -> its sections."""
    by_source: dict[str, list[Section]] = {name: shared_sections(name, rel) for name, rel in SHARED}
    by_source["everyday"] = everyday_sections()
    for s in prose_sections():
        by_source.setdefault(s.source, []).append(s)
    return by_source


# ---- laying sentences out as paragraphs, and the records ----

@functools.lru_cache(maxsize=1)
def _tokenizer():
    return default_tokenizer()


def size(sentences: list[str]) -> int:
    """The default model's tokens of the sentences run together."""
    return len(_tokenizer().encode(" ".join(sentences))[0])


def layout(sentences: list[str], rng: random.Random, paragraphs: tuple[int, int], sizes: tuple[int, int],
           max_tokens: int = MAX_TOKENS) -> list[list[str]] | None:
    """The first sentences as ``paragraphs`` (min, max) paragraphs of ``sizes`` (min, max) sentences,
    under ``max_tokens``; None where the section is too short."""
    lo, hi = sizes
    if len(sentences) < paragraphs[0] * lo:
        return None
    p = rng.randint(paragraphs[0], min(paragraphs[1], len(sentences) // lo))
    counts = [rng.randint(lo, hi) for _ in range(p)]
    while True:
        if sum(counts) <= len(sentences) and size(sentences[:sum(counts)]) <= max_tokens:
            break
        big = [i for i, c in enumerate(counts) if c > lo]
        if big:
            counts[max(big, key=lambda i: counts[i])] -= 1
        elif len(counts) > paragraphs[0]:
            counts.pop()
        else:
            return None
    out, pos = [], 0
    for c in counts:
        out.append(sentences[pos:pos + c])
        pos += c
    return out


def record(doc_id: str, subjects: list[list[list[str]]], join: str, origins: list[str]) -> dict | None:
    """The record of ``subjects`` (each its paragraphs, each its sentences) joined by ``join``; a boundary
    where each subject after the first opens.  None where a boundary is not a unit start of the text (as
    the loaders split it) or a paragraph break inside a subject would be one."""
    text, bounds = "", []
    for i, paras in enumerate(subjects):
        for j, sentences in enumerate(paras):
            if text:
                text += JOINS[join]
            if i and not j:
                bounds.append(len(text))
            text += " ".join(sentences)
    rec = {"id": f"{doc_id}@{' + '.join(origins)}", "text": text + "\n", "boundaries": bounds,
           "source": " + ".join(origins), "origins": origins}
    doc = parse_jsonl(json.dumps(rec), "check")[0]
    return rec if [doc.starts[b] for b in doc.boundaries] == bounds else None


def spread(sections: list[Section], rng: random.Random) -> list[Section]:
    """``sections`` shuffled, then taken one group (:attr:`Section.group`) at a time in turn."""
    groups: dict[str, list[Section]] = {}
    for s in sections:
        groups.setdefault(s.group, []).append(s)
    order = sorted(groups)
    rng.shuffle(order)
    for g in order:
        rng.shuffle(groups[g])
    return [groups[g][i] for i in range(max(map(len, groups.values()))) for g in order if i < len(groups[g])]


def one_subject(by_source: dict[str, list[Section]], seed: int) -> list[dict]:
    """One section of one document as 2-4 paragraphs of 2-5 sentences (reference: no boundary)."""
    rng = random.Random(seed)
    out = []
    for source in ("wiki50", "clinical", "manifestos", "repo", "debian", "everyday"):
        pool = spread(by_source[source], rng)
        if source == "everyday":  # 20 messages as 3 (or 2) paragraphs, 20 paragraphs as 2 + 2
            pool = [s for s in pool if s.document[0] == "m"][:20] + [s for s in pool if s.document[0] == "p"]
        n = 0
        for section in pool:
            sentences = _usable_run(section.sentences)
            if section.source == "everyday":
                paras = (layout(sentences, rng, (2, 3), (2, 3)) if len(sentences) == 6
                         else [sentences[:2], sentences[2:4]] if len(sentences) == 4 else None)
            else:
                paras = layout(sentences, rng, (2, 4), (2, 5))
            rec = paras and record(f"one/{source}/blank/{n:02d}", [paras], "blank", [section.origin])
            if rec:
                out.append(rec)
                n += 1
            if n == ONE_PER_SOURCE:
                break
    return out


#: the paragraphs of each subject: all one paragraph, or some subject two (at most four in all)
_PLANS = {2: [(1, 1), (1, 2), (2, 1), (2, 2)], 3: [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2)]}


def _subject(section: Section, paragraphs: int, rng: random.Random, max_tokens: int) -> list[list[str]] | None:
    sentences = _usable_run(section.sentences)
    if section.source == "everyday" and len(sentences) == 4 and paragraphs == 2:
        return [sentences[:2], sentences[2:]]
    return layout(sentences, rng, (paragraphs, paragraphs), (2, 3 if paragraphs == 2 else 4), max_tokens)


def unrelated(by_source: dict[str, list[Section]], seed: int) -> list[dict]:
    """2-3 subjects of 1-2 paragraphs from different documents of different sources (or different everyday
    texts), each text with blank lines and run together (reference: a boundary where a subject opens)."""
    rng = random.Random(seed)
    sources = ("wiki50", "clinical", "manifestos", "repo", "debian", "everyday")
    groups: dict[str, dict[str, list[Section]]] = {}
    for name in sources:
        for section in by_source[name]:
            groups.setdefault(name, {}).setdefault(section.group, []).append(section)
    used: set[str] = set()
    out: list[dict] = []
    n = 0
    while n < UNRELATED_TEXTS:
        k = rng.choice((2, 3))
        plan = _PLANS[k][0] if n % 2 == 0 else rng.choice(_PLANS[k][1:])  # half all one paragraph
        names = ["everyday"] * k if rng.random() < 0.25 else rng.sample(sources, k)
        subjects, origins = [], []
        for name, paras in zip(names, plan):
            for _ in range(50):
                section = rng.choice(groups[name][rng.choice(sorted(groups[name]))])
                if section.origin in used or section.origin in origins:
                    continue
                laid = _subject(section, paras, rng, MAX_TOKENS // k)
                if laid:
                    subjects.append(laid)
                    origins.append(section.origin)
                    break
        if len(subjects) < k:
            continue
        label = "1para" if max(plan) == 1 else "2para"
        recs = [record(f"unrelated/{label}/{join}/{n:02d}", subjects, join, origins) for join in JOINS]
        if all(recs):
            out += recs
            used.update(origins)
            n += 1
    return out


def adjacent(by_source: dict[str, list[Section]], seed: int) -> list[dict]:
    """Two consecutive sections of one Wiki-50 dev or Clinical dev document, each 1-2 paragraphs of 2-4
    sentences, with blank lines and run together (reference: the section boundary)."""
    rng = random.Random(seed)
    out = []
    for source in ("wiki50", "clinical"):
        sections = by_source[source]
        pairs = [(a, b) for a, b in zip(sections, sections[1:]) if a.document == b.document]
        rng.shuffle(pairs)
        used: set[str] = set()
        n = 0
        for a, b in pairs:
            if a.origin in used or b.origin in used:
                continue
            subjects = [layout(_usable_run(s.sentences), rng, (1, 2), (2, 4), MAX_TOKENS // 2) for s in (a, b)]
            if not all(subjects):
                continue
            recs = [record(f"adjacent/{source}/{join}/{n:02d}", subjects, join, [a.origin, b.origin]) for join in JOINS]
            if all(recs):
                out += recs
                used.update((a.origin, b.origin))
                n += 1
            if n == ADJACENT_PER_SOURCE:
                break
    return out


def build(seed: int) -> dict[str, list[dict]]:
    """family name -> its records (:data:`FAMILIES`); the same seed and sources build the same."""
    by_source = all_sections()
    return {"short_one_dev": one_subject(by_source, seed),
            "short_unrelated_dev": unrelated(by_source, seed + 1),
            "short_adjacent_dev": adjacent(by_source, seed + 2)}


def lines_of(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--extract", action="store_true",
                    help=f"rewrite {PROSE.name} from this repository's docs and /usr/share/doc, then build")
    ap.add_argument("--check", action="store_true", help="only compare the committed families with what the seed builds")
    args = ap.parse_args(argv)
    if args.extract and not args.check:
        prose = extract_prose()
        PROSE.write_text(lines_of(prose), encoding="utf-8")
        print(f"{PROSE}: {len(prose)} prose sections")
    families = build(args.seed)
    differ = 0
    for name, records in families.items():
        path, lines = FAMILIES[name], lines_of(records)
        if args.check:
            same = path.is_file() and path.read_text(encoding="utf-8") == lines
            differ += not same
            print(f"{path}: {'up to date' if same else 'differs from what the seed builds'}")
            continue
        tmp = path.with_suffix(".tmp")
        tmp.write_text(lines, encoding="utf-8")
        tmp.replace(path)
        counts: dict[str, int] = {}
        for r in records:
            key = "/".join(r["id"].split("@")[0].split("/")[:3])
            counts[key] = counts.get(key, 0) + 1
        print(f"{path}: {len(records)} texts ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
