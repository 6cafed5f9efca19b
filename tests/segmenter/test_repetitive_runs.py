"""A long sentence that is a few tokens repeated (``'*a_' * N``, ``'[' * N + 'x' + ']' * N``, backticks
and ``'`a' * N``) is cut into fixed pieces without the unit detector, like a letterless one (issue 49,
item 9), and a run of short headings is read in groups (item 7).  The cost of each hostile kind grows
linearly and each model call carries many tokens: counted in model windows and units, never time."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.hostile_cost import make
from headseg.analysis.text import tokenize
from headseg.api import Segmenter
from headseg.segmenter import encode as encode_mod
from headseg.segmenter import units as units_mod
from headseg.segmenter.encode import UnitEncoder
from headseg.segmenter.runs import FILLER_RUN, FILLER_TOKENS, _repetitive
from headseg.segmenter.runs import may_start as _may_start
from sample_texts import WORDS


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", batch_size=7)


class Counts:
    """The detector's windows and the unit vectors' windows of one segmentation."""

    def __init__(self, monkeypatch):
        self.detector, self.encoded = 0, 0
        capture, windows = UnitEncoder.capture, encode_mod.unit_windows

        def counted_capture(enc, w, *a, **k):
            self.detector += len(w)
            return capture(enc, w, *a, **k)

        def counted_windows(*a, **k):
            out = windows(*a, **k)
            self.encoded += len(out[0])
            return out

        monkeypatch.setattr(UnitEncoder, "capture", counted_capture)
        monkeypatch.setattr(encode_mod, "unit_windows", counted_windows)


KINDS = ["*a_", "brackets", "backticks", "stars", "dots", "headings"]


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_cost_grows_linearly_in_model_windows(seg, monkeypatch, kind):
    """No detector window; unit windows about 4× for a 4× larger input, each carrying 16 tokens or more
    on average (prose's sentences: about 25).  Before (this model, 2 and 8 KB): '*a_' 82 -> 332 detector
    windows, brackets 54 -> 218, backticks 57 -> 234; headings 302 unit windows of 3.8 tokens."""
    got = []
    for n in (2_000, 8_000):
        c = Counts(monkeypatch)
        text = make(kind, n)
        result = seg.segment(text)
        assert "".join(s.text for s in result) == text
        tokens = len(seg.tokenize(text))
        got.append((c.detector, c.encoded, tokens))
    (d1, e1, t1), (d4, e4, t4) = got
    assert d1 == d4 == 0, got
    assert e4 / e1 <= 4.5 and t1 / e1 >= 16 and t4 / e4 >= 16, got


def test_repetitive_stretches_are_found_by_compression(tokenizer):
    ids = lambda t: tokenize(t, tokenizer).ids  # noqa: E731
    for kind in ("*a_", "brackets", "backticks"):
        assert _repetitive(ids(make(kind, 4_000))[:FILLER_RUN])
    assert not _repetitive(ids(WORDS)[:FILLER_RUN])
    rng = np.random.default_rng(49)
    assert not _repetitive(rng.integers(1000, 30000, FILLER_RUN))


def _detected(seg, monkeypatch, text):
    c = Counts(monkeypatch)
    spans = seg.units(text, mode="auto")
    assert "".join(text[a:b] for a, b in spans) == text
    return c.detector, spans


def test_only_the_repetitive_stretch_of_a_sentence_skips_the_detector(seg, monkeypatch):
    """Words then ``'*a_' * N`` in one sentence: the detector reads the words and at most one stretch of
    ``FILLER_RUN`` tokens more (the one where they end), the rest is cut on the grid; each grid piece
    starts where a unit may start."""
    alone, _ = _detected(seg, monkeypatch, WORDS)
    text = WORDS + " " + "*a_" * 3000
    both, spans = _detected(seg, monkeypatch, text)
    words = len(tokenize(WORDS, seg.encoder.tokenizer))
    assert words > FILLER_RUN and alone > 0  # the words alone are detected too
    assert both <= alone * (words + FILLER_RUN) / words + 2  # not the 9,000 tokens of '*a_'
    doc = tokenize(text, seg.encoder.tokenizer)
    starts = np.searchsorted(doc.offsets[:, 0], [a for a, _ in spans[1:]])
    assert all(_may_start(text, doc.offsets, int(i)) for i in starts)
    tail = [len(tokenize(text[a:b], seg.encoder.tokenizer)) for a, b in spans if a >= len(WORDS) + FILLER_RUN]
    assert tail and max(tail) <= 2 * FILLER_TOKENS


def test_an_ordinary_long_sentence_is_detected_as_before(seg, monkeypatch):
    """A long sentence with nothing repeated stays one detector range, as before."""
    real, pieces = units_mod.filler_pieces, []
    monkeypatch.setattr(units_mod, "filler_pieces", lambda *a: pieces.append(real(*a)) or pieces[-1])
    calls, _ = _detected(seg, monkeypatch, WORDS + " " + WORDS.upper())
    long = [p for p in pieces if p[0][3] - p[0][2] > FILLER_RUN]
    assert calls > 0 and long and all(len(p) == 1 and p[0][4] is True for p in long)
