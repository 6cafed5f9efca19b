"""--max-chars splits an oversized unit on grapheme cluster boundaries (issue 15)."""

from __future__ import annotations

import pytest
import regex

from headseg.api import Segmenter
from headseg.segmenter.limits import grapheme_starts

FAMILY = "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466"  # one cluster, 7 code points
FLAG = "\U0001F1E9\U0001F1EA"  # regional indicator pair
THUMB = "\U0001F44D\U0001F3FD"  # emoji + skin tone modifier
DECOMPOSED = "e\u0301a\u0300o\u0308"  # three letters, each with a combining mark


def _clusters(text):
    """Independent: the start of every \\X match, and the end."""
    return {m.start() for m in regex.finditer(r"\X", text)} | {len(text)}


@pytest.fixture(scope="module")
def seg(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch", unit_mode="rules")


@pytest.mark.parametrize("text, max_chars", [
    (FAMILY * 6, 10),
    ((FAMILY + FLAG + THUMB + DECOMPOSED) * 4, 9),
    ("word" + DECOMPOSED * 10 + "end. " + FLAG * 9, 8),
    ("x" + THUMB * 7 + "\r\n" + FAMILY * 3, 8),
])
def test_cuts_fall_on_grapheme_boundaries(seg, text, max_chars):
    allowed = _clusters(text)
    for level in ("unit", "topic"):
        r = seg.segment(text, level=level, max_chars=max_chars)
        assert "".join(s.text for s in r) == text
        assert all(len(s.text) <= max_chars for s in r)
        assert {s.start for s in r} <= allowed, level
    assert len(seg.segment(text, level="unit", max_chars=max_chars)) > 1


def test_a_cluster_longer_than_the_limit_is_still_cut(seg):
    text = "a" + "\u0301" * 12  # one cluster of 13 code points
    r = seg.segment(text, level="unit", max_chars=5)
    assert "".join(s.text for s in r) == text and all(len(s.text) <= 5 for s in r)


def test_grapheme_starts_matches_regex():
    text = "ab" + FAMILY + "c\u0301" + FLAG + "\r\n" + THUMB
    assert set(grapheme_starts(text).tolist()) == _clusters(text)
    assert grapheme_starts(text, 2, 9).tolist() == [2, 9]
