"""A refused value is named in its message at most a line's share long, whatever it is.

``repr()`` of an integer past 4,300 digits is itself a ValueError (Python's limit), so a refusal that
echoed such a value with ``!r`` became that ValueError's traceback instead of headseg's one-line error;
a pasted paragraph given as an option filled the message.  Every refusal names the value through
:func:`headseg.analysis.errors.shown`.
"""

from __future__ import annotations

import numpy as np
import pytest

from headseg.analysis.errors import HeadsegError, shown

HUGE_NEGATIVE = -(10 ** 5000)
LONG = "y" * 5000


def test_shown_is_repr_up_to_forty_characters_then_type_and_size():
    assert shown(7) == "7" and shown(-3.5) == "-3.5" and shown("unit") == "'unit'" and shown(None) == "None"
    assert shown(np.int64(-2)) == repr(np.int64(-2))
    assert shown("x" * 38) == repr("x" * 38)  # 40 characters with its quotes
    assert shown("x" * 39) == "str of 41 characters"
    assert shown(LONG) == "str of 5002 characters"
    assert shown([0] * 100) == f"list of {len(repr([0] * 100))} characters"
    assert shown(2 ** 127) == repr(2 ** 127)  # 128 bits, 39 digits: shown whole
    assert shown(HUGE_NEGATIVE) == "an integer of about 5001 digits"
    assert shown(10 ** 400) == "an integer of about 401 digits"
    assert shown(True) == "True"


def _segment_tree_depth(value):
    from headseg.segmenter.tree import tree_levels

    tree_levels(None, np.zeros((3, 4)), None, depth=value)


def _serve_config(value):
    from headseg.serve.config import ServeConfig

    ServeConfig(max_queue=value)


def _segmenter_config(value):
    from headseg.config import SegmenterConfig

    SegmenterConfig(threads=value)


def _batch_sizes(value):
    from headseg.segmenter.stream import check_batch_sizes

    check_batch_sizes(value, 10)


def _segment_options_level(value):
    from headseg.segmenter.options import SegmentOptions

    SegmentOptions(level=value)


def _segment_options_structure(value):
    from headseg.segmenter.options import SegmentOptions

    SegmentOptions(structure=value)


def _search_request(value):
    from headseg.segmenter.request import SearchRequest

    SearchRequest(max_tokens=value)


@pytest.mark.parametrize("refuse", [_segment_tree_depth, _serve_config, _segmenter_config, _batch_sizes,
                                    _search_request])
def test_a_huge_integer_is_refused_with_headsegs_one_line(refuse):
    if refuse is _serve_config:
        pytest.importorskip("fastapi")
    with pytest.raises(HeadsegError) as refused:
        refuse(HUGE_NEGATIVE)
    message = str(refused.value)
    assert "\n" not in message and len(message) < 300 and "about 5001 digits" in message, message


@pytest.mark.parametrize("refuse", [_segment_options_level, _segment_options_structure])
def test_a_long_string_option_is_named_by_its_size(refuse):
    with pytest.raises(HeadsegError) as refused:
        refuse(LONG)
    message = str(refused.value)
    assert "str of 5002 characters" in message and len(message) < 300, message
