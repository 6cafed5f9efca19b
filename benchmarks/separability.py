"""How far the unit vectors tell a change of subject from a paragraph break within one (issue 48).

On issue 48's short families (``benchmarks/short_families.py``), each reference boundary is compared
with the paragraph breaks of the one-subject texts, the breaks a layout rule would cut at.  The
statistic is the evidence's likeness (:func:`~headseg.segmenter.evidence.likeness`): the cosine between
the mean unit directions of the two sides, for a reference boundary its two neighbouring reference
segments, for a paragraph break of a one-subject text everything before it against everything after.
Per family: the likeness's median and the AUC, the chance that a boundary of the family is less
alike than a paragraph break of one subject (1: always told apart, 0.5: no better than a coin).  Read
on the whole unit vector (what the evidence reads) and on each part of it: each layer's topic heads and
the model's own embedding.  The unit vectors are those ``Segmenter()`` computes (cached in
``runs/short_exact_cache.pkl``, shared with ``benchmarks/short_exact.py``).

    python -m benchmarks.separability
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import REPO, load_average, markdown_table, offline_settings
from benchmarks.short_exact import Store, group_of, load

FAMILIES = ("short_one_dev", "short_unrelated_dev", "short_adjacent_dev", "short_dev", "short_sections_dev")
NAMES = {"unrelated": "unrelated subjects", "adjacent": "adjacent sections of one article",
         "short": "short_dev (consecutive dev segments)", "short_sections": "short_sections_dev"}


def parts(seg, width: int) -> dict[str, slice]:
    """The columns of a unit vector ``[width]``: all of it, each layer's topic heads, the model's embedding."""
    heads = list(seg.topic_heads)
    hidden = seg.loaded.model.config.hidden_size
    own = hidden if seg.profile.topic_output_weight else 0
    per = (width - own) // len(heads)
    out = {"whole vector": slice(0, width)}
    at = 0
    for layer in sorted({h[0] for h in heads}):
        k = sum(h[0] == layer for h in heads)
        out[f"layer {layer} heads"] = slice(at, at + k * per)
        at += k * per
    if own:
        out["model embedding"] = slice(at, width)
    return out


def auc(neg: np.ndarray, pos: np.ndarray) -> float:
    """The chance that a value of ``pos`` is below one of ``neg`` (ties count half)."""
    return float(np.mean(pos[:, None] < neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=REPO / "runs" / "short_exact_cache.pkl")
    args = ap.parse_args(argv)
    offline_settings()
    from headseg.api import Segmenter
    from headseg.segmenter.evidence import EvidenceInput, directions, likeness
    from headseg.segmenter.options import SegmentOptions

    seg = Segmenter(quiet=True)
    store = Store(args.cache)
    docs = load(list(FAMILIES))
    values: dict[str, dict[str, list[float]]] = {}
    split = None
    for d in docs:
        doc = seg.document(d.text, SegmentOptions())
        x = store.get("x", (d.text, tuple(doc.units)), lambda: seg.unit_vectors(doc.tokens, doc.units))
        split = split or parts(seg, x.shape[1])
        starts = [a for a, _ in doc.units]
        kind = group_of(d.id)[0]
        if kind != "one" and not d.boundaries:
            continue  # a one-topic text of another family: its breaks are not the one-subject family's
        if not d.boundaries:
            # a paragraph break: a unit that opens after a blank line
            sides = [(0, m, len(starts)) for m in range(1, len(starts)) if "\n\n" in d.text[starts[m - 1]:starts[m]]]
        else:
            ms = sorted({int(np.argmin([abs(s - d.spans[b][0]) for s in starts])) for b in d.boundaries})
            edges = [0, *ms, len(starts)]
            sides = [(edges[i], m, edges[i + 2]) for i, m in enumerate(ms)]
        key = "one subject: paragraph breaks" if not d.boundaries else NAMES.get(kind, kind)
        for name, cols in split.items():
            # the evidence's own likeness, on the columns as they came (no projection: it reads none)
            u = np.asarray(x[:, cols], dtype=np.float64)
            t = EvidenceInput(None, None, u, directions(u, centred=False).inv)
            values.setdefault(key, {}).setdefault(name, []).extend(likeness(t, a, m, b) for a, m, b in sides)
    store.save()
    neg_key = "one subject: paragraph breaks"
    neg = {k: np.asarray(v) for k, v in values[neg_key].items()}
    print(f"{len(docs)} texts; {load_average()}\n")
    print(f"Likeness (median) of each family's boundaries and AUC against the {len(neg['whole vector'])} paragraph "
          f"breaks of one-subject texts (median likeness in the first row)\n")
    header = ["boundaries", "count", *split]
    rows = [[neg_key, str(len(neg["whole vector"])), *(f"{np.median(neg[p]):.3f}" for p in split)]]
    for key, by in values.items():
        if key == neg_key:
            continue
        rows.append([key, str(len(by["whole vector"])),
                     *(f"{np.median(by[p]):.3f} / AUC {auc(neg[p], np.asarray(by[p])):.2f}" for p in split)])
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
