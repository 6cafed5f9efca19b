"""How well a method's boundary confidences match how often its boundaries are right.

A boundary is *right* when a reference boundary lies within one reference unit of it (the
``±1`` of the boundary precision in :mod:`~headseg.segmenter.evaluation.metrics`).  Boundaries are
binned by confidence into ``bins`` equal bins of [0, 1] (the last one closed); for each bin the
reliability table gives the boundaries in it, their mean confidence and the share of them that are
right.  A calibrated confidence has the two equal in every bin with enough boundaries: headseg's is
fitted on its dev families (docs/results.md, "Calibration"), and ``headseg evaluate --calibration``
prints this table for any labelled data, where it may be off as far as the families differ;
:func:`reliability_png` draws it (``--calibration-png``; matplotlib, the ``plots`` extra).

Cost: O(B log R) for B boundaries against R reference boundaries per document.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from headseg.analysis.errors import HeadsegError, shown

from .harness import Dataset, ResultStore, record_key

#: how far (in reference units) a boundary may lie from a reference boundary and still be right
TOLERANCE = 1
#: the tolerance between a bin's mean confidence and its share right that counts as calibrated, and the
#: fewest boundaries a bin needs for that to be read (issue 48's acceptance)
WITHIN = 0.1
LEAST = 30


class ReliabilityBin(NamedTuple):
    """One confidence bin: its label (``"0.8–0.9"``), its boundaries, their mean confidence, the share right."""

    label: str
    boundaries: int
    confidence: float
    right: float

    @property
    def calibrated(self) -> bool | None:
        """Whether the mean confidence is within :data:`WITHIN` of the share right (None: fewer than
        :data:`LEAST` boundaries, too few to say)."""
        return None if self.boundaries < LEAST else abs(self.confidence - self.right) <= WITHIN


def hits(reference: Sequence[int], found: Sequence[int], confidence: Sequence[float | None]) -> list[tuple[float, bool]]:
    """``(confidence, right)`` of each found boundary that has a confidence.

    ``reference`` and ``found``: unit indices that open a segment (sorted or not); ``confidence``: one
    per found boundary (None: the method gave it none, and it is left out).
    """
    if len(found) != len(confidence):
        raise HeadsegError(f"{len(found)} boundaries but {len(confidence)} confidences")
    ref = sorted(int(r) for r in reference)
    out = []
    for b, c in zip(found, confidence):
        if c is None:
            continue
        c = float(c)
        if not 0.0 <= c <= 1.0:  # also NaN
            raise HeadsegError(f"a confidence must be in [0, 1] (got {c})")
        i = bisect.bisect_left(ref, int(b) - TOLERANCE)
        out.append((c, i < len(ref) and ref[i] <= int(b) + TOLERANCE))
    return out


def reliability(pairs: Iterable[tuple[float, bool]], bins: int = 10) -> list[ReliabilityBin]:
    """The reliability table of ``(confidence, right)`` pairs: the non-empty bins of ``bins`` equal bins."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise HeadsegError(f"bins must be a positive integer (got {shown(bins)})")
    acc = [[0, 0.0, 0] for _ in range(bins)]
    # bin i holds i/bins <= c < (i+1)/bins compared with those very floats (floor(c·bins) can disagree
    # with them at an edge by rounding); 1.0 goes in the last bin
    edges = [i / bins for i in range(bins)]
    for c, right in pairs:
        i = max(0, min(bisect.bisect_right(edges, float(c)) - 1, bins - 1))
        acc[i][0] += 1
        acc[i][1] += float(c)
        acc[i][2] += bool(right)
    return [ReliabilityBin(f"{i / bins:.1f}–{(i + 1) / bins:.1f}", n, s / n, r / n)
            for i, (n, s, r) in enumerate(acc) if n]


def confidence_hits(store: ResultStore, datasets: Sequence[Dataset], method: str,
                    mode: str) -> tuple[list[tuple[float, bool]], int, int]:
    """``(confidence, right)`` of every boundary ``method`` found with a confidence on the documents of
    ``datasets`` (:func:`hits`: right within one reference unit); and how many finished documents had
    confidences and how many had none (a method that gives none, records of an older results file, or
    a record whose confidences are not one number in [0, 1] or null per boundary)."""
    pairs: list[tuple[float, bool]] = []
    with_conf = without = 0
    for ds in datasets:
        for doc in ds.documents:
            rec = store.records.get(record_key(ds.name, doc.id, method, mode))
            if rec is None or rec.get("status") != "ok":
                continue
            conf = rec.get("confidence")
            if not (isinstance(conf, list) and len(conf) == len(rec["boundaries"]) and all(
                    c is None or (isinstance(c, (int, float)) and not isinstance(c, bool) and 0 <= c <= 1)
                    for c in conf)):
                without += 1
                continue
            with_conf += 1
            pairs += hits(doc.boundaries, rec["boundaries"], conf)
    return pairs, with_conf, without


def format_reliability(table: Sequence[ReliabilityBin]) -> str:
    """The table as Markdown: bin, boundaries, mean confidence, share right, and whether within ±0.1."""
    rows = ["| confidence | boundaries | mean confidence | share right | within ±0.1 |", "|---|---:|---:|---:|---|"]
    for b in table:
        verdict = {True: "yes", False: "no", None: f"(< {LEAST})"}[b.calibrated]
        rows.append(f"| {b.label} | {b.boundaries} | {b.confidence:.3f} | {b.right:.3f} | {verdict} |")
    return "\n".join(rows)


#: the PNG text chunk that marks a diagram as headseg's (:func:`is_reliability_png`): a file without it is
#: not overwritten
PNG_SOFTWARE = "headseg reliability diagram"


def reliability_png(tables: dict[str, Sequence[ReliabilityBin]], title: str = "Boundary confidence") -> bytes:
    """The reliability diagram of one or more tables (label → bins) as PNG bytes: each bin's share right
    against its mean confidence, the diagonal and the ±:data:`WITHIN` band; the first table's points
    carry their boundary counts.  Needs matplotlib (imported here, not with the module); drawn on a
    ``Figure`` of its own, without pyplot, so the host's matplotlib backend and open figures stay as they are."""
    import io

    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 5), dpi=120)
    ax = fig.subplots()
    ax.fill_between([0, 1], [-WITHIN, 1 - WITHIN], [WITHIN, 1 + WITHIN], color="0.9", label=f"±{WITHIN}")
    ax.plot([0, 1], [0, 1], color="0.5", lw=1)
    for k, (label, table) in enumerate(tables.items()):
        ax.plot([b.confidence for b in table], [b.right for b in table], "o-" if k == 0 else "s--",
                color=f"C{k}", ms=6 if k == 0 else 4, label=label)
        if k == 0:
            for b in table:
                ax.annotate(str(b.boundaries), (b.confidence, b.right), textcoords="offset points",
                            xytext=(4, -10), fontsize=7)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence (bin mean)",
           ylabel="share within one unit of a reference boundary", title=title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": PNG_SOFTWARE})
    return buf.getvalue()


def is_reliability_png(start: bytes) -> bool:
    """Whether a file beginning with ``start`` is a diagram :func:`reliability_png` wrote (its text chunk
    comes before the image data)."""
    return start.startswith(b"\x89PNG") and b"Software\x00" + PNG_SOFTWARE.encode() in start


__all__ = ("LEAST", "PNG_SOFTWARE", "TOLERANCE", "WITHIN", "ReliabilityBin", "confidence_hits", "format_reliability",
           "hits", "is_reliability_png", "reliability", "reliability_png")
