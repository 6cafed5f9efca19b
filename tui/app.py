"""The headseg TUI application: the Textual wiring of panes, keys and workers.

:func:`create_app` is the one entry point, shared by ``headseg tui`` and the
tests; its settings are the fields of :class:`~headseg.tui.options.AppOptions`.
Everything slow (loading the model, running windows, the segmenter,
matplotlib) runs in thread workers (:mod:`headseg.tui.loading` does the work);
the UI thread only slices cached arrays and draws, and every failure becomes a
notification.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Header, Static

from headseg.analysis.errors import HeadsegError

from .data import KIND_LABELS, KINDS, DocumentModel, spans_to_token_ids
from .marks import MarkedSpans, sentence_segmentation
from .heatmap import POOLINGS, resolve_color_system
from .loading import PreparedDocument, mark_document, prepare_document
from .options import AppOptions
from .render import document_excerpt, export_png, window_header
from .screens import FindScreen, HelpScreen
from .widgets import DocumentView, HeadGrid, MatrixView


class HeadsegApp(App):
    """The inspector: document pane, matrix pane with its cursor line, and the layer × head grid.

    Built by :func:`create_app` from :class:`~headseg.tui.options.AppOptions`.
    The view state (window, layer, head, matrix kind, pooling, statistic) lives
    here and the widgets mirror it.
    """

    TITLE = "headseg tui"
    AUTO_FOCUS = "#matrix"
    CSS_PATH = "app.tcss"

    BINDINGS = [
        Binding("left_square_bracket", "layer(-1)", "layer-"),
        Binding("right_square_bracket", "layer(1)", "layer+"),
        Binding("comma", "head(-1)", "head-", show=False),
        Binding("full_stop", "head(1)", "head+", show=False),
        Binding("n", "window(1)", "next win"),
        Binding("p", "window(-1)", "prev win"),
        Binding("a", "kind", "matrix"),
        Binding("m", "pooling", "pool", show=False),
        Binding("s", "stat", "stat"),
        Binding("slash", "find", "find"),
        Binding("e", "export", "PNG"),
        Binding("question_mark", "help", "keys"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, options: AppOptions | None = None):
        super().__init__()
        self.options = options if options is not None else AppOptions()
        self.doc: DocumentModel | None = self.options.document
        # The model once loaded (a worker loads it when the options give none).
        self.loaded = self.options.loaded
        self.color_system = resolve_color_system(self.options.color_system)
        self.export_dir = Path(self.options.export_dir)
        # View state; the widgets mirror it.
        self.window_index = 0
        self.layer = 0
        self.head = 0
        self.kind = KINDS[0]
        self.pooling = POOLINGS[0]
        self.stats: dict[str, np.ndarray] = {}
        self.stat_index = 0
        self.segmentation: MarkedSpans | None = None
        self.profile_heads: list[tuple[int, int]] = []
        self.status = "loading"
        self.message = ""
        self.last_export: Path | None = None
        self._doc_key: tuple | None = None
        self._pending_row: int | None = None

    def compose(self) -> ComposeResult:
        """The panes: document on the left; matrix, cursor line and grid on the right."""
        yield Header()
        with Horizontal(id="body"):
            with DocumentView(id="doc"):
                yield Static("Loading…", id="doc-text")
            with Vertical(id="right"):
                yield MatrixView(color_system=self.color_system, id="matrix")
                yield Static("", id="cursor-info")
                with VerticalScroll(id="grid-box"):
                    yield HeadGrid(color_system=self.color_system, id="grid")
        yield Footer()

    @property
    def matrix_view(self) -> MatrixView:
        """The matrix pane."""
        return self.query_one("#matrix", MatrixView)

    def _panes_shown(self) -> bool:
        """Whether the panes exist: a worker's result or a pane's message that arrives while the app
        closes finds them removed, and has nothing left to update."""
        return bool(self.query("#matrix"))

    @property
    def grid(self) -> HeadGrid:
        """The layer × head grid."""
        return self.query_one("#grid", HeadGrid)

    def on_mount(self) -> None:
        """Titles, a spinner on the matrix pane, and the load worker."""
        self.matrix_view.border_title = "matrix"
        self.query_one("#doc").border_title = "document"
        self.query_one("#grid-box").border_title = "layer × head"
        self.matrix_view.loading = True
        # Scrolling the grid is enough; tab should land on the grid itself.
        self.query_one("#grid-box").can_focus = False
        self.load_document()

    @work(thread=True, exclusive=True, group="load")
    def load_document(self) -> None:
        """Worker: build and show the document, then mark its units and topics."""
        try:
            prepared = prepare_document(self.options, self.doc, self.loaded)
            self.loaded = prepared.loaded
            self.call_from_thread(self._document_ready, prepared)
        except HeadsegError as exc:
            self.call_from_thread(self._load_failed, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - never let a worker kill the app
            self.call_from_thread(self._load_failed, f"{type(exc).__name__}: {exc}")
            return
        # Units and topics (slow: may load a model), after the document is shown.
        seg, warning = mark_document(self.options, self.loaded, prepared.doc.text)
        self.call_from_thread(self._segmentation_ready, seg, warning)

    def _document_ready(self, prepared: PreparedDocument) -> None:
        if not self._panes_shown():
            return
        doc = prepared.doc
        self.doc = doc
        self.stats = prepared.stats
        self.profile_heads = list(prepared.profile_heads)
        self.status = "ready"
        self.segmentation = self.segmentation or sentence_segmentation(doc.text)
        self.sub_title = f"{doc.source.name} · {self.options.input_name}"
        self.grid.configure(doc.num_layers, doc.num_heads)
        self.grid.set_selected(self.profile_heads)
        if self.profile_heads:
            self.layer, self.head = self.profile_heads[0]
        else:
            self.layer = doc.num_layers - 1
        self.grid.set_cursor(self.layer, self.head)
        self._show_stat()
        self.matrix_view.loading = False
        if self.focused is None:
            self.matrix_view.focus()
        if doc.note:
            self.notify(doc.note, title="large input", severity="warning")
        for msg, severity in prepared.notes:
            self.notify(msg, severity=severity)
        t = len(doc.window(0))
        self.matrix_view.cursor = (min(1, t - 1), min(2, t - 1))
        self.update_view()

    def _segmentation_ready(self, seg: MarkedSpans, warning: str) -> None:
        if not self._panes_shown():
            return
        self.segmentation = seg
        if warning:
            self.notify(warning, severity="warning")
        if self.doc is not None:
            self.update_view()

    def _load_failed(self, message: str) -> None:
        if not self._panes_shown():
            return
        self.status = "error"
        self.message = message
        self.matrix_view.loading = False
        self.query_one("#doc-text", Static).update(Text(f"Cannot show this input:\n\n{message}", style="bold red"))
        self.matrix_view.border_title = "no matrix"
        self.notify(message, title="error", severity="error", timeout=10)

    def current_matrix(self) -> np.ndarray:
        """The ``[T, T]`` matrix the matrix pane shows (window, layer, head, kind)."""
        return self.doc.matrix(self.window_index, self.layer, self.head, self.kind)

    def unit_ids(self) -> np.ndarray:
        """Unit index of each token of the current window ``[T]`` (-1 for specials)."""
        units = self.segmentation.units if self.segmentation else []
        return spans_to_token_ids(self.doc.window(self.window_index), units)

    def update_view(self) -> None:
        """Redraw the matrix, titles, cursor line and document (a window not computed yet is computed first)."""
        if self.doc is None:
            return
        if not self.doc.is_cached(self.window_index):
            self.matrix_view.loading = True
            self.compute_window(self.window_index)
            return
        self.matrix_view.loading = False
        try:
            m = self.current_matrix()
        except HeadsegError as exc:
            self.notify(str(exc), severity="error")
            return
        dim = None
        if self.kind == "sentences":
            u = self.unit_ids()
            dim = ~((u[:, None] == u[None, :]) & (u[:, None] >= 0))
        self.matrix_view.set_matrix(
            m, dim_mask=dim, ignore_diagonal=self.kind in ("similarity", "sentences"), pooling=self.pooling
        )
        self._update_titles()
        self._update_info()
        self._update_document()

    def _update_titles(self) -> None:
        mv = self.matrix_view
        lay = mv.layout_
        t = mv.matrix.shape[0]
        if lay is not None and lay.tokens != t:
            lay = None
        # Not drawn yet (the pane has no size): the Drawn message brings the rest.
        size = f"{t}×{t}" if lay is None else lay.describe(self.pooling)
        mv.border_title = f"L{self.layer} H{self.head} · {KIND_LABELS[self.kind]}"
        scale = "" if lay is None else f" · [{mv.value_range[0]:.4g}, {mv.value_range[1]:.4g}]"
        mv.border_subtitle = f"win {self.window_index + 1}/{len(self.doc)} · {size}{scale}"

    def cursor_description(self) -> tuple[str, float]:
        """What the info line says about the cursor cell, and the value it shows."""
        w = self.doc.window(self.window_index)
        r, c = self.matrix_view.cursor
        value = float(self.matrix_view.matrix[r, c])
        text = f"row {r} {w.tokens[r]!r} × col {c} {w.tokens[c]!r} = {value:.5g}"
        return text, value

    def _update_info(self) -> None:
        desc, _ = self.cursor_description()
        mv = self.matrix_view
        w = self.doc.window(self.window_index)
        r, c = mv.cursor
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(desc, style="bold")
        line.append(f"  chars {w.offsets[r][0]}–{w.offsets[r][1]} × {w.offsets[c][0]}–{w.offsets[c][1]}\n", style="dim")
        line.append_text(mv.scale_legend(24))
        if self.kind == "sentences":
            line.append("  dimmed = different units", style="dim")
        # Fixed height: no layout pass needed, which keeps head switches cheap.
        self.query_one("#cursor-info", Static).update(line, layout=False)

    def _update_document(self) -> None:
        doc = self.doc
        w = doc.window(self.window_index)
        seg = self.segmentation or sentence_segmentation(doc.text)
        r, c = self.matrix_view.cursor
        # A head or matrix-kind switch leaves the text as it is: skip the re-wrap.
        key = (id(doc), self.window_index, r, c, id(seg))
        if key == self._doc_key:
            return
        self._doc_key = key
        spans = tuple(None if w.special[i] else (int(w.offsets[i][0]), int(w.offsets[i][1])) for i in (r, c))
        body, (a, b) = document_excerpt(doc.text, (w.start_char, w.end_char), seg.units, seg.topics, spans,
                                        tree=seg.tree, headings=seg.topic_headings)
        pane = self.query_one("#doc-text", Static)
        pane.update(window_header(doc, self.window_index, seg, pane.size.width or 40) + body)

    def _show_stat(self) -> None:
        names = list(self.stats)
        if not names:
            self.grid.set_stat("", None)
            return
        self.stat_index %= len(names)
        name = names[self.stat_index]
        self.grid.set_stat(name, self.stats[name])
        self.query_one("#grid-box").border_title = f"layer × head · {name}  (s: next statistic)"

    @work(thread=True, exclusive=True, group="window")
    def compute_window(self, index: int) -> None:
        """Worker: compute window ``index``'s matrices, then show it (or notify the failure)."""
        try:
            self.doc.matrices(index)
        except Exception as exc:  # noqa: BLE001 - report and keep the app alive
            self.call_from_thread(self.notify, f"window {index + 1}: {exc}", severity="error")
            return
        self.call_from_thread(self._window_ready, index)

    def _window_ready(self, index: int) -> None:
        if not self._panes_shown():
            return
        if index != self.window_index:
            return
        if self._pending_row is not None:
            row, self._pending_row = self._pending_row, None
            self._place_cursor(row)
        else:
            self.update_view()

    def on_matrix_view_cursor_moved(self, message: MatrixView.CursorMoved) -> None:
        """Follow the matrix cursor in the cursor line and the document."""
        if self.doc is not None and self._panes_shown() and self.matrix_view.matrix is not None:
            self._update_info()
            self._update_document()

    def on_matrix_view_drawn(self, message: MatrixView.Drawn) -> None:
        # The title says how the matrix was pooled, which depends on the pane size.
        """Retitle after a redraw."""
        if self.doc is not None and self._panes_shown() and self.matrix_view.matrix is not None:
            self._update_titles()
            self._update_info()

    def on_head_grid_head_chosen(self, message: HeadGrid.HeadChosen) -> None:
        """Show the head chosen in the grid."""
        self.select_head(message.layer, message.head)

    def on_document_view_window_step(self, message: DocumentView.WindowStep) -> None:
        """Step through windows from the document pane."""
        self.action_window(message.step)

    def select_head(self, layer: int, head: int) -> None:
        """Show head ``(layer, head)``, clamped to the model."""
        if self.doc is None:
            return
        self.layer = min(max(layer, 0), self.doc.num_layers - 1)
        self.head = min(max(head, 0), self.doc.num_heads - 1)
        self.grid.set_cursor(self.layer, self.head)
        self.update_view()

    def action_layer(self, step: int) -> None:
        """Key ``[``/``]``: the previous/next layer."""
        if self.doc is not None:
            self.select_head(self.layer + step, self.head)

    def action_head(self, step: int) -> None:
        """Key ``,``/``.``: the previous/next head."""
        if self.doc is not None:
            self.select_head(self.layer, self.head + step)

    def action_window(self, step: int) -> None:
        """Key ``p``/``n``: the previous/next loaded window."""
        if self.doc is None:
            return
        new = min(max(self.window_index + step, 0), len(self.doc) - 1)
        if new == self.window_index:
            if step > 0 and self.doc.total_windows > len(self.doc):
                self.notify(f"only the first {len(self.doc)} windows are loaded", severity="warning")
            return
        self.window_index = new
        self._pending_row = None
        self.query_one("#doc").scroll_home(animate=False)
        self.update_view()

    def action_kind(self) -> None:
        """Key ``a``: the next matrix kind."""
        self.kind = KINDS[(KINDS.index(self.kind) + 1) % len(KINDS)]
        self.update_view()

    def action_pooling(self) -> None:
        """Key ``m``: the next pooling (max, mean)."""
        self.pooling = POOLINGS[(POOLINGS.index(self.pooling) + 1) % len(POOLINGS)]
        self.update_view()

    def action_stat(self) -> None:
        """Key ``s``: colour the grid by the next statistic."""
        if self.stats:
            self.stat_index = (self.stat_index + 1) % len(self.stats)
            self._show_stat()

    def action_help(self) -> None:
        """Key ``?``: the help screen."""
        self.push_screen(HelpScreen())

    def action_find(self) -> None:
        """Key ``/``: ask for a token, then :meth:`find_token`."""
        if self.doc is not None:
            self.push_screen(FindScreen(), self.find_token)

    def find_token(self, query: str | None) -> bool:
        """Move the cursor to the next token matching ``query`` (this window first, then later ones).

        The column goes to the token's most similar partner in the current
        matrix, so the cursor shows a pair.  Returns whether a token was found.
        """
        if not query or not query.strip() or self.doc is None:
            return False
        found = self.doc.find_token(query, self.window_index, self.matrix_view.cursor[0] + 1)
        if found is None:
            self.notify(f"token {query!r} not found in the loaded windows", severity="warning")
            return False
        self._jump_to(*found)
        return True

    def _jump_to(self, window_index: int, row: int) -> None:
        if window_index != self.window_index:
            self.window_index = window_index
            self.query_one("#doc").scroll_home(animate=False)
        if not self.doc.is_cached(window_index):
            # Place the cursor once the worker has computed the window.
            self._pending_row = row
            self.matrix_view.loading = True
            self.compute_window(window_index)
            return
        self._place_cursor(row)

    def _place_cursor(self, row: int) -> None:
        """Cursor on ``row`` and, as column, the token it relates to most in the current matrix."""
        m = self.current_matrix()
        others = m[row].astype(np.float64)
        others[row] = -np.inf
        self.matrix_view.cursor = (row, int(np.argmax(others)))
        self.update_view()

    def action_export(self) -> None:
        """Key ``e``: save the matrix shown as a PNG in the export folder (in a worker)."""
        if self.doc is None or self.matrix_view.matrix is None:
            self.notify("nothing to export yet", severity="warning")
            return
        w = self.doc.window(self.window_index)
        path = self.export_dir / f"headseg_w{self.window_index + 1}_L{self.layer}H{self.head}_{self.kind}.png"
        title = f"{self.doc.source.name} · window {self.window_index + 1} · L{self.layer} H{self.head} · {KIND_LABELS[self.kind]}"
        self._export(np.array(self.matrix_view.matrix), list(w.tokens), title, path)

    @work(thread=True, group="export")
    def _export(self, matrix: np.ndarray, tokens: list[str], title: str, path: Path) -> None:
        try:
            export_png(matrix, tokens, title, path, label=self.kind)
        except Exception as exc:  # noqa: BLE001 - disk full, bad directory...: tell, don't crash
            self.call_from_thread(self.notify, f"cannot save {path}: {exc}", severity="error")
            return
        self.last_export = path
        self.call_from_thread(self.notify, f"saved {path}")


def create_app(path: str | os.PathLike | None = None, **options: Any) -> HeadsegApp:
    """Build the app on ``path`` (a text file; see :class:`~headseg.tui.options.AppOptions`).

    The keyword arguments are the other fields of :class:`AppOptions`, which
    documents them; an unknown one raises :class:`TypeError`.
    """
    return HeadsegApp(AppOptions(path=path, **options))
