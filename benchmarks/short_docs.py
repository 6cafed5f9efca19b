"""Build the short-document dev family: texts of 2-4 short paragraphs on different subjects.

What a person pastes first is a short text of a few paragraphs; the other dev families are long
documents of many topics.  This script writes ``benchmarks/data/short_dev.jsonl`` (one JSON object
a line: ``id``, ``text``, ``boundaries`` as character offsets, ``source``), a dev set like the
others (``python -m benchmarks.segmentation --datasets short_dev``), from two kinds of text:

* **everyday**: the paragraphs of ``benchmarks/data/everyday_paragraphs.txt`` (40 subjects written
  for this: news, recipes, notices, product notes, travel, health, sport, school, software ...),
  combined 2-4 at a time;
* **segments of the dev sets**: 2-4 consecutive reference segments of a document of Choi 3/3-11,
  Clinical, the two lecture sets, the manifestos and Wiki-50 dev, each cut to its first 3-5
  sentences (a sentence without end punctuation gets a full stop, since the sets have one
  sentence a line and the text here runs on).

Each combination is written with the paragraphs joined by a blank line, by a line break (everyday
only) and by a space (no break at all).  Seeded: the same seed writes the same file.

    python -m benchmarks.short_docs            # writes benchmarks/data/short_dev.jsonl
    python -m benchmarks.short_docs --family paragraphs   # benchmarks/data/paragraphs_dev.jsonl

The second family is the guard: the long documents of Wiki-50 dev and Clinical with every section
written as paragraphs of 3-5 sentences, so that most paragraph breaks are not topic boundaries.
The third is the short guard: one or two consecutive reference segments of a dev-set document (the
sources above), each written as 2-3 paragraphs of 3-4 sentences between blank lines, so that a
short text's paragraph breaks are mostly not boundaries either (a one-topic e-mail or notice of a
few paragraphs; a text of two subjects with two paragraphs each).

    python -m benchmarks.short_docs --family sections     # benchmarks/data/short_sections_dev.jsonl
    python -m benchmarks.short_docs --check    # exits 1 if the committed file differs
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from benchmarks.common import BENCH_DATA, data_root
from headseg.segmenter.evaluation.loaders import iter_documents

PARAGRAPHS = BENCH_DATA / "everyday_paragraphs.txt"
OUT = BENCH_DATA / "short_dev.jsonl"
PARAGRAPHS_OUT = BENCH_DATA / "paragraphs_dev.jsonl"
SECTIONS_OUT = BENCH_DATA / "short_sections_dev.jsonl"
#: texts of the short guard per source and number of segments (1 and 2)
SECTION_DOCUMENTS = 8
#: the long documents whose sections are written as several paragraphs: the check that a paragraph
#: break is taken as a hint, not as a boundary
PARAGRAPH_DOCUMENTS = 25
PARAGRAPH_SOURCES = (("wiki50", "segmentation/wiki50_dev"), ("clinical", "segmentation/clinical_dev"))

#: (name, folder under the data root) of the dev sets the segment texts come from
SOURCES = (("choi", "segmentation/choi/3/3-11"), ("clinical", "segmentation/clinical_dev"),
           ("lectures_ai", "segmentation/lectures_ai"), ("lectures_physics", "segmentation/lectures_physics"),
           ("manifestos", "corpus"), ("wiki50", "segmentation/wiki50_dev"))
EVERYDAY_COMBINATIONS = 36
SOURCE_DOCUMENTS = 8
SEPARATORS = {"blank": "\n\n", "line": "\n", "space": " "}
_ENDS = (".", "!", "?", '"', "'", ")", ":", ";")


def everyday_paragraphs() -> list[str]:
    return [line.strip() for line in PARAGRAPHS.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def _sentence(unit: str) -> str:
    unit = " ".join(unit.split())
    return unit if unit.endswith(_ENDS) else unit + "."


def source_paragraphs(folder: Path, rng: random.Random) -> tuple[list[list[str]], str]:
    """2-4 consecutive segments of a random document of ``folder``, each its first 3-5 sentences."""
    docs = [d for d in iter_documents(folder) if len(d.boundaries) >= 2]
    doc = rng.choice(docs)
    starts = [0, *doc.boundaries, doc.n]
    segments = [doc.units[a:b] for a, b in zip(starts, starts[1:])]
    usable = [i for i, s in enumerate(segments) if len(s) >= 2]
    k = rng.randint(2, 4)
    first = rng.randrange(0, max(1, len(segments) - k + 1))
    chosen = [segments[i] for i in range(first, min(first + k, len(segments))) if i in usable]
    return [[_sentence(u) for u in s[:rng.randint(3, 5)]] for s in chosen], doc.id


def record(doc_id: str, paragraphs: list[str], sep: str, source: str) -> dict:
    text, boundaries = "", []
    for i, p in enumerate(paragraphs):
        if i:
            text += sep
            boundaries.append(len(text))
        text += p
    return {"id": doc_id, "text": text + "\n", "boundaries": boundaries, "source": source}


def build(seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    paras = everyday_paragraphs()
    for i in range(EVERYDAY_COMBINATIONS):
        chosen = rng.sample(range(len(paras)), rng.randint(2, 4))
        for name, sep in SEPARATORS.items():
            out.append(record(f"everyday-{i:02d}-{name}", [paras[j] for j in chosen], sep,
                              f"everyday paragraphs {chosen}"))
    for source, rel in SOURCES:
        for i in range(SOURCE_DOCUMENTS):
            for _ in range(20):  # a document whose chosen segments are too short: draw again
                segs, doc_id = source_paragraphs(data_root() / rel, rng)
                if len(segs) >= 2:
                    break
            for name in ("blank", "space"):
                out.append(record(f"{source}-{i:02d}-{name}", [" ".join(s) for s in segs], SEPARATORS[name],
                                  f"{rel}/{doc_id}"))
    return out


def paragraph_documents(seed: int) -> list[dict]:
    """Long documents whose reference segments are each written as paragraphs of 3-5 sentences,
    every paragraph break a blank line: most paragraph breaks are not boundaries."""
    rng = random.Random(seed)
    out = []
    for source, rel in PARAGRAPH_SOURCES:
        for doc in iter_documents(data_root() / rel, limit=PARAGRAPH_DOCUMENTS):
            starts = [0, *doc.boundaries, doc.n]
            paragraphs, boundaries = [], []
            for a, b in zip(starts, starts[1:]):
                units = [_sentence(u) for u in doc.units[a:b]]
                if paragraphs:
                    boundaries.append(len(paragraphs))
                while units:
                    size = rng.randint(3, 5)
                    paragraphs.append(" ".join(units[:size]))
                    units = units[size:]
            text, offsets = "", []
            for i, para in enumerate(paragraphs):
                if i:
                    text += "\n\n"
                offsets.append(len(text))
                text += para
            out.append({"id": f"{source}-{doc.id}", "text": text + "\n",
                        "boundaries": [offsets[i] for i in boundaries], "source": f"{rel}/{doc.id}"})
    return out


def section_documents(seed: int) -> list[dict]:
    """Short texts of one or two reference segments, each written as 2-3 paragraphs of 3-4 sentences
    between blank lines: a paragraph break is a boundary only where a segment opens."""
    rng = random.Random(seed)
    out = []
    for source, rel in SOURCES:
        docs = list(iter_documents(data_root() / rel))
        for k in (1, 2):
            for i in range(SECTION_DOCUMENTS):
                for _ in range(100):  # a document without k consecutive segments of 6+ units: draw again
                    doc = rng.choice(docs)
                    starts = [0, *doc.boundaries, doc.n]
                    runs = [j for j in range(len(starts) - k)
                            if all(starts[j + m + 1] - starts[j + m] >= 6 for m in range(k))]
                    if runs:
                        break
                else:
                    raise SystemExit(f"{rel}: no document with {k} consecutive segments of 6+ units")
                j = rng.choice(runs)
                paragraphs, opens = [], []
                for m in range(k):
                    units = [_sentence(u) for u in doc.units[starts[j + m]:starts[j + m + 1]]]
                    opens.append(len(paragraphs))
                    for _ in range(rng.randint(2, 3)):
                        size = rng.randint(3, 4)
                        if len(units) < 2:
                            break
                        paragraphs.append(" ".join(units[:size]))
                        units = units[size:]
                text, offsets = "", []
                for para in paragraphs:
                    if text:
                        text += "\n\n"
                    offsets.append(len(text))
                    text += para
                out.append({"id": f"{source}-{k}-{i:02d}", "text": text + "\n",
                            "boundaries": [offsets[o] for o in opens[1:]], "source": f"{rel}/{doc.id}"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--family", choices=("short", "paragraphs", "sections"), default="short",
                    help="short: the short documents; paragraphs: long documents written in paragraphs; "
                         "sections: short texts of one or two segments written in paragraphs")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--check", action="store_true", help="only compare with the file at --out")
    args = ap.parse_args(argv)
    builders = {"short": (build, OUT), "paragraphs": (paragraph_documents, PARAGRAPHS_OUT),
                "sections": (section_documents, SECTIONS_OUT)}
    make, default_out = builders[args.family]
    records = make(args.seed)
    if args.out is None:
        args.out = default_out
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == lines
        print(f"{args.out}: {'up to date' if same else 'differs from what the seed builds'}")
        return 0 if same else 1
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(lines, encoding="utf-8")
    tmp.replace(args.out)
    print(f"{args.out}: {lines.count(chr(10))} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
