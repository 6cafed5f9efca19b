"""A level declares the options it takes: the options' check, the strategy's context and the search request follow."""

from __future__ import annotations

import pytest

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.segments import Segmentation
from headseg.api import Segmenter
from headseg.segmenter import levels
from headseg.segmenter.options import MAX_COUNT, SegmentOptions, option_schema
from headseg.segmenter.request import KEEP_APART, SearchRequest, TARGET_FRACTION

TEXT = "One is here. Two is here. Three is here. Four is here. Five is here. Six."


@pytest.fixture
def pairs(monkeypatch, request):
    """A level of its own that takes ``overlap`` (as the topic level does), registered for this test only."""
    scope = levels.LEVELS.scoped()  # the test's own level is gone after it
    scope.__enter__()
    request.addfinalizer(lambda: scope.__exit__(None, None, None))
    seen = []

    @levels.register_level("pairs", "units two by two", search=False, options=("overlap",))
    def pairs_level(d, x, request, ctx):
        seen.append((request, dict(ctx.options)))
        starts = [a for a, _ in d.units[2::2]]
        return d.finish(Segmentation.from_boundaries(d.text, starts, [1.0] * len(starts), level="pairs"))

    return seen


def test_a_declared_option_is_taken_and_reaches_the_strategy_alone(pairs, tiny_bert):
    assert levels.get_level("pairs").takes("overlap") and not levels.get_level("pairs").takes("segments")
    assert levels.levels_taking("overlap") == ("topic", "pairs")
    SegmentOptions(level="pairs", overlap=2)  # taken
    with pytest.raises(InputError, match="overlap goes with level topic, pairs, not unit"):
        SegmentOptions(level="unit", overlap=2)
    with pytest.raises(InputError, match="segments goes with level topic, not pairs"):
        SegmentOptions(level="pairs", segments=2)
    seg = Segmenter(model=tiny_bert, backend="torch", window_tokens=64)
    r = seg.segment(TEXT, level="pairs", overlap=2, max_chars=200)
    request, options = pairs[-1]
    # the strategy sees its own option, and the search's request: never the SegmentOptions
    assert options == {"overlap": 2}
    assert request == SearchRequest(max_chars=200)
    assert len(r) == 3 and "".join(s.text for s in r) == TEXT


def test_the_request_is_what_the_search_needs_of_the_options():
    opts = SegmentOptions(max_tokens=100, min_chars=5, max_chars=900, penalty=0.5, segments=3)
    # max_tokens' own size target keeps the confident boundaries apart (issue 48)
    assert opts.request() == SearchRequest(max_chars=900, min_chars=5, max_tokens=100,
                                           target_tokens=TARGET_FRACTION * 100, segments=3, penalty=0.5,
                                           keep_apart=KEEP_APART)
    assert SegmentOptions(max_tokens=100, min_confidence=0.8).request().keep_apart == KEEP_APART
    assert SegmentOptions(max_tokens=100, target_tokens=50).request().keep_apart is None
    assert SegmentOptions(target_tokens=30).request().target_tokens == 30
    for bad in ({"max_chars": 0}, {"segments": True}, {"penalty": float("nan")}, {"scale": 0},
                {"target_tokens": -1.0}):
        with pytest.raises(HeadsegError):
            SearchRequest(**bad)


def test_the_schema_states_the_bounds_the_check_takes():
    schema = option_schema()
    assert (schema["overlap"]["minimum"], schema["overlap"]["maximum"]) == (0, MAX_COUNT)
    for name, spec in schema.items():
        if spec["type"] != "integer":
            continue
        taker = {"depth": {"level": "tree"}}.get(name, {})
        SegmentOptions(**taker, **{name: spec["maximum"]})
        with pytest.raises(InputError, match=name):
            SegmentOptions(**taker, **{name: spec["maximum"] + 1})
        with pytest.raises(InputError, match=name):
            SegmentOptions(**taker, **{name: spec["minimum"] - 1})
