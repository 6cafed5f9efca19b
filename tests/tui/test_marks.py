"""The TUI's marks: one segmenter pass per document, built from a SegmenterConfig, and no silent fallback.

Each expectation is recomputed independently with :class:`headseg.Segmenter` itself.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from headseg.analysis.errors import HeadsegError
from headseg.analysis.text import split_sentences
from headseg.config import SegmenterConfig
from headseg.segmenter.pipeline import Pipeline
from headseg.tui.loading import mark_document
from headseg.tui.marks import AutoSegmenter
from headseg.tui.options import AppOptions

TEXT = (Path(__file__).resolve().parents[1] / "fixtures" / "tui" / "sample.txt").read_text(encoding="utf-8")


@pytest.fixture
def passes(monkeypatch):
    """The texts of every ``Pipeline.segment_many`` call (every ``segment`` goes through it)."""
    seen: list[list[str]] = []
    real = Pipeline.segment_many

    def counted(self, texts, *args, **kwargs):
        texts = list(texts)
        seen.append(texts)
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "segment_many", counted)
    return seen


def test_each_document_is_segmented_once(tiny_bert, passes):
    """One pass gives the tree and its units: the units are exactly ``level="unit"``'s, the topics
    flat headseg's and the tree ``level="tree"``'s, each recomputed by a Segmenter of its own."""
    from headseg.api import Segmenter

    text = "\n\n".join([TEXT] * 4)
    marked, warning = AutoSegmenter(loaded=tiny_bert)(text)
    assert warning == "" and marked.source == "segmenter"
    assert passes == [[text]]  # once (it was twice: level="unit", then level="tree")
    real = Segmenter(model=tiny_bert)
    assert marked.units == [(s.start, s.end) for s in real.segment(text, level="unit")]
    flat, tree = real.segment(text), real.segment(text, level="tree")
    assert marked.topics == [(s.start, s.end) for s in flat]
    assert marked.topic_scores == [float(s.score) for s in tree]
    want = [(n.depth, n.start, n.end, p) for n, p in zip(tree.nodes, tree.node_paths())]
    assert marked.tree == (want if any(n.depth > 1 for n in tree.nodes) else [])
    assert marked.topic_headings == [[] for _ in flat]  # plain text: no headings


def test_the_app_marks_a_document_with_one_pass_on_a_segmenter_of_its_own(tiny_bert, passes):
    options = AppOptions(text=TEXT, loaded=tiny_bert)
    marked, warning = mark_document(options, tiny_bert, TEXT)
    assert warning == "" and passes == [[TEXT]]
    auto = AutoSegmenter(options.segmenter_config(), loaded=tiny_bert)
    assert auto(TEXT) == (marked, "") and auto(TEXT) == (marked, "")
    # nothing is kept between calls (the app makes one call): no segmenter, no lock, the model handed over
    assert set(vars(auto)) == {"config", "loaded"} and auto.loaded is tiny_bert


def test_markdown_headings_are_marked(tiny_bert):
    from headseg.api import Segmenter

    md = "# Games\n\n" + TEXT + "\n\n# More games\n\n" + TEXT
    marked, _ = AutoSegmenter(loaded=tiny_bert)(md)
    assert marked.topic_headings == [list(s.headings) for s in Segmenter(model=tiny_bert).segment(md)]
    # whether the second section opens a segment is the evidence's (issue 48: the same text twice has none)
    assert marked.topic_headings[0] == ["Games"]
    units = Segmenter(model=tiny_bert).segment(md, level="unit")
    assert marked.units == [(s.start, s.end) for s in units]  # split at the blocks, as the tree's


def test_a_whitespace_text_is_marked_as_its_units(tiny_bert, passes):
    marked, warning = AutoSegmenter(loaded=tiny_bert)("  \n\n ")
    assert warning == "" and marked.units == marked.topics == [(0, 5)] and passes == [["  \n\n "]]


def test_the_segmenter_is_built_from_the_apps_config(tiny_bert):
    options = AppOptions(text=TEXT, model="some/model", profile="heads.json")
    assert options.segmenter_config() == SegmenterConfig(model="some/model", profile="heads.json", quiet=True)
    assert AutoSegmenter(options.segmenter_config()).config == options.segmenter_config()
    assert AutoSegmenter({"backend": "torch"}).config == SegmenterConfig(backend="torch")


@pytest.mark.parametrize("settings, message", [
    ({"model": 5}, "model must be a path or a name"),
    ({"profile": 3.5}, "profile must be a path or a name"),
])
def test_a_bad_setting_is_an_error_before_the_app_starts(settings, message):
    with pytest.raises(HeadsegError, match=message):
        AppOptions(text=TEXT, **settings)
    with pytest.raises(HeadsegError, match=message):
        AutoSegmenter(settings)
    AppOptions(text=TEXT, segmenter=None, **settings)  # no segmenter: nothing to build
    with pytest.raises(HeadsegError, match="unknown setting"):
        AutoSegmenter({"modle": "x"})


def test_a_segmenter_that_cannot_be_built_is_a_warning_never_another_model(monkeypatch):
    """A TypeError building the segmenter was retried as ``Segmenter()``: the embedded model, silently.
    It is reported now, and nothing else is built."""
    built = []

    class Refusing:
        def __init__(self, **kwargs):
            built.append(kwargs)
            raise TypeError("Segmenter() got an unexpected keyword argument 'profile'")

    monkeypatch.setitem(sys.modules, "headseg.api", types.SimpleNamespace(Segmenter=Refusing))
    marked, warning = AutoSegmenter({"model": "mine", "profile": "mine.json"})(TEXT)
    assert warning == "segmenter failed (Segmenter() got an unexpected keyword argument 'profile'); showing sentences"
    assert marked.units == split_sentences(TEXT) and marked.topics == [] and marked.source == "sentences"
    assert built == [{"config": SegmenterConfig(model="mine", profile="mine.json")}]  # no retry without them


def test_a_missing_profile_is_a_warning_not_the_shipped_profile(tiny_bert, tmp_path):
    marked, warning = AutoSegmenter({"profile": str(tmp_path / "no.json")}, loaded=tiny_bert)(TEXT)
    assert marked.source == "sentences" and warning.startswith("segmenter failed (")
    assert "no.json" in warning and warning.count("\n") == 0


def test_a_segmenter_that_fails_on_the_text_is_a_warning(tiny_bert, monkeypatch):
    def broken(self, texts, *args, **kwargs):
        raise RuntimeError("no profile for this model")

    monkeypatch.setattr(Pipeline, "segment_many", broken)
    marked, warning = AutoSegmenter(loaded=tiny_bert)(TEXT)
    assert "no profile for this model" in warning and marked.topics == [] and marked.source == "sentences"


def test_without_the_segmenter_api_the_marks_are_sentences(monkeypatch):
    monkeypatch.setitem(sys.modules, "headseg.api", None)
    marked, warning = AutoSegmenter()(TEXT)
    assert marked.units == split_sentences(TEXT) and marked.topics == []
    assert "segmenter unavailable" in warning
