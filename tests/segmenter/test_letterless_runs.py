"""A long sentence of punctuation alone (``'.' * N``, ``'*' * N``) is cut into fixed pieces without the unit
detector, whose windows read each of its tokens about three times more (issue 49, item 9); a stretch with
letters still goes through the detector.  Counted in model calls, never time."""

from __future__ import annotations

import pytest

from headseg.analysis.text import tokenize
from headseg.api import Segmenter
from headseg.segmenter import runs as runs_mod
from headseg.segmenter import units as units_mod
from headseg.segmenter.encode import UnitEncoder
from sample_texts import WORDS


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", batch_size=7)


def _units(seg, monkeypatch, text):
    """``seg.units(text)`` (checked to tile ``text``) and the windows of every detector call."""
    calls, real = [], UnitEncoder.capture
    monkeypatch.setattr(UnitEncoder, "capture", lambda self, w, *a, **k: calls.append(len(w)) or real(self, w, *a, **k))
    spans = seg.units(text, mode="auto")
    assert "".join(text[a:b] for a, b in spans) == text
    return calls, spans


@pytest.mark.parametrize("run", ["." * 2000, "*" * 2000, "?!" * 1000, "-=" * 800 + " ... " + "#" * 600],
                         ids=["dots", "stars", "?!", "mixed"])
def test_a_letterless_sentence_costs_no_detector_call(seg, monkeypatch, run):
    calls, spans = _units(seg, monkeypatch, run)
    assert calls == []  # before: dozens of 64-token windows
    tokens = [len(tokenize(run[a:b], seg.encoder.tokenizer)) for a, b in spans]
    assert max(tokens) <= runs_mod.FILLER_TOKENS + 2 and len(spans) >= 2


def test_words_in_the_sentence_keep_the_detector(seg, monkeypatch):
    """A sentence of real words (no punctuation) goes through the detector; a run of one letter among the
    symbols (``'*' * 1000 + 'a' + '*' * 1000``) is repetitive, tests/segmenter/test_repetitive_runs.py."""
    calls, _ = _units(seg, monkeypatch, "*" * 1000 + " " + WORDS)
    assert sum(calls) > 0


def test_a_short_letterless_sentence_is_one_unit_as_before(seg, monkeypatch):
    calls, spans = _units(seg, monkeypatch, "Rain fell. " + "*" * 40 + " Then it stopped.")
    assert calls == [] and len(spans) <= 3


def test_a_wide_table_row_keeps_the_detector(seg, monkeypatch):
    """A letterless line of ordinary Markdown (a table's separator row, at most about 100 tokens) is not
    touched: only runs of more than ``FILLER_RUN`` tokens are cut on the grid."""
    row = "|" + "---:|" * 60
    calls, _ = _units(seg, monkeypatch, row)
    assert len(tokenize(row, seg.encoder.tokenizer)) <= runs_mod.FILLER_RUN and sum(calls) > 0
