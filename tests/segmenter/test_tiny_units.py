"""Issue 35 item 7: runs of tiny units are grouped, so "a.\\n" * N costs what prose of its tokens costs."""

from __future__ import annotations

import pytest

from headseg.analysis.errors import HeadsegError
from headseg.segmenter.runs import TINY_GROUP, TINY_RUN, TINY_TOKENS, group_tiny_runs


def _tile(lengths):
    units, pos = [], 0
    for n in lengths:
        units.append((pos, pos + n))
        pos += n
    return units


def test_a_run_of_tiny_units_is_grouped_by_tokens_and_still_tiles():
    units = _tile([3] * 40)  # forty units of three characters, two tokens each
    got = group_tiny_runs(units, [2] * 40)
    per_group = TINY_GROUP // 2
    assert got == [(3 * i, min(3 * (i + per_group), 120)) for i in range(0, 40, per_group)]
    assert got[0][0] == 0 and got[-1][1] == 120 and all(a[1] == b[0] for a, b in zip(got, got[1:]))


def test_short_runs_and_ordinary_units_are_left_alone():
    tokens = [10, 2, 1, 3, 12] + [TINY_TOKENS] * (TINY_RUN - 1) + [TINY_TOKENS + 1] * 3
    units = _tile([5] * len(tokens))
    assert group_tiny_runs(units, tokens) == units


def test_a_run_is_grouped_between_ordinary_units_and_breaks_are_kept():
    tokens = [20] + [1] * TINY_RUN + [20]
    units = _tile([4] * len(tokens))
    assert group_tiny_runs(units, tokens) == [(0, 4), (4, 4 + 4 * TINY_RUN), (4 + 4 * TINY_RUN, 8 + 4 * TINY_RUN)]
    # a Markdown block starting inside the run: no group crosses it
    brk = 4 + 4 * 3
    got = group_tiny_runs(units, tokens, breaks=[brk])
    assert (4, brk) in got and any(a == brk for a, _ in got)
    with pytest.raises(HeadsegError):
        group_tiny_runs(units, tokens[:-1])


def test_the_segmenter_groups_tiny_lines_and_keeps_offsets(tiny_bert):
    from headseg.api import Segmenter

    seg = Segmenter(model=tiny_bert, backend="torch", window_tokens=64)
    text = "a.\n" * 200
    units = seg.segment(text, level="unit")
    assert "".join(s.text for s in units) == text
    assert len(units) < 200 / 4  # groups of several lines, not one unit per line
    prose = "The committee met on Monday. It approved the budget.\n" * 5
    assert [s.text for s in seg.segment(prose, level="unit")][:2] == ["The committee met on Monday. ",
                                                                     "It approved the budget.\n"]
