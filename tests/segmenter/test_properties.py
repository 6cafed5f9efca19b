"""Property tests of the segmenter: lossless offsets, hard size limits, window-start independence."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headseg.analysis.errors import HeadsegError
from headseg.api import Segmenter

# Words with the characters that break naive offset handling: emoji, CJK,
# combining marks, CRLF, tabs, a very long token, punctuation.
WORDS = st.sampled_from([
    "the", "river", "rose", "quickly.", "Farmers", "moved!", "cattle?", "😀", "🏳️‍🌈", "中文", "東京タワー",
    "e\u0301te\u0301", "naïve", "\r\n", "\t", "\n\n", "  ", "x" * 300, "Dr.", "3.5", "—", "«quote»", ",", "...",
])
TEXTS = st.lists(WORDS, min_size=0, max_size=40).map(lambda ws: " ".join(ws))

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", window_tokens=64)


def _check_tiling(text, result):
    assert "".join(s.text for s in result) == text
    pos = 0
    for s in result:
        assert s.start == pos and text[s.start:s.end] == s.text and s.end > s.start
        pos = s.end
    assert pos == len(text)


@SETTINGS
@given(text=TEXTS)
def test_offsets_are_lossless(seg, text):
    for level in ("topic", "unit"):
        _check_tiling(text, seg.segment(text, level=level))


@SETTINGS
@given(text=TEXTS, max_chars=st.integers(min_value=1, max_value=120), min_chars=st.none() | st.integers(1, 40))
def test_max_chars_is_never_exceeded(seg, text, max_chars, min_chars):
    if min_chars is not None and min_chars > max_chars:
        min_chars = None
    result = seg.segment(text, max_chars=max_chars, min_chars=min_chars)
    _check_tiling(text, result)
    if text.strip():
        assert all(len(s.text) <= max_chars for s in result)


@SETTINGS
@given(text=TEXTS, max_tokens=st.integers(min_value=1, max_value=40))
def test_max_tokens_is_never_exceeded(seg, text, max_tokens):
    result = seg.segment(text, max_tokens=max_tokens)
    _check_tiling(text, result)
    tok = seg.loaded.tokenizer
    for s in result:
        # tokens of the document whose first character lies in the segment
        _, offsets = tok.encode(text)
        n = sum(1 for a, _ in offsets if s.start <= a < s.end)
        assert n <= max_tokens


@SETTINGS
@given(a=st.lists(WORDS, min_size=1, max_size=25), b=st.lists(WORDS, min_size=1, max_size=25))
def test_unit_vectors_do_not_depend_on_context_or_batching(seg, a, b):
    """A unit is encoded alone: its vector is the same whatever precedes it and however it is batched."""
    from headseg.analysis.text import tokenize

    head = " ".join(a) + " "
    tail = " ".join(b) + " The end."
    units_b = seg.units(tail)
    units_ab = [(0, len(head))] + [(x + len(head), y + len(head)) for x, y in units_b]
    xb = seg.unit_vectors(tokenize(tail, seg.loaded.tokenizer), units_b)
    xab = seg.unit_vectors(tokenize(head + tail, seg.loaded.tokenizer), units_ab)
    np.testing.assert_allclose(xab[1:], xb, atol=1e-5)


def test_unit_level_boundaries_are_window_start_independent(seg):
    """Unit boundaries after a boundary depend only on the text from that boundary on."""
    body = "the river rose quickly and the farmers moved their cattle to higher ground " * 12
    other = "rain fell all night on the hills while the town slept " * 9
    text_b = body
    text_ab = other + body
    ub = seg.segment(text_b, level="unit").boundaries
    uab = seg.segment(text_ab, level="unit").boundaries
    junction = len(other)
    if junction in uab:
        after = [x - junction for x in uab if x > junction]
        assert after == ub


def test_exact_number_of_segments_and_errors(seg):
    text = " ".join(f"Sentence number {i} is here." for i in range(30))
    result = seg.segment(text, segments=4)
    assert len(result) == 4
    _check_tiling(text, result)
    with pytest.raises(HeadsegError):
        seg.segment(text, level="paragraph")
    with pytest.raises(HeadsegError):
        seg.segment(text, max_chars=10, min_chars=20)
    with pytest.raises(HeadsegError):
        seg.segment(text, segments=0)
    assert len(seg.segment("")) == 0
    assert [s.text for s in seg.segment("  \n ")] == ["  \n "]
