"""The async runner's own map of pipelines to runners, and its one copy of the pipeline over the batcher."""

from __future__ import annotations

import gc
import weakref

import pytest

from headseg.export.runner import runner_of

TEXT = "The committee met on Monday. It approved the budget. Rain fell all night. The river rose quickly."


def _segmenter(loaded):
    from headseg.analysis.profile import resolve_profile
    from headseg.api import Segmenter

    return Segmenter(model=loaded, profile=resolve_profile(loaded.info), backend="torch")


@pytest.fixture
def segmenter(tiny_bert):
    return _segmenter(tiny_bert)


def test_a_pipeline_keeps_no_runner_and_its_runner_goes_with_it(tiny_bert):
    segmenter = _segmenter(tiny_bert)  # not a fixture: pytest would keep it alive
    runner = runner_of(segmenter)
    assert runner_of(segmenter) is runner
    assert not any(v is runner for v in vars(segmenter).values())  # no key of the runner's in the pipeline
    copy = segmenter.with_backend(segmenter.backend)
    assert runner_of(copy) is not runner  # a copy is another pipeline, with a runner of its own
    gone = weakref.ref(runner)
    del runner, segmenter, copy
    gc.collect()
    assert gone() is None  # the map kept it only while the pipeline lived


def test_the_runner_copies_the_pipeline_only_when_a_setting_changed(segmenter):
    runner = runner_of(segmenter)
    first = runner._current()
    assert runner._current() is first  # a request costs no copy of the pipeline and its encoder
    assert first.backend is runner.backend and first is not segmenter
    expected = segmenter.segment_many([TEXT], level="unit")
    assert [r.to_dict() for r in runner.segment_many_sync([TEXT], {"level": "unit"})] == \
        [r.to_dict() for r in expected]
    segmenter.unit_mode = "rules"  # a knob set anew: the next request sees it
    second = runner._current()
    assert second is not first and second.unit_mode == "rules" and second.backend is runner.backend
    assert runner._current() is second
    runner.close()
