"""Numbers of any size given to the API are an InputError naming the option, never OverflowError or
ValueError (issue 49 item 2): ``penalty=10**400`` was an OverflowError (``math.isfinite`` converts it to a
float), and an integer of over 4,300 digits was a ValueError when the message showed its repr."""

from __future__ import annotations

import pytest

from headseg.analysis.errors import InputError
from headseg.segmenter.options import SegmentOptions

HUGE = [10 ** 400, -(10 ** 400), 10 ** 5000, float("inf"), float("nan"), 1e308 * 10]
FIELDS = ["penalty", "max_chars", "min_chars", "max_tokens", "target_tokens", "segments", "overlap", "depth"]


@pytest.mark.parametrize("value", HUGE, ids=["1e400-int", "minus-1e400-int", "5000-digits", "inf", "nan", "overflow"])
@pytest.mark.parametrize("field", FIELDS)
def test_any_number_is_refused_by_name(field, value):
    level = {"depth": "tree", "overlap": "topic"}.get(field, "topic")
    with pytest.raises(InputError, match=rf"^{field} must be ") as refused:
        SegmentOptions(level=level, **{field: value})
    assert len(str(refused.value)) < 200 and "\n" not in str(refused.value)


def test_the_largest_penalty_is_taken_as_an_int_and_a_float():
    assert SegmentOptions(penalty=10 ** 6).penalty == 10 ** 6
    assert SegmentOptions(penalty=0.35).penalty == 0.35
