"""Heatmaps in the terminal: pooling to the pane size, colours, half-block lines.

Each text line shows two matrix rows: the character "▀" painted with the upper
row's colour as foreground and the lower row's as background.  Colours come from
a fixed viridis palette; in 256-colour mode the palette is mapped to the xterm
256-colour cube here, explicitly, so the fallback does not depend on what the
terminal driver would do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from rich.color import Color, ColorSystem
from rich.segment import Segment
from rich.style import Style

from headseg.analysis.errors import InputError

#: viridis at 9 evenly spaced points (matplotlib), interpolated linearly.
_VIRIDIS = np.array(
    [(68, 1, 84), (71, 45, 123), (59, 82, 139), (44, 114, 142), (33, 145, 140),
     (40, 174, 128), (94, 201, 98), (173, 220, 48), (253, 231, 37)],
    dtype=np.float64,
)
LEVELS = 64
CURSOR_RGB = (255, 48, 48)
# Cells outside a sentence block are blended this far toward the background.
DIM_FRACTION = 0.7
DIM_RGB = (24, 24, 24)

COLOR_SYSTEMS = ("truecolor", "256")
POOLINGS = ("max", "mean")


def resolve_color_system(choice: str | None = "auto", environ=None) -> str:
    """``truecolor`` or ``256``; ``auto`` trusts ``COLORTERM`` (truecolor/24bit) like most tools."""
    choice = (choice or "auto").lower()
    if choice in ("truecolor", "24bit"):
        return "truecolor"
    if choice in ("256", "8bit"):
        return "256"
    if choice != "auto":
        raise InputError(f"unknown colour mode '{choice}' (use auto, truecolor or 256)")
    env = os.environ if environ is None else environ
    return "truecolor" if env.get("COLORTERM", "").lower() in ("truecolor", "24bit") else "256"


def palette_rgb(levels: int = LEVELS) -> np.ndarray:
    """``[levels, 3]`` uint8 viridis colours, dark (low) to yellow (high)."""
    x = np.linspace(0, len(_VIRIDIS) - 1, levels)
    lo = np.floor(x).astype(int)
    hi = np.minimum(lo + 1, len(_VIRIDIS) - 1)
    f = (x - lo)[:, None]
    return np.round(_VIRIDIS[lo] * (1 - f) + _VIRIDIS[hi] * f).astype(np.uint8)


def make_color(rgb, color_system: str) -> Color:
    """A Rich colour; in ``256`` mode the nearest xterm-256 entry (``ColorType.EIGHT_BIT``)."""
    c = Color.from_rgb(int(rgb[0]), int(rgb[1]), int(rgb[2]))
    if color_system == "256":
        return c.downgrade(ColorSystem.EIGHT_BIT)
    if color_system != "truecolor":
        raise InputError(f"unknown colour system '{color_system}'")
    return c


def make_palette(color_system: str, levels: int = LEVELS) -> list[Color]:
    """``2 * levels + 1`` colours: normal levels, dimmed levels, then the cursor colour."""
    rgb = palette_rgb(levels).astype(np.float64)
    dim = rgb * (1 - DIM_FRACTION) + np.asarray(DIM_RGB, np.float64) * DIM_FRACTION
    cols = [make_color(c, color_system) for c in rgb]
    cols += [make_color(np.round(c), color_system) for c in dim]
    cols.append(make_color(CURSOR_RGB, color_system))
    return cols


def bin_edges(n: int, bins: int) -> np.ndarray:
    """``bins + 1`` strictly increasing edges splitting ``range(n)`` into near-equal runs."""
    if not 1 <= bins <= n:
        raise InputError(f"cannot split {n} rows into {bins} bins")
    return np.round(np.linspace(0, n, bins + 1)).astype(np.int64)


def downsample(m: np.ndarray, bins: int, how: str = "max") -> np.ndarray:
    """Pool a ``[T, T]`` matrix to ``[bins, bins]`` by max or mean over blocks of :func:`bin_edges`."""
    t = m.shape[0]
    if bins >= t:
        return np.asarray(m, dtype=np.float64)
    e = bin_edges(t, bins)[:-1]
    m = np.asarray(m, dtype=np.float64)
    if how == "max":
        return np.maximum.reduceat(np.maximum.reduceat(m, e, axis=0), e, axis=1)
    if how == "mean":
        sizes = np.diff(bin_edges(t, bins)).astype(np.float64)
        summed = np.add.reduceat(np.add.reduceat(m, e, axis=0), e, axis=1)
        return summed / np.outer(sizes, sizes)
    raise InputError(f"unknown pooling '{how}' (use max or mean)")


def value_range(m: np.ndarray, ignore_diagonal: bool) -> tuple[float, float]:
    """(lo, hi) of the colour scale; the zeroed diagonal of S would otherwise set it."""
    m = np.asarray(m, dtype=np.float64)
    if ignore_diagonal and m.shape[0] > 1:
        vals = m[~np.eye(m.shape[0], dtype=bool)]
    else:
        vals = m.ravel()
    if vals.size == 0:
        return 0.0, 1.0
    return float(vals.min()), float(vals.max())


def quantize(m: np.ndarray, lo: float, hi: float, levels: int = LEVELS) -> np.ndarray:
    """Palette index ``[0, levels)`` of each value (clipped to ``[lo, hi]``)."""
    span = hi - lo
    if span <= 0:
        return np.zeros(m.shape, dtype=np.int64)
    q = np.floor((np.asarray(m, np.float64) - lo) / span * levels).astype(np.int64)
    return np.clip(q, 0, levels - 1)


@dataclass
class Layout:
    """How a ``T × T`` matrix maps to the pane.

    ``bins`` pooled cells per side (``bins < tokens`` means pooling), each drawn
    ``zoom × zoom`` characters/half-lines (zoom > 1 only for small matrices).
    """

    tokens: int
    bins: int
    zoom: int = 1

    @property
    def pooled(self) -> bool:
        """Whether several tokens share a cell (more tokens than cells)."""
        return self.bins < self.tokens

    @property
    def side(self) -> int:
        """Drawn size per side, in columns (= half-lines)."""
        return self.bins * self.zoom

    def edges(self) -> np.ndarray:
        """The token boundaries of the ``bins`` cells, ``[bins + 1]`` (see :func:`bin_edges`)."""
        return bin_edges(self.tokens, self.bins)

    def describe(self, pooling: str) -> str:
        """How the ``T × T`` matrix is drawn, for the pane's title: as is, zoomed, or ``pooling``-pooled."""
        t = self.tokens
        if self.pooled:
            return f"{t}×{t} → {self.bins}×{self.bins} {pooling}-pooled"
        if self.zoom > 1:
            return f"{t}×{t} (×{self.zoom})"
        return f"{t}×{t}"

    def cell_of(self, token: int) -> int:
        """The pooled cell (row or column) that shows ``token``."""
        return int(np.searchsorted(self.edges(), token, side="right") - 1)

    def drawn_of(self, token: int) -> int:
        """The first drawn column (or half-line) of ``token``'s cell."""
        return self.cell_of(token) * self.zoom


def fit_layout(tokens: int, width: int, height: int) -> Layout:
    """Largest square that fits ``width`` columns and ``height`` lines (two rows per line).

    A half-block cell is one column wide and half a line high, which is about
    square in a terminal, so matrices stay square on screen.
    """
    fit = max(1, min(width, 2 * height))
    bins = min(tokens, fit)
    zoom = max(1, fit // tokens) if bins == tokens else 1
    return Layout(tokens=tokens, bins=bins, zoom=zoom)


class HeatmapRenderer:
    """Turns a matrix into lines of Rich segments, caching one Style per colour pair."""

    def __init__(self, color_system: str = "truecolor", levels: int = LEVELS):
        self.color_system = color_system
        self.levels = levels
        self.palette = make_palette(color_system, levels)
        # One Style per colour pair: Rich and Textual cache their work per Style object.
        self._styles: dict[tuple[int, int], Style] = {}
        # Segments are immutable: one per (colour pair, run length) is shared by all lines.
        self._segments: dict[tuple[int, int], Segment] = {}

    @property
    def cursor_index(self) -> int:
        """The palette index of the cursor colour (after the normal and dimmed levels)."""
        return 2 * self.levels

    def _style(self, top: int, bottom: int) -> Style:
        key = (top, bottom)
        st = self._styles.get(key)
        if st is None:
            st = self._styles[key] = Style(
                color=self.palette[top], bgcolor=None if bottom < 0 else self.palette[bottom]
            )
        return st

    def cell_indices(
        self,
        m: np.ndarray,
        layout: Layout,
        how: str = "max",
        cursor: tuple[int, int] | None = None,
        dim_mask: np.ndarray | None = None,
        ignore_diagonal: bool = True,
    ) -> tuple[np.ndarray, tuple[float, float]]:
        """Palette index of every drawn cell ``[side, side]`` and the value range used.

        ``dim_mask [T, T]`` (True = dim) is pooled by majority.  The scale is the
        range of the full-resolution matrix, so pooling never changes colours'
        meaning.
        """
        lo, hi = value_range(m, ignore_diagonal)
        pooled = downsample(m, layout.bins, how)
        idx = quantize(pooled, lo, hi, self.levels)
        if dim_mask is not None:
            dm = downsample(np.asarray(dim_mask, np.float64), layout.bins, "mean") > 0.5
            idx = np.where(dm, idx + self.levels, idx)
        if cursor is not None:
            idx[layout.cell_of(cursor[0]), layout.cell_of(cursor[1])] = self.cursor_index
        if layout.zoom > 1:
            idx = np.repeat(np.repeat(idx, layout.zoom, axis=0), layout.zoom, axis=1)
        return idx, (lo, hi)

    def lines(self, idx: np.ndarray) -> list[list[Segment]]:
        """Half-block lines for a ``[rows, cols]`` array of palette indices."""
        rows, cols = idx.shape
        width = 2 * self.levels + 2
        get, make = self._segments.get, self._segment
        out = []
        for y in range(0, rows, 2):
            top = idx[y]
            bottom = idx[y + 1] if y + 1 < rows else np.full(cols, -1)
            # Runs of equal colour pairs become one segment: Textual's per-segment
            # work (filters, encoding) dominates a redraw, not the run length.
            keys = (top + 1) * width + (bottom + 1)
            starts = np.flatnonzero(np.diff(keys, prepend=-1))
            runs = np.diff(starts, append=cols).tolist()
            out.append([get((k, n)) or make(k, n) for k, n in zip(keys[starts].tolist(), runs)])
        return out

    def _segment(self, key: int, run: int) -> Segment:
        top, bottom = divmod(key, 2 * self.levels + 2)
        seg = self._segments[(key, run)] = Segment("▀" * run, self._style(top - 1, bottom - 1))
        return seg

    def legend(self, width: int) -> list[Segment]:
        """A colour bar of ``width`` cells, low to high."""
        width = max(1, width)
        q = np.round(np.linspace(0, self.levels - 1, width)).astype(int)
        return [Segment(" ", Style(bgcolor=self.palette[i])) for i in q.tolist()]
