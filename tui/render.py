"""Pure rendering helpers: the document excerpt as Rich text, and PNG export."""

from __future__ import annotations

import io
import os

import numpy as np
from rich.text import Text

from headseg.analysis.writing import atomic_write_bytes

UNIT_STYLES = ("#d8d8d8", "#8ab4f8")
WINDOW_BG = "on #26304a"
ROW_STYLE = "bold black on #ffd75f"
COL_STYLE = "bold black on #5fd7ff"
TOPIC_STYLE = "bold #ff8787"


def _snap_left(spans: list[tuple[int, int]], pos: int) -> int:
    """Start of the span containing ``pos`` (so excerpts begin at a unit start)."""
    for s, e in spans:
        if s <= pos < e:
            return s
    return pos


def _snap_right(spans: list[tuple[int, int]], pos: int) -> int:
    for s, e in spans:
        if s < pos <= e:
            return e
    return pos


def document_excerpt(
    text: str,
    window_span: tuple[int, int],
    units: list[tuple[int, int]],
    topics: list[tuple[int, int]],
    cursor_spans: tuple[tuple[int, int] | None, tuple[int, int] | None] = (None, None),
    context: int = 160,
    tree: list[tuple[int, int, int, str]] | None = None,
    headings: list[list[str]] | None = None,
) -> tuple[Text, tuple[int, int]]:
    """The text around ``window_span`` with units, topic starts, window and cursor tokens marked.

    Units alternate two colours; a topic that starts inside the excerpt gets a
    ``── topic k ──`` line before it (with a segment ``tree``, ``(depth, start, end,
    path)`` nodes: ``── 2 ─ 2.1 ──``, every node that opens there, the document's
    children first), and the topic's heading path where ``headings`` (one per topic) has one
    (``── topic 2 · Install › GPU ──``); the window has a background; the two tokens under the matrix
    cursor are highlighted (row yellow, column cyan).
    Returns the Rich text and the ``(start, end)`` characters it covers.
    """
    n = len(text)
    w0, w1 = window_span
    a = _snap_left(units, max(0, w0 - context))
    b = _snap_right(units, min(n, w1 + context))
    topic_starts = {s: k for k, (s, _) in enumerate(topics)}
    opening: dict[int, list[str]] = {}
    for _, start, _, path in tree or []:
        opening.setdefault(start, []).append(path)
    spans = [sp for sp in cursor_spans if sp is not None and sp[1] > sp[0]]
    cuts = {a, b, w0, w1, *[s for s, _ in units], *topic_starts, *[x for sp in spans for x in sp]}
    cuts = sorted(c for c in cuts if a <= c <= b)
    unit_starts = np.asarray([s for s, _ in units] or [0], dtype=np.int64)
    row_span, col_span = cursor_spans
    out = Text(no_wrap=False)
    if a > 0:
        out.append("… ", style="dim")
    for lo, hi in zip(cuts, cuts[1:]):
        k = topic_starts.get(lo)
        if k is not None and (lo > a or k > 0):
            if out.plain and not out.plain.endswith("\n"):
                out.append("\n")
            label = " ─ ".join(opening[lo]) if lo in opening else f"topic {k + 1}"
            if headings and k < len(headings) and headings[k]:
                label += " · " + " › ".join(headings[k])
            out.append(f"── {label} ──\n", style=TOPIC_STYLE)
        u = int(np.searchsorted(unit_starts, lo, side="right") - 1)
        style = UNIT_STYLES[u % 2]
        if w0 <= lo < w1:
            style = f"{style} {WINDOW_BG}"
        if row_span is not None and row_span[0] <= lo < row_span[1]:
            style = ROW_STYLE
        elif col_span is not None and col_span[0] <= lo < col_span[1]:
            style = COL_STYLE
        out.append(text[lo:hi], style=style)
    if b < n:
        out.append(" …", style="dim")
    return out, (a, b)


def export_png(matrix: np.ndarray, tokens: list[str], title: str, path: str | os.PathLike, label: str = "") -> None:
    """Save ``matrix [T, T]`` as a PNG heatmap with token tick labels (atomic), on a ``Figure`` of its own
    (no pyplot, no backend chosen: matplotlib's state stays as it was)."""
    from matplotlib.figure import Figure

    matrix = np.asarray(matrix, dtype=np.float64)

    t = matrix.shape[0]
    size = min(max(4.0, t * 0.12), 16.0)
    fig = Figure(figsize=(size + 1.5, size))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(matrix, cmap="viridis", interpolation="nearest")
    step = max(1, int(np.ceil(t / 64)))
    ticks = list(range(0, t, step))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    fs = 6 if t > 32 else 8
    ax.set_xticklabels([tokens[i] for i in ticks], rotation=90, fontsize=fs)
    ax.set_yticklabels([tokens[i] for i in ticks], fontsize=fs)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=label)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write_bytes(path, buf.getvalue())


def window_header(doc, index: int, seg, width: int = 40) -> Text:
    """The document pane's lines above the excerpt: window ``index`` of ``doc``, its span and what is marked.

    ``doc`` is a :class:`~headseg.tui.data.DocumentModel`, ``seg`` the
    :class:`~headseg.tui.marks.MarkedSpans` shown; a document cut short or
    carrying a note says so.  ``width``: the pane's, in cells (a segment tree's bands fit in it).
    """
    w = doc.window(index)
    head = Text()
    head.append(f"window {index + 1}/{len(doc)}", style="bold")
    if doc.total_windows > len(doc):
        head.append(f" (of {doc.total_windows})", style="bold yellow")
    head.append(f" · chars {w.start_char}–{w.end_char} of {len(doc.text):,} · {len(w)} tokens\n", style="dim")
    head.append(
        f"units: {seg.source} ({len(seg.units)}) · topics: {len(seg.topics) if seg.topics else 'none'}"
        + (f", the leaves of a tree of {max(d for d, *_ in seg.tree)} levels\n" if seg.tree else "\n"),
        style="dim",
    )
    if seg.tree:
        head.append_text(tree_bands(seg.tree, len(doc.text), (w.start_char, w.end_char), max(8, width - 8)))
    if doc.note:
        head.append(f"note: {doc.note}\n", style="yellow")
    head.append("\n")
    return head


#: the colours of a segment tree's bands, node after node along one depth
BAND_STYLES = ("#3b6fd8", "#d8743b", "#2f9e6e", "#a04fc4", "#c43b5c", "#8a8f2a")


def tree_bands(tree: list[tuple[int, int, int, str]], length: int, window: tuple[int, int],
               width: int = 60) -> Text:
    """A segment tree as nested bands, one line per depth: ``width`` cells across the whole text,
    each cell coloured by the node of that depth covering its first character (blank where none
    does: a leaf above that depth), and a line under them marking the window shown (``▔``)."""
    out = Text()
    depth = max(d for d, *_ in tree)
    cell = max(length, 1) / width
    for d in range(1, depth + 1):
        nodes = [(s, e) for dd, s, e, _ in tree if dd == d]
        out.append(f"tree {d} ", style="dim")
        for c in range(width):
            pos = int(c * cell)
            k = next((i for i, (s, e) in enumerate(nodes) if s <= pos < e), None)
            out.append("█" if k is not None else " ", style=BAND_STYLES[k % len(BAND_STYLES)] if k is not None else "")
        out.append("\n")
    a, b = window
    out.append("       ", style="dim")
    out.append("".join("▔" if a <= int(c * cell) < b or (b > a and int(c * cell) <= a < int((c + 1) * cell))
                       else " " for c in range(width)).rstrip() + "\n", style="bold")
    return out
