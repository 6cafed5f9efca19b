"""The headseg TUI application.

:func:`create_app` is the one entry point, shared by ``headseg tui`` and the
tests.  Everything slow (loading the model, running windows, the segmenter,
matplotlib) runs in thread workers; the UI thread only slices cached arrays and
draws, and every failure becomes a notification.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Header, Input, Static

from headseg.analysis.errors import HeadsegError
from headseg.analysis.norms import strip_marker

from .data import (
    DEFAULT_HEAD_BYTES,
    DEFAULT_MAX_WINDOWS,
    KIND_LABELS,
    KINDS,
    AutoSegmenter,
    DocumentModel,
    ModelSource,
    MarkedSpans,
    read_document,
    sentence_segmentation,
    spans_to_token_ids,
)
from .heatmap import POOLINGS, resolve_color_system
from .render import document_excerpt, export_png
from .stats import document_statistics, load_report_stats
from .widgets import DocumentView, HeadGrid, MatrixView

SAMPLE_PATH = Path(__file__).resolve().parent / "sample.txt"

HELP = """\
[b]headseg tui — keys[/b]

  [b]tab[/b] / shift+tab   next / previous pane (document, matrix, grid)
  arrows, [b]hjkl[/b]      matrix: move the cell cursor · grid: choose a head
                   document: previous / next window (left/right)
  [b][[/b] / [b]][/b]            previous / next layer
  [b],[/b] / [b].[/b]            previous / next head
  [b]n[/b] / [b]p[/b]            next / previous window
  [b]a[/b]                cycle matrix: similarity, attention, ‖αf(x)‖, sentence blocks
  [b]m[/b]                pooling when the matrix is larger than the pane: max / mean
  [b]s[/b]                cycle the statistic that colours the grid
  [b]/[/b]                find a token (cursor jumps to it and its most similar token)
  [b]e[/b]                save the current matrix as PNG
  [b]?[/b]                this help        [b]q[/b]  quit

Grid: [b]●[/b] = head selected by the profile, [b][ ][/b] = the head shown.
Colours: viridis, dark = low, yellow = high; red = the cursor cell.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss_help", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: 84; height: auto; border: round $accent; padding: 1 2; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)


class FindScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    FindScreen { align: center middle; }
    FindScreen > Input { width: 50; border: round $accent; }
    """

    def compose(self) -> ComposeResult:
        yield Input(placeholder="find token (e.g. river)", id="find")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HeadsegApp(App):
    """See :func:`create_app`."""

    TITLE = "headseg tui"
    AUTO_FOCUS = "#matrix"
    CSS = """
    #body { height: 1fr; }
    #doc { width: 40%; border: round $panel-lighten-2; padding: 0 1; }
    #doc:focus { border: round $accent; }
    #right { width: 1fr; }
    #matrix { height: 1fr; border: round $panel-lighten-2; }
    #matrix:focus { border: round $accent; }
    #cursor-info { height: 2; padding: 0 1; }
    #grid-box { height: auto; max-height: 50%; border: round $panel-lighten-2; }
    #grid-box:focus-within { border: round $accent; }
    """

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

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        text: str | None = None,
        document: DocumentModel | None = None,
        model: str | None = None,
        loaded=None,
        profile: str | os.PathLike | None = None,
        report: str | os.PathLike | None = None,
        segmenter="auto",
        max_tokens: int = 128,
        max_windows: int = DEFAULT_MAX_WINDOWS,
        head_bytes: int = DEFAULT_HEAD_BYTES,
        color_system: str = "auto",
        export_dir: str | os.PathLike = ".",
        stats_windows: int = 4,
    ):
        super().__init__()
        self.path = path
        self.text_arg = text
        self.doc: DocumentModel | None = document
        self.model_spec = model
        self.loaded = loaded
        self.profile_path = profile
        self.report_path = report
        self.segmenter = segmenter
        self.max_tokens = max_tokens
        self.max_windows = max_windows
        self.head_bytes = head_bytes
        self.color_system = resolve_color_system(color_system)
        self.export_dir = Path(export_dir)
        self.stats_windows = stats_windows
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

    # ----------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
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
        return self.query_one("#matrix", MatrixView)

    @property
    def grid(self) -> HeadGrid:
        return self.query_one("#grid", HeadGrid)

    def on_mount(self) -> None:
        self.matrix_view.border_title = "matrix"
        self.query_one("#doc").border_title = "document"
        self.query_one("#grid-box").border_title = "layer × head"
        self.matrix_view.loading = True
        # Scrolling the grid is enough; tab should land on the grid itself.
        self.query_one("#grid-box").can_focus = False
        self.load_document()

    # ------------------------------------------------------------------ loading
    @work(thread=True, exclusive=True, group="load")
    def load_document(self) -> None:
        try:
            doc = self.doc or self._build_document()
            notes = self._load_extras(doc)
            doc.matrices(0)
            stats = dict(self._report_stats)
            stats.update({f"document · {k}": v for k, v in document_statistics(doc, self.stats_windows).items()})
            self.call_from_thread(self._document_ready, doc, stats, notes)
        except HeadsegError as exc:
            self.call_from_thread(self._load_failed, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - never let a worker kill the app
            self.call_from_thread(self._load_failed, f"{type(exc).__name__}: {exc}")
            return
        self._run_segmenter(doc)

    def _build_document(self) -> DocumentModel:
        note = ""
        if self.text_arg is not None:
            text = self.text_arg
            if not text.strip():
                raise HeadsegError("empty text: nothing to show")
        else:
            path = self.path if self.path is not None else _default_sample()
            text, note = read_document(path, head_bytes=self.head_bytes)
        if self.loaded is None:
            from headseg.analysis.model import load_model

            self.loaded = load_model(self.model_spec)
        return DocumentModel.from_text(
            text, ModelSource(self.loaded), max_tokens=self.max_tokens, max_windows=self.max_windows, note=note
        )

    def _load_extras(self, doc: DocumentModel) -> list[tuple[str, str]]:
        """Profile and study report; their failures are warnings, not fatal."""
        notes: list[tuple[str, str]] = []
        self._report_stats: dict[str, np.ndarray] = {}
        if self.report_path is not None:
            try:
                self._report_stats = {
                    f"report · {k}": v
                    for k, v in load_report_stats(self.report_path, doc.num_layers, doc.num_heads).items()
                }
            except HeadsegError as exc:
                notes.append((str(exc), "error"))
        self._profile_heads = []
        from types import SimpleNamespace

        from headseg.analysis.profile import FALLBACK_CORPUS, resolve_profile

        info = SimpleNamespace(name=doc.source.name, fingerprint=doc.source.fingerprint,
                               num_layers=doc.num_layers, num_heads=doc.num_heads)
        try:
            prof = resolve_profile(info, self.profile_path)
            # The fallback (no study was run for this model) marks nothing: no head was selected.
            if prof.corpus != FALLBACK_CORPUS:
                self._profile_heads = [(l, h) for l, h in prof.heads if l < doc.num_layers and h < doc.num_heads]
        except HeadsegError as exc:
            notes.append((f"{exc}; heads not marked", "error"))
        return notes

    def _run_segmenter(self, doc: DocumentModel) -> None:
        """Units and topics (slow: may load a model), after the document is shown."""
        seg, warning = sentence_segmentation(doc.text), ""
        if self.segmenter == "auto":
            # Hand over the loaded model, so the segmenter does not load it again.
            model = self.loaded if self.loaded is not None else self.model_spec
            seg, warning = AutoSegmenter(model=model, profile=self.profile_path)(doc.text)
        elif callable(self.segmenter):
            try:
                res = self.segmenter(doc.text)
                seg, warning = res if isinstance(res, tuple) else (res, "")
            except Exception as exc:  # noqa: BLE001 - an injected segmenter may fail like the real one
                warning = f"segmenter failed ({exc}); showing sentences"
        self.call_from_thread(self._segmentation_ready, seg, warning)

    def _document_ready(self, doc: DocumentModel, stats: dict, notes: list[tuple[str, str]]) -> None:
        self.doc = doc
        self.stats = stats
        self.profile_heads = list(self._profile_heads)
        self.status = "ready"
        self.segmentation = self.segmentation or sentence_segmentation(doc.text)
        self.sub_title = f"{doc.source.name} · {self._doc_name()}"
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
        for msg, severity in notes:
            self.notify(msg, severity=severity)
        t = len(doc.window(0))
        self.matrix_view.cursor = (min(1, t - 1), min(2, t - 1))
        self.update_view()

    def _segmentation_ready(self, seg: MarkedSpans, warning: str) -> None:
        self.segmentation = seg
        if warning:
            self.notify(warning, severity="warning")
        if self.doc is not None:
            self.update_view()

    def _load_failed(self, message: str) -> None:
        self.status = "error"
        self.message = message
        self.matrix_view.loading = False
        self.query_one("#doc-text", Static).update(Text(f"Cannot show this input:\n\n{message}", style="bold red"))
        self.matrix_view.border_title = "no matrix"
        self.notify(message, title="error", severity="error", timeout=10)

    def _doc_name(self) -> str:
        if self.path is not None:
            return Path(self.path).name
        if self.text_arg is not None:
            return "text"
        return "document" if self.doc is not None else "sample"

    # ------------------------------------------------------------------- views
    def current_matrix(self) -> np.ndarray:
        """The ``[T, T]`` matrix the matrix pane shows (window, layer, head, kind)."""
        return self.doc.matrix(self.window_index, self.layer, self.head, self.kind)

    def unit_ids(self) -> np.ndarray:
        """Unit index of each token of the current window ``[T]`` (-1 for specials)."""
        units = self.segmentation.units if self.segmentation else []
        return spans_to_token_ids(self.doc.window(self.window_index), units)

    def update_view(self) -> None:
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
        if lay is None:
            # Not drawn yet (the pane has no size): the Drawn message brings the rest.
            size = f"{t}×{t}"
        elif lay.pooled:
            size = f"{t}×{t} → {lay.bins}×{lay.bins} {self.pooling}-pooled"
        elif lay.zoom > 1:
            size = f"{t}×{t} (×{lay.zoom})"
        else:
            size = f"{t}×{t}"
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
        lo, hi = mv.value_range
        line.append(f"{lo:.4g} ", style="dim")
        for seg in mv.renderer.legend(24):
            line.append(seg.text, style=seg.style)
        line.append(f" {hi:.4g}", style="dim")
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
        body, (a, b) = document_excerpt(doc.text, (w.start_char, w.end_char), seg.units, seg.topics, spans)
        head = Text()
        head.append(f"window {self.window_index + 1}/{len(doc)}", style="bold")
        if doc.total_windows > len(doc):
            head.append(f" (of {doc.total_windows})", style="bold yellow")
        head.append(f" · chars {w.start_char}–{w.end_char} of {len(doc.text):,} · {len(w)} tokens\n", style="dim")
        head.append(
            f"units: {seg.source} ({len(seg.units)}) · topics: {len(seg.topics) if seg.topics else 'none'}\n",
            style="dim",
        )
        if doc.note:
            head.append(f"note: {doc.note}\n", style="yellow")
        head.append("\n")
        self.query_one("#doc-text", Static).update(head + body)

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
        try:
            self.doc.matrices(index)
        except Exception as exc:  # noqa: BLE001 - report and keep the app alive
            self.call_from_thread(self.notify, f"window {index + 1}: {exc}", severity="error")
            return
        self.call_from_thread(self._window_ready, index)

    def _window_ready(self, index: int) -> None:
        if index != self.window_index:
            return
        if self._pending_row is not None:
            row, self._pending_row = self._pending_row, None
            self._place_cursor(row)
        else:
            self.update_view()

    # ----------------------------------------------------------------- messages
    def on_matrix_view_cursor_moved(self, message: MatrixView.CursorMoved) -> None:
        if self.doc is not None and self.matrix_view.matrix is not None:
            self._update_info()
            self._update_document()

    def on_matrix_view_drawn(self, message: MatrixView.Drawn) -> None:
        # The title says how the matrix was pooled, which depends on the pane size.
        if self.doc is not None and self.matrix_view.matrix is not None:
            self._update_titles()
            self._update_info()

    def on_head_grid_head_chosen(self, message: HeadGrid.HeadChosen) -> None:
        self.select_head(message.layer, message.head)

    def on_document_view_window_step(self, message: DocumentView.WindowStep) -> None:
        self.action_window(message.step)

    # ------------------------------------------------------------------ actions
    def select_head(self, layer: int, head: int) -> None:
        if self.doc is None:
            return
        self.layer = min(max(layer, 0), self.doc.num_layers - 1)
        self.head = min(max(head, 0), self.doc.num_heads - 1)
        self.grid.set_cursor(self.layer, self.head)
        self.update_view()

    def action_layer(self, step: int) -> None:
        if self.doc is not None:
            self.select_head(self.layer + step, self.head)

    def action_head(self, step: int) -> None:
        if self.doc is not None:
            self.select_head(self.layer, self.head + step)

    def action_window(self, step: int) -> None:
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
        self.kind = KINDS[(KINDS.index(self.kind) + 1) % len(KINDS)]
        self.update_view()

    def action_pooling(self) -> None:
        self.pooling = POOLINGS[(POOLINGS.index(self.pooling) + 1) % len(POOLINGS)]
        self.update_view()

    def action_stat(self) -> None:
        if self.stats:
            self.stat_index = (self.stat_index + 1) % len(self.stats)
            self._show_stat()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_find(self) -> None:
        if self.doc is not None:
            self.push_screen(FindScreen(), self.find_token)

    def find_token(self, query: str | None) -> bool:
        """Move the cursor to the next token matching ``query`` (this window first, then later ones).

        The column goes to the token's most similar partner in the current
        matrix, so the cursor shows a pair.  Returns whether a token was found.
        """
        if not query or not query.strip() or self.doc is None:
            return False
        q = strip_marker(query.strip()).lower()
        start_row = self.matrix_view.cursor[0] + 1
        n = len(self.doc)
        for step in range(n + 1):
            wi = (self.window_index + step) % n
            w = self.doc.window(wi)
            keys = [strip_marker(t).lower() if not sp else None for t, sp in zip(w.tokens, w.special)]
            first = start_row if step == 0 else 0
            last = len(keys) if step < n else start_row
            hits = [i for i in range(first, last) if keys[i] == q] or [
                i for i in range(first, last) if keys[i] is not None and q in keys[i]
            ]
            if hits:
                self._jump_to(wi, hits[0])
                return True
        self.notify(f"token {query!r} not found in the loaded windows", severity="warning")
        return False

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


def _default_sample() -> Path:
    """``examples/sample.txt`` of a source checkout, else the paragraph shipped with the TUI."""
    repo_sample = Path(__file__).resolve().parent.parent / "examples" / "sample.txt"
    return repo_sample if repo_sample.is_file() else SAMPLE_PATH


def create_app(
    path: str | os.PathLike | None = None,
    *,
    text: str | None = None,
    document: DocumentModel | None = None,
    model: str | None = None,
    loaded=None,
    profile: str | os.PathLike | None = None,
    report: str | os.PathLike | None = None,
    segmenter="auto",
    max_tokens: int = 128,
    max_windows: int = DEFAULT_MAX_WINDOWS,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    color_system: str = "auto",
    export_dir: str | os.PathLike = ".",
    stats_windows: int = 4,
) -> HeadsegApp:
    """Build the app.

    The input is one of ``path`` (a text file), ``text``, or ``document`` (a
    ready :class:`DocumentModel`, e.g. from :func:`tui.data.load_precomputed`);
    none means the bundled sample.  ``loaded`` skips loading ``model``.
    ``segmenter`` is ``"auto"`` (``segmenter.api`` if present), ``None``
    (sentences only) or a callable ``text -> MarkedSpans | (MarkedSpans, warning)``.
    ``profile=None`` uses the shipped profile when it matches the model.
    """
    return HeadsegApp(
        path=path,
        text=text,
        document=document,
        model=model,
        loaded=loaded,
        profile=profile,
        report=report,
        segmenter=segmenter,
        max_tokens=max_tokens,
        max_windows=max_windows,
        head_bytes=head_bytes,
        color_system=color_system,
        export_dir=export_dir,
        stats_windows=stats_windows,
    )
