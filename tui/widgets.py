"""The three panes: matrix heatmap, layer × head grid, document text.

Widgets hold display state only and report user intent with messages; the app
owns the document, the current window/head and the data.
"""

from __future__ import annotations

import math

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from .heatmap import HeatmapRenderer, Layout, fit_layout, make_color, palette_rgb, quantize

_MOVE_BINDINGS = [
    Binding("up,k", "move(-1, 0)", "up", show=False),
    Binding("down,j", "move(1, 0)", "down", show=False),
    Binding("left,h", "move(0, -1)", "left", show=False),
    Binding("right,l", "move(0, 1)", "right", show=False),
]


class MatrixView(Widget, can_focus=True):
    """A ``T × T`` matrix as a half-block heatmap with a cell cursor.

    ``set_matrix`` replaces the data; the widget pools it to its own size
    (max or mean, see :mod:`headseg.tui.heatmap`) and re-pools on resize.  Arrow keys /
    hjkl move the cursor by one token and post :class:`MatrixView.CursorMoved`.
    """

    BINDINGS = _MOVE_BINDINGS + [
        Binding("pageup", "move(-8, 0)", "up 8", show=False),
        Binding("pagedown", "move(8, 0)", "down 8", show=False),
    ]

    DEFAULT_CSS = """
    MatrixView { width: 1fr; height: 1fr; }
    """

    class Drawn(Message):
        """The heatmap was laid out again (size, pooling or data changed)."""

    class CursorMoved(Message):
        """The cursor moved to cell ``(row, col)`` (token indices)."""

        def __init__(self, row: int, col: int):
            super().__init__()
            self.row = row
            self.col = col

    def __init__(self, color_system: str = "truecolor", **kwargs):
        super().__init__(**kwargs)
        self.renderer = HeatmapRenderer(color_system)
        self.matrix: np.ndarray | None = None
        self.cursor = (0, 0)
        self.pooling = "max"
        self.dim_mask: np.ndarray | None = None
        self.ignore_diagonal = True
        self.layout_: Layout | None = None
        self.value_range = (0.0, 1.0)
        self._strips: list[Strip] = []
        self._retry_pending = False

    @property
    def color_system(self) -> str:
        """``truecolor`` or ``256``."""
        return self.renderer.color_system

    def scale_legend(self, width: int) -> Text:
        """The colour scale: the lowest value shown, a bar of ``width`` cells, the highest."""
        lo, hi = self.value_range
        line = Text()
        line.append(f"{lo:.4g} ", style="dim")
        for seg in self.renderer.legend(width):
            line.append(seg.text, style=seg.style)
        line.append(f" {hi:.4g}", style="dim")
        return line

    def set_matrix(
        self,
        matrix: np.ndarray,
        cursor: tuple[int, int] | None = None,
        dim_mask: np.ndarray | None = None,
        ignore_diagonal: bool = True,
        pooling: str | None = None,
    ) -> None:
        """Show ``matrix [T, T]``; ``dim_mask [T, T]`` True where cells are dimmed (overlay)."""
        self.matrix = np.asarray(matrix)
        self.dim_mask = dim_mask
        self.ignore_diagonal = ignore_diagonal
        if pooling is not None:
            self.pooling = pooling
        t = self.matrix.shape[0]
        r, c = cursor if cursor is not None else self.cursor
        self.cursor = (min(max(r, 0), t - 1), min(max(c, 0), t - 1))
        self.rebuild()

    def rebuild(self) -> None:
        """Re-pool and re-colour for the current size; cheap enough to run on every change."""
        if self.matrix is None:
            self._strips = []
            self.refresh()
            return
        size = self.size if self.is_mounted else Size(0, 0)
        if size.width < 1 or size.height < 1:
            # Not placed yet (e.g. just uncovered after loading): draw after the next refresh.
            self._strips = []
            if self.is_mounted and not self._retry_pending:
                self._retry_pending = True
                self.call_after_refresh(self._retry)
            return
        width, height = size.width, size.height
        self.layout_ = fit_layout(self.matrix.shape[0], width, height)
        idx, self.value_range = self.renderer.cell_indices(
            self.matrix, self.layout_, self.pooling, self.cursor, self.dim_mask, self.ignore_diagonal
        )
        pad = max(0, (width - self.layout_.side) // 2)
        lead = [Segment(" " * pad)] if pad else []
        n = pad + self.layout_.side
        self._strips = [Strip(lead + segs, n) for segs in self.renderer.lines(idx)]
        self.refresh()
        self.post_message(self.Drawn())

    def _retry(self) -> None:
        self._retry_pending = False
        self.rebuild()

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the heatmap (blank below it)."""
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width)

    def on_resize(self) -> None:
        """Pool again for the new size."""
        self.rebuild()

    def action_move(self, dr: int, dc: int) -> None:
        """Arrow keys / hjkl: move the cursor by ``(dr, dc)`` tokens, clamped to the matrix."""
        if self.matrix is None:
            return
        t = self.matrix.shape[0]
        r = min(max(self.cursor[0] + dr, 0), t - 1)
        c = min(max(self.cursor[1] + dc, 0), t - 1)
        self.move_cursor(r, c)

    def move_cursor(self, row: int, col: int) -> None:
        """Put the cursor on ``(row, col)`` and post :class:`CursorMoved`."""
        self.cursor = (row, col)
        self.rebuild()
        self.post_message(self.CursorMoved(row, col))


class HeadGrid(Widget, can_focus=True):
    """Layers (rows) × heads (columns), each cell coloured by one statistic.

    Profile heads are marked ``●``; the cursor cell is drawn as ``[ ]``.  Moving
    the cursor posts :class:`HeadGrid.HeadChosen`, so the matrix pane follows.
    """

    BINDINGS = _MOVE_BINDINGS + [Binding("enter", "choose", "show head", show=False)]

    DEFAULT_CSS = """
    HeadGrid { height: auto; width: 1fr; }
    """

    CELL = 3

    class HeadChosen(Message):
        """The user chose head ``(layer, head)``."""

        def __init__(self, layer: int, head: int):
            super().__init__()
            self.layer = layer
            self.head = head

    def __init__(self, num_layers: int = 1, num_heads: int = 1, color_system: str = "truecolor", **kwargs):
        super().__init__(**kwargs)
        self.color_system = color_system
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.values: np.ndarray | None = None
        self.stat_name = ""
        self.selected: set[tuple[int, int]] = set()
        self.cursor = (0, 0)
        self._palette = [make_color(c, color_system) for c in palette_rgb(16)]
        self._nan = make_color((90, 90, 90), color_system)

    def configure(self, num_layers: int, num_heads: int) -> None:
        """Size the grid for a ``num_layers × num_heads`` model (the cursor stays inside)."""
        self.num_layers, self.num_heads = num_layers, num_heads
        self.cursor = (min(self.cursor[0], num_layers - 1), min(self.cursor[1], num_heads - 1))
        self.refresh(layout=True)

    def set_stat(self, name: str, values: np.ndarray | None) -> None:
        """``values [L, H]`` (NaN = unknown)."""
        self.stat_name = name
        self.values = None if values is None else np.asarray(values, np.float64)
        self.refresh()

    def set_selected(self, heads) -> None:
        """Mark ``heads`` (``(layer, head)`` pairs) as selected by the profile."""
        self.selected = {(int(l), int(h)) for l, h in heads}
        self.refresh()

    def set_cursor(self, layer: int, head: int) -> None:
        """Put the cursor on ``(layer, head)`` (posts nothing)."""
        self.cursor = (layer, head)
        self.refresh()

    def get_content_height(self, container, viewport, width: int) -> int:
        """A header line, one line per layer, and the value line."""
        return self.num_layers + 2

    def get_content_width(self, container, viewport) -> int:
        """The layer labels and one cell per head."""
        return 4 + self.CELL * self.num_heads

    def cell_levels(self) -> np.ndarray:
        """Palette level ``[L, H]`` of each cell (-1 where the value is NaN)."""
        if self.values is None:
            return np.full((self.num_layers, self.num_heads), -1)
        v = self.values
        finite = np.isfinite(v)
        if not finite.any():
            return np.full(v.shape, -1)
        lo, hi = float(v[finite].min()), float(v[finite].max())
        q = quantize(np.where(finite, v, lo), lo, hi, len(self._palette))
        return np.where(finite, q, -1)

    def render(self) -> Text:
        """The grid as Rich text: head numbers, one coloured row per layer, the cursor head's value."""
        text = Text(no_wrap=True, overflow="crop")
        text.append("    " + "".join(f"{h:^{self.CELL}}" for h in range(self.num_heads)) + "\n", style="dim")
        levels = self.cell_levels()
        for l in range(self.num_layers):
            text.append(f"L{l:<3}"[:4], style="dim")
            for h in range(self.num_heads):
                lev = int(levels[l, h])
                bg = self._nan if lev < 0 else self._palette[lev]
                fg = "black" if lev >= len(self._palette) // 2 else "white"
                mark = "●" if (l, h) in self.selected else " "
                cell = f"[{mark}]" if (l, h) == self.cursor else f" {mark} "
                text.append(cell, style=Style(color=fg, bgcolor=bg, bold=(l, h) == self.cursor))
            text.append("\n")
        if self.values is not None:
            v = self.values[self.cursor]
            val = "n/a" if not math.isfinite(v) else f"{v:.4g}"
            text.append(f"{self.stat_name}: L{self.cursor[0]}H{self.cursor[1]} = {val}", style="italic")
        return text

    def action_move(self, dr: int, dc: int) -> None:
        """Arrow keys / hjkl: move the cursor and choose that head."""
        l = min(max(self.cursor[0] + dr, 0), self.num_layers - 1)
        h = min(max(self.cursor[1] + dc, 0), self.num_heads - 1)
        self.set_cursor(l, h)
        self.post_message(self.HeadChosen(l, h))

    def action_choose(self) -> None:
        """Enter: choose the head under the cursor."""
        self.post_message(self.HeadChosen(*self.cursor))

    def on_click(self, event) -> None:
        """Choose the clicked head."""
        x, y = event.x - 4, event.y - 1
        if x >= 0 and 0 <= y < self.num_layers and x // self.CELL < self.num_heads:
            self.set_cursor(y, x // self.CELL)
            self.post_message(self.HeadChosen(*self.cursor))


class DocumentView(VerticalScroll, can_focus=True):
    """The document around the current window; left/right (h/l) step through windows."""

    BINDINGS = [
        Binding("left,h", "step(-1)", "prev window", show=False),
        Binding("right,l", "step(1)", "next window", show=False),
    ]

    class WindowStep(Message):
        """The user asked for the window ``step`` windows away (-1 or 1)."""

        def __init__(self, step: int):
            super().__init__()
            self.step = step

    def action_step(self, step: int) -> None:
        """Left/right (h/l): post :class:`WindowStep`."""
        self.post_message(self.WindowStep(step))
