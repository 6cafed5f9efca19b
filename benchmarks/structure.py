"""Documents with structure (issue 34): does a chunker keep Markdown's blocks whole and open chunks at headings?

On Markdown documents, measured with the embedded model's own tokens (no special tokens),
at each ``--budgets`` value (``none``: no limit), for each chunker:

* **fitting blocks cut**: code blocks and tables (:mod:`headseg.segmenter.structure`) that
  fit the budget (every one without a limit) with a chunk boundary strictly inside them
  (of how many code blocks and tables there are);
* **cuts inside a line**: chunk starts inside a line (not at its start) that do not follow
  a sentence's end (:func:`headseg.segmenter.blocks.after_sentence_end`), lines over the
  budget aside;
* **cuts at a soft line break**: chunk starts at the start of a paragraph's second or later line
  where no sentence ends before it (a hard-wrapped paragraph cut mid-sentence);
* **headings opening a chunk**: the share of headings at which a chunk starts, or at the blank
  lines right before it, or at a heading right above it (a run of headings with nothing
  between them opens one chunk);
* **headings passed over**: headings that open no chunk while a chunk opens inside their section
  (from the heading to the next one): the heading went with the chunk before, and the section is
  cut, but not where it begins.

Chunkers: ``headseg`` (``Segmenter().segment(text, max_tokens=N, structure="markdown")``,
what the command line does for a ``.md`` file) and ``langchain``
(``RecursiveCharacterTextSplitter.from_language(Language.MARKDOWN, chunk_size=N,
chunk_overlap=0)`` with the model's token count as its length; it needs a size, so not
at ``none``).  Documents: this repository's ``docs/*.md`` and ``README.md``, and the long
descriptions (the body of ``*.dist-info/METADATA`` over 3 KB whose
``Description-Content-Type`` is ``text/markdown``) of the packages in ``--site``.

    python -m benchmarks.structure [--budgets 128,256,512,none] [--site .venv/lib/python3.11/site-packages]
        [--limit N] [--methods headseg,langchain]
    python -m benchmarks.structure --files '/usr/share/doc/**/*.md'   # held out: not what the bonus was set on

Unit vectors are computed once per document and unit (each unit is encoded alone, so a
unit's vector does not depend on the budget).  Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import bisect
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import REPO as ROOT

SITE = ROOT / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def held_out(pattern: str, limit: int | None) -> list[tuple[str, str]]:
    """``(name, text)`` of the Markdown files matching ``pattern`` (a recursive glob) of 3 to 100 KB:
    documents the heading bonus was not set on (``--files '/usr/share/doc/**/*.md'``)."""
    import glob

    paths = sorted(p for p in glob.glob(pattern, recursive=True)
                   if Path(p).is_file() and 3000 < Path(p).stat().st_size <= 100_000)
    out = [(p, Path(p).read_text(encoding="utf-8", errors="replace")) for p in paths]
    return out[:limit] if limit else out


def documents(site: Path, limit: int | None) -> list[tuple[str, str]]:
    """``(name, text)``: the repository's Markdown, then the installed packages' Markdown descriptions."""
    out = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
           for p in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]]
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        if meta.stat().st_size <= 3000:
            continue
        raw = meta.read_text(encoding="utf-8", errors="replace")
        head, _, body = raw.partition("\n\n")
        kinds = [line.split(":", 1)[1].strip().lower() for line in head.splitlines()
                 if line.lower().startswith("description-content-type:")]
        if kinds and kinds[0].startswith("text/markdown") and body.strip():
            out.append((meta.parent.name, body))
    return out[:limit] if limit else out


def line_bounds(text: str) -> list[int]:
    from headseg.segmenter.structure import line_starts

    return line_starts(text)


def measure(text: str, starts: list[int], structure, count, budget: int | None) -> tuple[int, ...]:
    """``(fitting blocks cut, code blocks and tables, cuts inside a line, headings opening, headings,
    cuts at a soft line break, headings passed over)`` of the chunks starting
    at ``starts`` (sorted, 0 first).  A soft line break: the start of a paragraph's second or later
    line, where no sentence ends before it.  A heading passed over opens no chunk, while a chunk opens
    inside its section (from the heading to the next heading)."""
    from headseg.segmenter.blocks import after_sentence_end, at_line_start, content_start

    cuts = [c for c in starts if 0 < c < len(text)]
    blocks = [b for b in structure.blocks if b.kind in ("code", "table")]
    cut_blocks = 0
    for b in blocks:
        end = b.start + len(text[b.start:b.end].rstrip())
        i = bisect.bisect_right(cuts, content_start(text, b.start, b.end))
        if i < len(cuts) and cuts[i] < end and (budget is None or count(text[b.start:b.end]) <= budget):
            cut_blocks += 1
    lines = line_bounds(text)
    inside = 0
    for c in cuts:
        if at_line_start(text, c) or after_sentence_end(text, c):
            continue
        li = bisect.bisect_right(lines, c) - 1
        if budget is None or count(text[lines[li]:lines[li + 1]]) <= budget:
            inside += 1
    paragraphs = [b for b in structure.blocks if b.kind == "paragraph"]
    para_starts = [b.start for b in paragraphs]
    soft = 0
    for c in cuts:
        i = bisect.bisect_right(para_starts, c) - 1
        if (i >= 0 and content_start(text, paragraphs[i].start, paragraphs[i].end) < c < paragraphs[i].end
                and at_line_start(text, c) and not after_sentence_end(text, c)):
            soft += 1
    heads = sorted(structure.headings, key=lambda b: b.start)
    ends = {b.start + len(text[b.start:b.end].rstrip()): b for b in heads}
    chunk_starts = set(starts)
    opens = []  # per heading: whether a chunk opens at it
    at_heading = set()  # the cuts that open a heading's chunk
    for h in heads:
        lo = h.start
        while True:  # back over blank lines and the headings right above
            p = lo
            while p > 0 and text[p - 1].isspace():
                p -= 1
            if p in ends and ends[p].start < lo:
                lo = ends[p].start
                continue
            lo = p if p < lo else lo
            break
        hit = [c for c in range(lo, content_start(text, h.start, h.end) + 1) if c in chunk_starts]
        opens.append(bool(hit))
        at_heading.update(hit)
    # a heading that opens no chunk while its section is cut further down: the heading went with the
    # chunk before, and the section was cut, but not where it begins (passed over for a cut beside it)
    head_starts = [h.start for h in heads]
    passed_over = set()
    for c in cuts:
        i = bisect.bisect_right(head_starts, c) - 1
        if c not in at_heading and i >= 0 and not opens[i]:
            passed_over.add(i)
    return cut_blocks, len(blocks), inside, sum(opens), len(heads), soft, len(passed_over)


def headseg_chunker(segmenter):
    """``(text, budget) -> chunk starts`` with unit vectors cached per document and unit."""
    cache: dict[tuple[int, int, int], np.ndarray] = {}
    inner = segmenter.unit_vectors_many

    def cached(items, progress=None):
        out = []
        for doc, units in items:
            key = hash(doc.text)
            todo = [u for u in units if (key, *u) not in cache]
            if todo:
                for u, v in zip(todo, inner([(doc, todo)])[0]):
                    cache[(key, *u)] = v
            out.append(np.stack([cache[(key, *u)] for u in units]) if units else np.zeros((0, 1)))
        return out

    segmenter.unit_vectors_many = cached

    def chunk(text: str, budget: int | None) -> list[int]:
        return [s.start for s in segmenter.segment(text, max_tokens=budget, structure="markdown")]

    return chunk


def langchain_chunker(count):
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    def chunk(text: str, budget: int | None) -> list[int] | None:
        if budget is None:
            return None
        splitter = RecursiveCharacterTextSplitter.from_language(Language.MARKDOWN, chunk_size=budget,
                                                                chunk_overlap=0, length_function=count)
        out, pos = [0], 0
        for piece in splitter.split_text(text):
            s = text.find(piece, pos)
            if s < 0:
                raise SystemExit("the Markdown splitter returned text that is not in the document")
            if s > 0:
                out.append(s)
            pos = s + len(piece)
        return sorted(set(out))

    return chunk


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="128,256,512,none")
    ap.add_argument("--site", default=str(SITE))
    ap.add_argument("--limit", type=int, default=None, help="only the first N documents")
    ap.add_argument("--methods", default="headseg,langchain")
    ap.add_argument("--files", default=None, metavar="GLOB",
                    help="measure these Markdown files (3-100 KB) instead of the repository's and --site's")
    args = ap.parse_args()
    budgets = [None if b == "none" else int(b) for b in args.budgets.split(",")]

    from headseg import Segmenter
    from headseg.analysis.text import tokenize
    from headseg.segmenter.structure import read_markdown

    segmenter = Segmenter()
    tokenizer = segmenter.encoder.tokenizer

    def count(t: str) -> int:
        return len(tokenize(t, tokenizer))

    docs = held_out(args.files, args.limit) if args.files else documents(Path(args.site), args.limit)
    structures = [read_markdown(t) for _, t in docs]
    methods = {"headseg": lambda: headseg_chunker(segmenter), "langchain": lambda: langchain_chunker(count)}
    chunkers = {m: methods[m]() for m in args.methods.split(",")}
    print(f"{len(docs)} documents, {sum(len(t) for _, t in docs)} characters", file=sys.stderr)
    rows = []
    for name, chunk in chunkers.items():
        for budget in budgets:
            t0, tot, skipped = time.time(), np.zeros(7, dtype=np.int64), False
            for (_, text), st in zip(docs, structures):
                starts = chunk(text, budget)
                if starts is None:
                    skipped = True
                    break
                tot += measure(text, starts, st, count, budget)
            rows.append((name, budget, None if skipped else tot))
            print(f"{name} {budget}: {None if skipped else tot.tolist()} ({time.time() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    head = "| | " + " | ".join(f"{n} {'none' if b is None else b}" for n, b, _ in rows) + " |"
    print(head)
    print("|---|" + "---:|" * len(rows))

    def cell(r, f):
        return "–" if r is None else f(r)

    print("| code blocks and tables cut although they fit the budget (of "
          f"{next(r[1] for _, _, r in rows if r is not None)}) | "
          + " | ".join(cell(r, lambda r: str(r[0])) for _, _, r in rows) + " |")
    print("| cuts inside a line, not after a sentence's end | "
          + " | ".join(cell(r, lambda r: str(r[2])) for _, _, r in rows) + " |")
    print("| cuts at a soft line break of a paragraph, mid-sentence | "
          + " | ".join(cell(r, lambda r: str(r[5])) for _, _, r in rows) + " |")
    print(f"| headings that open a chunk (of {next(r[4] for _, _, r in rows if r is not None)}) | "
          + " | ".join(cell(r, lambda r: f"{100 * r[3] / max(r[4], 1):.0f} %") for _, _, r in rows) + " |")
    print("| headings passed over: no chunk opens at them, one opens inside their section | "
          + " | ".join(cell(r, lambda r: str(r[6])) for _, _, r in rows) + " |")


if __name__ == "__main__":
    main()
