"""Snapshot tests (pytest-textual-snapshot) at fixed terminal sizes.

They replay ``tests/fixtures/tui/doc_tiny.npz`` (tiny random BERT activations),
so no model runs and the pictures are deterministic.  After an intended visual
change: ``.venv/bin/pytest tests/test_tui_snapshots.py --snapshot-update`` and
review the SVGs in ``tests/__snapshots__/test_tui_snapshots/``.
"""

from __future__ import annotations

from pathlib import Path

from headseg.tui.app import create_app
from headseg.tui.marks import MarkedSpans
from headseg.tui.precomputed import load_precomputed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tui"


def _topics(text: str) -> MarkedSpans:
    from headseg.analysis.text import split_sentences

    cut = text.index("Chess")
    return MarkedSpans(split_sentences(text), [(0, cut), (cut, len(text))], [0.0, 0.9], source="segmenter")


def make_app(color_system: str = "truecolor", **kw):
    return create_app(
        document=load_precomputed(FIXTURES / "doc_tiny.npz"),
        segmenter=_topics,
        profile=FIXTURES / "profile_tiny.json",
        report=FIXTURES / "report_tiny.json",
        color_system=color_system,
        **kw,
    )


def keys(*names: str):
    """A ``run_before`` that waits for the workers, then presses ``names`` one by one, settling each time."""

    async def run(pilot):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        for k in names:
            await pilot.press(k)
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()

    return run


def test_initial_view(snap_compare):
    """Profile head L1H2 opens; report statistic colours the grid; topic 2 is marked in the text."""
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=keys())


def test_attention_next_window_cursor(snap_compare):
    """Attention map of window 2 with the cursor moved; the cursor tokens are highlighted in the text."""
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=keys("a", "n", "down", "down", "right"))


def test_sentence_overlay_256_colours(snap_compare):
    """Sentence-block overlay, drawn with the explicit 256-colour palette, grid on another statistic."""
    assert snap_compare(
        make_app("256"), terminal_size=(120, 36), run_before=keys("a", "a", "a", "s", "s", "right_square_bracket")
    )


def test_small_terminal_pools(snap_compare):
    """At 80x24 the 32x32 matrix is max-pooled to fit; the title says so."""
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=keys())


def test_help_screen(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=keys("question_mark"))


def test_empty_file_message(snap_compare, monkeypatch):
    # A committed empty file and a relative path, so the message is the same on every machine.
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    app = create_app(Path("tests/fixtures/tui/empty.txt"), segmenter=None, color_system="truecolor")
    assert snap_compare(app, terminal_size=(100, 24), run_before=keys())
