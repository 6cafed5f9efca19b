"""Unit (sentence) boundary F1: headseg's head-based units vs rule-based splitters.

Each dev document's gold sentences are joined with single spaces (no line
breaks, so line structure gives nothing away), once with punctuation kept and
once with every punctuation-only word removed.  A boundary is the index of the
word that starts a sentence; a prediction counts when it falls on a gold
boundary word (exact) or within one word (±1).

    python -m benchmarks.units [--docs 6] [--sentences 80] [--only auto] [--commit all|first] [--strip both]

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import glob
import re
import time
import unicodedata
from pathlib import Path

import numpy as np

from benchmarks.common import markdown_table, segmentation_root


def read_choi(path: str) -> list[str]:
    lines = Path(path).read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")
    return [l.strip() for l in lines if l.strip() and l.strip() != "=========="]


def _is_punct(word: str) -> bool:
    return all(unicodedata.category(c).startswith("P") for c in word)


def build(sentences: list[str], strip: bool) -> tuple[str, list[int], list[int]]:
    """Text, word start offsets, and gold boundary word indices (sentence starts after the first)."""
    words, gold = [], []
    for s in sentences:
        ws = s.split()
        if strip:
            ws = [re.sub(r"[^\w'-]+$", "", w) for w in ws if not _is_punct(w)]
            ws = [w for w in ws if w]
        if not ws:
            continue
        if words:
            gold.append(len(words))
        words.extend(ws)
    text = " ".join(words)
    starts, pos = [], 0
    for w in words:
        starts.append(pos)
        pos += len(w) + 1
    return text, starts, gold


def to_words(char_bounds, starts) -> set[int]:
    arr = np.asarray(starts)
    out = set()
    for c in char_bounds:
        i = int(np.argmin(np.abs(arr - c)))
        if i > 0:
            out.add(i)
    return out


def prf(pred: set[int], gold: set[int], tol: int) -> tuple[int, int, int]:
    tp, used = 0, set()
    for p in sorted(pred):
        for g in (p, p - 1, p + 1) if tol else (p,):
            if g in gold and g not in used:
                used.add(g)
                tp += 1
                break
    return tp, len(pred), len(gold)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=6, help="documents per source")
    ap.add_argument("--sentences", type=int, default=80, help="first N sentences of each document")
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--block", type=int, default=None)
    ap.add_argument("--only", default=None, help="run only methods whose name contains this text")
    ap.add_argument("--commit", choices=("all", "first"), default=None,
                    help="the unit detector's commit rule (default: UnitParams' default)")
    ap.add_argument("--strip", choices=("both", "kept", "stripped"), default="both",
                    help="run with punctuation kept, stripped, or both")
    args = ap.parse_args()

    try:
        import pysbd
    except ImportError:  # optional peer: the headseg rows do not need it
        pysbd = None
        print("(pysbd is not installed: its rows are left out)\n")

    from headseg.analysis.text import split_sentences
    from headseg.api import Segmenter

    seg = Segmenter(backend="torch")
    if args.threshold is not None:
        seg.unit_params.threshold = args.threshold
    if args.block is not None:
        seg.unit_params.block = args.block
    files = sorted(glob.glob(str(segmentation_root() / "choi/1/3-11/*.ref")))[: args.docs]
    files += sorted(glob.glob(str(segmentation_root() / "lectures_ai/*.txt")))[: args.docs]
    if args.commit is not None:
        seg.unit_params.commit = args.commit
    methods = {
        "headseg units, heads only (--unit-mode heads)": lambda t: [a for a, _ in seg.units(t, mode="heads")[1:]],
        "headseg units, default (--unit-mode auto)": lambda t: [a for a, _ in seg.units(t, mode="auto")[1:]],
        "headseg sentence rules only (--unit-mode rules)": lambda t: [a for a, _ in split_sentences(t)[1:]],
    }
    if pysbd is not None:
        sbd = pysbd.Segmenter(language="en", clean=False, char_span=True)
        methods["pysbd"] = lambda t: [s.start for s in sbd.segment(t)[1:]]
    if args.only:
        methods = {k: v for k, v in methods.items() if args.only in k}
    rows = []
    for strip in {"both": (False, True), "kept": (False,), "stripped": (True,)}[args.strip]:
        for name, fn in methods.items():
            tot = {0: np.zeros(3), 1: np.zeros(3)}
            t0 = time.perf_counter()
            for f in files:
                text, starts, gold = build(read_choi(f)[: args.sentences], strip)
                pred = to_words(fn(text), starts)
                for tol in (0, 1):
                    tot[tol] += prf(pred, set(gold), tol)
            dt = time.perf_counter() - t0
            cells = []
            for tol in (0, 1):
                tp, npred, ngold = tot[tol]
                p = tp / max(npred, 1)
                r = tp / max(ngold, 1)
                f1 = 2 * p * r / max(p + r, 1e-12)
                cells.append(f"{p:.3f} / {r:.3f} / **{f1:.3f}**")
            rows.append((("stripped" if strip else "kept"), name, *cells, f"{dt:.1f}"))
    print(f"Unit boundary detection, {len(files)} documents (Choi 1/3-11 and lectures_ai), "
          f"first {args.sentences} sentences each, joined with spaces; detector commit rule "
          f"\"{seg.unit_params.commit}\".\n")
    print(markdown_table(["punctuation", "method", "P / R / F1 exact", "P / R / F1 ±1 word", "seconds"], rows))


if __name__ == "__main__":
    main()
