"""Pilot tests: drive the app with keys and check what it shows against the analysis API."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.color import ColorType

from headseg.analysis import TorchBackend, context_similarity, windows_from_text
from headseg.analysis.norms import norm_weighted_attention
from headseg.analysis.text import split_sentences
from headseg.cli import main as cli_main
from headseg.tui.app import FindScreen, HelpScreen, HeadsegApp, create_app
from headseg.tui.marks import MarkedSpans
from headseg.tui.precomputed import load_precomputed
from headseg.tui.render import document_excerpt

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tui"
TEXT = (FIXTURES / "sample.txt").read_text(encoding="utf-8")
SIZE = (120, 36)


async def settle(pilot) -> None:
    # A finished worker may start the next one (document, then marks) through a message: wait
    # until a pause leaves no worker pending or running, so a loaded machine cannot race the test.
    for _ in range(100):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.state.name in ("PENDING", "RUNNING") for w in pilot.app.workers):
            break


async def until(pilot, condition, rounds: int = 50) -> bool:
    """Whether ``condition()`` holds within ``rounds`` pauses.  The matrix pane retitles itself when its
    Drawn message is handled, which can come a pause after the draw that set its layout."""
    for _ in range(rounds):
        if condition():
            return True
        await pilot.pause()
    return condition()


async def press(pilot, *keys: str) -> None:
    for k in keys:
        await pilot.press(k)
        await settle(pilot)


def drive(app: HeadsegApp, script, size=SIZE) -> list[tuple[str, str]]:
    """Run ``script(pilot)`` once the app has loaded; returns the notifications shown."""
    notes: list[tuple[str, str]] = []
    original = app.notify

    def record(message, *args, **kwargs):
        notes.append((str(message), kwargs.get("severity", "information")))
        return original(message, *args, **kwargs)

    app.notify = record

    async def main():
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await script(pilot)

    asyncio.run(main())
    return notes


@pytest.fixture(scope="module")
def reference(tiny_bert):
    """Independent per-window arrays: windows and one batched capture of all heads."""
    windows = windows_from_text(TEXT, tiny_bert.tokenizer, max_tokens=24)
    acts = TorchBackend(tiny_bert).capture(windows, heads=None, attention=True, norms=True)
    L, H = tiny_bert.info.num_layers, tiny_bert.info.num_heads
    out = []
    for b, w in enumerate(windows):
        t = len(w)
        z = acts.z[b, :, :t].reshape(L, H, t, -1)
        attn = acts.attn[b, :, :t, :t].reshape(L, H, t, t)
        fnorm = acts.fnorm[b, :, :t].reshape(L, H, t)
        out.append({"window": w, "s": context_similarity(z), "attn": attn, "norm": norm_weighted_attention(attn, fnorm)})
    return out


def tiny_app(tiny_bert, **kw) -> HeadsegApp:
    kw.setdefault("segmenter", None)
    kw.setdefault("color_system", "truecolor")
    return create_app(text=TEXT, loaded=tiny_bert, max_tokens=24, **kw)


def test_values_shown_match_the_analysis_api(tiny_bert, reference):
    app = tiny_app(tiny_bert)
    seen = {}

    async def script(pilot):
        mv = app.matrix_view
        assert app.status == "ready" and pilot.app.focused is mv
        assert (app.layer, app.head, app.kind) == (2, 0, "similarity")
        ref = reference[0]
        np.testing.assert_allclose(mv.matrix, ref["s"][2, 0], rtol=1e-4, atol=1e-6)
        r, c = mv.cursor
        desc, value = app.cursor_description()
        assert value == pytest.approx(float(ref["s"][2, 0][r, c]), rel=1e-4)
        w = ref["window"]
        assert f"row {r} {w.tokens[r]!r}" in desc and f"col {c} {w.tokens[c]!r}" in desc
        info = str(app.query_one("#cursor-info").content)
        assert desc in info

        await press(pilot, "left_square_bracket")
        assert app.layer == 1
        np.testing.assert_allclose(mv.matrix, ref["s"][1, 0], rtol=1e-4, atol=1e-6)
        await press(pilot, "full_stop", "full_stop")
        assert (app.layer, app.head) == (1, 2) and app.grid.cursor == (1, 2)
        await press(pilot, "a")
        assert app.kind == "attention"
        np.testing.assert_allclose(mv.matrix, ref["attn"][1, 2], atol=1e-6)
        await press(pilot, "a")
        np.testing.assert_allclose(mv.matrix, ref["norm"][1, 2], rtol=1e-4, atol=1e-7)
        await press(pilot, "a")
        assert app.kind == "sentences"
        np.testing.assert_allclose(mv.matrix, ref["s"][1, 2], rtol=1e-4, atol=1e-6)
        sent = w.sentence_ids
        want_dim = ~((sent[:, None] == sent[None, :]) & (sent[:, None] >= 0))
        np.testing.assert_array_equal(mv.dim_mask, want_dim)
        await press(pilot, "a")
        assert app.kind == "similarity"

        await press(pilot, "n")
        assert app.window_index == 1
        np.testing.assert_allclose(mv.matrix, reference[1]["s"][1, 2], rtol=1e-4, atol=1e-6)
        for _ in range(len(reference) + 2):
            await press(pilot, "n")
        assert app.window_index == len(reference) - 1
        await press(pilot, "p")
        assert app.window_index == len(reference) - 2
        # Layer bounds are clamped, never an error.
        for _ in range(5):
            await press(pilot, "right_square_bracket")
        assert app.layer == 2
        seen["ok"] = True

    notes = drive(app, script)
    assert seen == {"ok": True}
    assert not [n for n in notes if n[1] == "error"]


def test_matrix_cursor_and_document_highlight(tiny_bert, reference):
    app = tiny_app(tiny_bert)

    async def script(pilot):
        mv = app.matrix_view
        r0, c0 = mv.cursor
        await press(pilot, "down", "down", "l", "right", "j", "k", "h")
        assert mv.cursor == (r0 + 2, c0 + 1)
        w = reference[0]["window"]
        r, c = mv.cursor
        body = app.query_one("#doc-text").content
        row_text = TEXT[w.offsets[r][0] : w.offsets[r][1]]
        styled = [body.plain[s.start : s.end] for s in body.spans if "ffd75f" in str(s.style)]
        assert styled == [row_text]
        await press(pilot, "pagedown")
        assert mv.cursor[0] == r0 + 10
        # The cursor cell is drawn in the cursor colour.
        lay = mv.layout_
        y = lay.drawn_of(mv.cursor[0])
        line = mv.render_line(y // 2)
        colours = [seg.style.color if y % 2 == 0 else seg.style.bgcolor
                   for seg in line if seg.text.startswith("▀") for _ in seg.text]
        assert colours[lay.drawn_of(mv.cursor[1])] == mv.renderer.palette[mv.renderer.cursor_index]
        assert colours.count(mv.renderer.palette[mv.renderer.cursor_index]) == lay.zoom

    drive(app, script)


def test_grid_profile_report_and_stats():
    doc = load_precomputed(FIXTURES / "doc_tiny.npz")
    app = create_app(
        document=doc, segmenter=None, color_system="truecolor",
        profile=FIXTURES / "profile_tiny.json", report=FIXTURES / "report_tiny.json",
    )

    async def script(pilot):
        grid = app.grid
        assert grid.selected == {(1, 2), (2, 0), (2, 3)}
        # The view opens on the profile's first head.
        assert (app.layer, app.head) == (1, 2)
        names = list(app.stats)
        assert names == [
            "report · separator focus (norm)", "report · within-sentence share", "report · selection score",
            "report · variants/quantile/count", "report · block score",
            "document · separator focus", "document · within-sentence share",
            "document · repetition", "document · mean distance",
        ]
        assert grid.stat_name == names[0]
        np.testing.assert_allclose(grid.values, np.arange(12).reshape(3, 4) / 12)
        await press(pilot, "s", "s")
        assert grid.stat_name == names[2]
        np.testing.assert_allclose(grid.values, np.arange(12)[::-1].reshape(3, 4) / 12)
        for _ in range(len(names) - 2):
            await press(pilot, "s")
        assert grid.stat_name == names[0]
        await press(pilot, "tab")
        assert pilot.app.focused is grid
        await press(pilot, "down", "l", "l")
        assert (app.layer, app.head) == (2, 3) and grid.cursor == (2, 3)
        np.testing.assert_array_equal(app.matrix_view.matrix, doc.matrix(0, 2, 3, "similarity"))
        text = grid.render().plain
        assert "[●]" in text and text.count("●") == 3

    assert not [n for n in drive(app, script) if n[1] == "error"]


def test_profile_for_another_model_is_refused_with_a_notification(tiny_roberta):
    app = tiny_app(tiny_roberta, profile=FIXTURES / "profile_tiny.json", report=FIXTURES / "missing.json")

    async def script(pilot):
        assert app.status == "ready" and app.grid.selected == set()

    notes = drive(app, script)
    errors = [m for m, sev in notes if sev == "error"]
    assert any("was made for" in m for m in errors)
    assert any("missing.json: no such file" in m for m in errors)


def test_find_token(tiny_bert, reference):
    # Statistics from window 0 only, so later windows are computed when find reaches them.
    app = tiny_app(tiny_bert, stats_windows=1)

    async def script(pilot):
        await press(pilot, "slash")
        assert isinstance(app.screen, FindScreen)
        await pilot.press(*"cattle")
        await press(pilot, "enter")
        assert not isinstance(app.screen, FindScreen)
        w = app.doc.window(app.window_index)
        r, c = app.matrix_view.cursor
        assert w.tokens[r] == "cattle"
        row = app.current_matrix()[r].copy()
        row[r] = -np.inf
        assert c == int(np.argmax(row))
        # A token in a later window moves there.
        target = next(i for i, ref in enumerate(reference) if "chess" in ref["window"].tokens)
        assert target > 0 and not app.doc.is_cached(target)
        app.find_token("chess")
        await settle(pilot)
        r, c = app.matrix_view.cursor
        assert app.window_index == target and app.doc.window(target).tokens[r] == "chess"
        row = reference[target]["s"][app.layer, app.head][r].copy()
        row[r] = -np.inf
        assert c == int(np.argmax(row))
        assert app.find_token("zzzqqq") is False

    notes = drive(app, script)
    assert any("not found" in m for m, _ in notes)


def test_export_png_and_help(tiny_bert, tmp_path):
    app = tiny_app(tiny_bert, export_dir=tmp_path)

    async def script(pilot):
        await press(pilot, "e")
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        await press(pilot, "escape")
        assert not isinstance(app.screen, HelpScreen)

    notes = drive(app, script)
    path = tmp_path / "headseg_w1_L2H0_similarity.png"
    assert app.last_export == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (f"saved {path}", "information") in notes


@pytest.mark.parametrize(
    "content,expect",
    # More bad inputs (whitespace only, latin-1) are covered by test_tui_data's read_document tests.
    [(b"", "empty input"), (b"\x00\x01\x02binary\x00", "binary")],
)
def test_bad_files_show_a_message_and_the_app_survives(tiny_bert, tmp_path, content, expect):
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    app = create_app(path, loaded=tiny_bert, segmenter=None)

    async def script(pilot):
        assert app.status == "error" and expect in app.message
        assert expect in app.query_one("#doc-text").content.plain
        await press(pilot, "n", "a", "right_square_bracket", "e", "slash", "escape", "tab", "right")
        assert app.is_running

    notes = drive(app, script)
    assert any(expect in m and sev == "error" for m, sev in notes)


def test_huge_file_shows_the_first_windows_with_a_note(tiny_bert, tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(TEXT * 50, encoding="utf-8")
    app = create_app(path, loaded=tiny_bert, segmenter=None, max_tokens=24, max_windows=3, head_bytes=2000)

    async def script(pilot):
        doc = app.doc
        assert len(doc) == 3 and doc.total_windows > 3
        assert len(doc.text.encode()) <= 2000
        head = app.query_one("#doc-text").content.plain
        assert f"window 1/3 (of {doc.total_windows})" in head and "note:" in head
        await press(pilot, "n", "n", "n")
        assert app.window_index == 2

    notes = drive(app, script)
    assert any("-byte file: showing its first" in m and "showing the first 3 of" in m for m, _ in notes)
    assert ("only the first 3 windows are loaded", "warning") in notes


def test_model_error_becomes_a_message(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT, encoding="utf-8")
    app = create_app(path, model=str(tmp_path / "no-model"), segmenter=None)

    async def script(pilot):
        assert app.status == "error" and "no such directory" in app.message

    drive(app, script)


def test_segmenter_units_and_topics_are_marked(tiny_bert):
    cut = TEXT.index("Chess")
    units = split_sentences(TEXT)

    def fake(text):
        return MarkedSpans(units=units, topics=[(0, cut), (cut, len(text))], topic_scores=[0.0, 0.8], source="segmenter")

    app = tiny_app(tiny_bert, segmenter=fake)

    async def script(pilot):
        assert app.segmentation.source == "segmenter"
        plain = app.query_one("#doc-text").content.plain
        assert "units: segmenter (6) · topics: 2" in plain
        assert "── topic 2 ──\nChess" in plain

    drive(app, script)


def test_failing_segmenter_falls_back_to_sentences(tiny_bert):
    def broken(text):
        raise RuntimeError("segmenter exploded")

    app = tiny_app(tiny_bert, segmenter=broken)

    async def script(pilot):
        assert app.status == "ready" and app.segmentation.source == "sentences"

    notes = drive(app, script)
    assert any("segmenter exploded" in m and sev == "warning" for m, sev in notes)


def test_auto_segmenter_absent_notifies(tiny_bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "headseg.api", None)
    app = tiny_app(tiny_bert, segmenter="auto")

    async def script(pilot):
        assert app.segmentation.units == split_sentences(TEXT)

    notes = drive(app, script)
    assert any("segmenter unavailable" in m for m, _ in notes)


def test_256_colour_mode_draws_eight_bit_colours(tiny_bert):
    app = tiny_app(tiny_bert, color_system="256")

    async def script(pilot):
        strip = app.matrix_view.render_line(0)
        kinds = {seg.style.color.type for seg in strip if seg.text.startswith("▀")}
        assert kinds == {ColorType.EIGHT_BIT}

    drive(app, script)


def test_pooling_toggle_in_a_small_terminal():
    doc = load_precomputed(FIXTURES / "doc_tiny.npz")
    app = create_app(document=doc, segmenter=None, color_system="truecolor")

    async def script(pilot):
        mv = app.matrix_view
        assert mv.layout_.pooled and mv.pooling == "max"
        assert await until(pilot, lambda: "max-pooled" in mv.border_subtitle), mv.border_subtitle
        await press(pilot, "m")
        assert mv.pooling == "mean"
        assert await until(pilot, lambda: "mean-pooled" in mv.border_subtitle), mv.border_subtitle

    drive(app, script, size=(80, 24))


def test_document_excerpt_marks():
    text = "One two. Three four. Five six."
    units = [(0, 9), (9, 21), (21, 30)]
    body, (a, b) = document_excerpt(text, (9, 20), units, [(0, 9), (9, 30)], ((9, 14), (26, 29)), context=100)
    assert (a, b) == (0, 30)
    assert body.plain == "One two. \n── topic 2 ──\nThree four. Five six."
    by_text = {body.plain[s.start : s.end]: str(s.style) for s in body.spans}
    assert "ffd75f" in by_text["Three"] and "5fd7ff" in by_text["six"]
    assert "#26304a" in by_text[" four."]
    body, (a, b) = document_excerpt(text, (9, 20), units, [], (None, None), context=0)
    assert (a, b) == (9, 21) and body.plain == "… Three four.  …"


def test_cli_runs_the_app_with_its_options(tmp_path, monkeypatch, capsys):
    captured = {}

    def fake_run(self):
        captured.update(path=self.options.path, colours=self.color_system, seg=self.options.segmenter,
                        windows=self.options.max_windows)

    monkeypatch.setattr(HeadsegApp, "run", fake_run)
    monkeypatch.setattr("headseg.cli.tui.is_terminal", lambda stream: True)  # as in a terminal
    f = tmp_path / "doc.txt"
    f.write_text(TEXT, encoding="utf-8")
    rc = cli_main(["tui", str(f), "--colors", "256", "--no-segmenter", "--max-windows", "7"])
    assert rc == 0
    assert captured == {"path": str(f), "colours": "256", "seg": None, "windows": 7}
    assert cli_main(["tui", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headseg: error:") and "missing.txt: no such file" in err
    assert cli_main(["tui", str(f), "--max-windows", "0"]) == 2


@pytest.mark.parametrize("content, message", [(None, "is a directory"), (b"\x00\x01\x02 bin", "binary"),
                                              (b"  \n", "empty input")])
def test_cli_refuses_a_file_the_app_cannot_show(tmp_path, monkeypatch, capsys, content, message):
    """A folder, a binary or an empty file went into the app (a directory spun a core); one line, exit 2."""
    monkeypatch.setattr(HeadsegApp, "run", lambda self: pytest.fail("the app was started"))
    monkeypatch.setattr("headseg.cli.tui.is_terminal", lambda stream: True)
    f = tmp_path / "in"
    if content is None:
        f.mkdir()
    else:
        f.write_bytes(content)
    assert cli_main(["tui", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headseg: error:") and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("flag, content, message, code", [
    ("--report", None, "--report {f}: no such file", 2),
    ("--report", b"\x00\x01 binary", "--report {f}: not a readable JSON file", 2),
    # a profile that cannot be read is exit 4, as in every command (issue 35 item 15)
    ("--profile", b"[1, 2]", "--profile {f}: not a JSON object", 4),
    ("--profile", None, "--profile {f}: no such file", 4),
    ("--export-dir", b"a file of the user's", "--export-dir {f}: not a folder", 2),
])
def test_cli_refuses_a_bad_report_profile_or_export_folder(tmp_path, monkeypatch, capsys, flag, content, message,
                                                           code):
    """Files named on the command line were only found wanting inside the app (or, for the export
    folder, when `e` was pressed): one line and its exit code before it starts."""
    monkeypatch.setattr(HeadsegApp, "run", lambda self: pytest.fail("the app was started"))
    monkeypatch.setattr("headseg.cli.tui.is_terminal", lambda stream: True)
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    f = tmp_path / "given"
    if content is not None:
        f.write_bytes(content)
    assert cli_main(["tui", str(doc), flag, str(f)]) == code
    err = capsys.readouterr().err
    assert err.startswith("headseg: error:") and err.count("\n") == 1 and message.format(f=f) in err, err
    if content is not None:
        assert f.read_bytes() == content


def test_cli_refuses_to_start_without_a_terminal(tmp_path, monkeypatch, capsys):
    """Without a terminal (stdin from /dev/null, a pipe, CI) the app could never be quit and spun a core."""
    monkeypatch.setattr(HeadsegApp, "run", lambda self: pytest.fail("the app was started"))
    f = tmp_path / "doc.txt"
    f.write_text(TEXT, encoding="utf-8")
    assert not sys.stdin.isatty()  # pytest's captured stdin
    assert cli_main(["tui", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headseg: error:") and "needs an interactive terminal" in err, err


def test_matrix_is_drawn_at_full_size_after_a_slow_load():
    """While loading, the pane is covered by a spinner and has no region; the heatmap must still fit it after."""
    import time as _time

    doc = load_precomputed(FIXTURES / "doc_tiny.npz")
    inner = doc.source

    class Slow:
        name, num_layers, num_heads, fingerprint, tokenizer = (
            inner.name, inner.num_layers, inner.num_heads, inner.fingerprint, None)

        def compute(self, window):
            _time.sleep(0.4)
            return inner.compute(window)

    doc.source = Slow()
    app = create_app(document=doc, segmenter=None, color_system="truecolor", stats_windows=1)

    async def script(pilot):
        await pilot.pause()
        mv = app.matrix_view
        assert mv.layout_.bins == 32 and not mv.layout_.pooled
        assert sum(len(s.text) for s in mv.render_line(0) if s.text.startswith("▀")) == 32
        assert await until(pilot, lambda: "32×32 ·" in mv.border_subtitle), mv.border_subtitle

    drive(app, script)



def test_document_excerpt_and_header_mark_a_segment_tree():
    """Every node opening at a topic start is named, the document's children first; the header has one
    band line per depth, coloured node by node, and the window marked under them."""
    from headseg.tui.marks import MarkedSpans
    from headseg.tui.render import BAND_STYLES, tree_bands, window_header

    text = "One two. Three four. Five six."
    units = [(0, 9), (9, 21), (21, 30)]
    tree = [(1, 0, 21, "1"), (2, 0, 9, "1.1"), (2, 9, 21, "1.2"), (1, 21, 30, "2")]
    topics = [(0, 9), (9, 21), (21, 30)]
    body, _ = document_excerpt(text, (9, 20), units, topics, (None, None), context=100, tree=tree)
    # the text's first topic gets no line, as without a tree
    assert body.plain == "One two. \n── 1.2 ──\nThree four. \n── 2 ──\nFive six."
    body, _ = document_excerpt(text + " Seven.", (9, 20), units + [(30, 37)], topics[:2] + [(21, 37)],
                               (None, None), context=100, tree=[(1, 0, 9, "1"), (1, 9, 37, "2"),
                                                                (2, 9, 21, "2.1"), (2, 21, 37, "2.2")])
    assert "── 2 ─ 2.1 ──\nThree" in body.plain  # two nodes open at 9: both named, the shallower first
    bands = tree_bands(tree, len(text), (9, 21), width=30)
    lines = bands.plain.split("\n")
    assert lines[0] == "tree 1 " + "█" * 30 and lines[1] == "tree 2 " + "█" * 21 + " " * 9
    assert lines[2] == "       " + " " * 9 + "▔" * 12
    # one cell per character here: the colour changes exactly where a node of that depth ends
    cells = [(s.start, str(s.style)) for s in bands.spans if bands.plain[s.start:s.end] == "█"]
    row1 = [style for start, style in cells if start < len(lines[0])]
    row2 = [style for start, style in cells if len(lines[0]) < start < len(lines[0]) + 1 + len(lines[1])]
    assert row1 == [BAND_STYLES[0]] * 21 + [BAND_STYLES[1]] * 9
    assert row2 == [BAND_STYLES[0]] * 9 + [BAND_STYLES[1]] * 12

    class Window:
        start_char, end_char = 9, 21

        def __len__(self):
            return 5

    class Doc:
        note, total_windows = "", 1

        def __init__(self):
            self.text = text

        def window(self, i):
            return Window()

        def __len__(self):
            return 1

    seg = MarkedSpans(units=units, topics=topics, source="segmenter", tree=tree)
    head = window_header(Doc(), 0, seg).plain
    assert "topics: 3, the leaves of a tree of 2 levels" in head and lines[0] in head and lines[2] in head
    flat = window_header(Doc(), 0, MarkedSpans(units=units, topics=topics, source="segmenter")).plain
    assert "tree 1" not in flat and "topics: 3\n" in flat


def test_document_excerpt_names_each_topics_headings():
    """Issue 34: a topic line carries the heading path of the topic it opens (Markdown); plain text has none."""
    text = "# A\n\nOne two.\n\n## B\n\nThree four."
    units = [(0, 5), (5, 15), (15, 21), (21, 32)]
    topics = [(0, 15), (15, 32)]
    body, _ = document_excerpt(text, (15, 32), units, topics, (None, None), context=100,
                               headings=[["A"], ["A", "B"]])
    assert "── topic 2 · A › B ──\n## B" in body.plain
    body, _ = document_excerpt(text, (15, 32), units, topics, (None, None), context=100, headings=[[], []])
    assert "── topic 2 ──\n## B" in body.plain
