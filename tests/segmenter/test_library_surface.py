"""The Python API as a host program meets it: argument errors, cancellation, host-process hygiene."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from headseg.analysis.errors import HeadsegError

TOPICS = (
    "The committee met on Monday. It approved the budget after a long debate. The chair thanked the members.\n\n"
    "Rain fell all night and the river rose quickly. Farmers moved their cattle to higher ground.\n\n"
    "The new phone has a larger screen and a faster chip. Its battery lasts two days."
)


@pytest.fixture(scope="module")
def segmenter():
    from headseg.api import Segmenter

    return Segmenter(quiet=True)


def test_a_cancelled_asegment_leaves_no_unretrieved_error_for_the_loop(segmenter):
    """Cancelling the awaiting task is the caller's choice: the worker's own `Cancelled` must not reach
    the loop's exception handler ("Future exception was never retrieved", printed on stderr)."""
    from headseg.export.runner import runner_of

    runner = runner_of(segmenter)
    worker_done = threading.Event()
    real = runner.segment_many_sync

    def tracked(*args, **kwargs):
        try:
            return real(*args, **kwargs)
        finally:
            worker_done.set()

    runner.segment_many_sync = tracked
    reported: list[dict] = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        # every copy's sentences numbered: repeated units are encoded once, so 40 equal copies would be quick
        text = " ".join(TOPICS.replace(". ", f" {i}. ") for i in range(40))
        task = asyncio.create_task(segmenter.asegment(text))
        await asyncio.sleep(0.2)  # tokenized, its windows queued or running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while not worker_done.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the executor future's result reaches the loop
        gc.collect()
        await asyncio.sleep(0)

    try:
        asyncio.run(main())
    finally:
        del runner.segment_many_sync
    assert worker_done.is_set()
    assert reported == []
    assert segmenter.segment(TOPICS).to_dict() == asyncio.run(segmenter.asegment(TOPICS)).to_dict()


@pytest.mark.parametrize("texts", ["One sentence. Another one.", None, 5, b"bytes"],
                         ids=["a-str", "None", "int", "bytes"])
def test_segment_many_and_iter_segment_refuse_a_text_where_texts_are_expected(segmenter, texts):
    """A str is iterable: without the check each *character* became a document (silently wrong)."""
    with pytest.raises(HeadsegError, match="texts must be"):
        segmenter.segment_many(texts)
    with pytest.raises(HeadsegError, match="items must be"):
        segmenter.iter_segment(texts)  # at the call, not at the first next()
    with pytest.raises(HeadsegError, match="texts must be"):
        asyncio.run(segmenter.asegment_many(texts))


@pytest.mark.parametrize("bad", [{"batch_docs": "3"}, {"batch_chars": 2.5}, {"batch_docs": True},
                                 {"batch_docs": 0}])
def test_iter_segment_batch_sizes_must_be_positive_integers(segmenter, bad):
    with pytest.raises(HeadsegError, match="batch_docs and batch_chars must be"):
        segmenter.iter_segment([TOPICS], **bad)
    with pytest.raises(HeadsegError, match="batch_docs and batch_chars must be"):
        segmenter.iter_segment_batches([TOPICS], **bad)


@pytest.mark.parametrize("bad, message", [({"errors": "ignore"}, "errors"), ({"progress": "yes"}, "progress"),
                                          ({"max_tokens": -1}, "max_tokens")])
def test_iter_segment_checks_its_arguments_at_the_call(segmenter, bad, message):
    """A generator would raise only at the first next(), far from the line with the slip; and reads nothing."""
    read = []

    def items():
        read.append(1)
        yield TOPICS

    for method in (segmenter.iter_segment, segmenter.iter_segment_batches):
        with pytest.raises(HeadsegError, match=message):
            method(items(), **bad)
    assert read == []
    assert [r.to_dict() for r in segmenter.iter_segment(items())] == [segmenter.segment(TOPICS).to_dict()]


def test_calling_the_segmenter_takes_the_options_as_segment_does(segmenter):
    from headseg.segmenter.options import SegmentOptions

    opts = SegmentOptions(max_chars=120)
    assert segmenter(TOPICS, opts).to_dict() == segmenter.segment(TOPICS, opts).to_dict()
    assert segmenter(TOPICS, {"level": "unit"}).to_dict() == segmenter.segment(TOPICS, level="unit").to_dict()


def test_a_bad_progress_argument_is_refused_before_any_work(segmenter, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("tokenized a text for a call with a bad argument")

    monkeypatch.setattr(segmenter, "document", no_work)
    with pytest.raises(HeadsegError, match="progress must be"):
        segmenter.segment(TOPICS, progress="yes")


@pytest.mark.parametrize("kwargs, message", [
    ({"window_tokens": 4}, "window_tokens must be an integer of at least 8"),
    ({"window_tokens": 513}, "window_tokens must be between 8 and 512"),
    ({"window_tokens": "128"}, "window_tokens must be an integer"),
    ({"window_tokens": 100.5}, "window_tokens must be an integer"),
    ({"threads": 0}, "threads must be a positive integer"),
    ({"threads": "2"}, "threads must be a positive integer"),
    ({"params": {"penalty": 1}}, "params must be a TopicParams"),
    ({"unit_params": 5}, "unit_params must be a UnitParams"),
    ({"sentence_splitter": 5}, "sentence_splitter must be a callable"),
])
def test_constructor_arguments_are_checked_before_the_backend_is_built(monkeypatch, kwargs, message):
    """A bad argument must not cost an export of the serving graph into the cache first."""
    import headseg.api as api

    def no_backend(*args, **kw):
        raise AssertionError("built a backend for a bad argument")

    monkeypatch.setattr(api, "make_backend", no_backend)
    with pytest.raises(HeadsegError, match=message):
        api.Segmenter(**kwargs)


def test_a_precision_is_refused_by_the_torch_backend_not_ignored():
    """torch runs fp32: int8 or fp16 asked of it was silently ignored."""
    from headseg.api import Segmenter

    with pytest.raises(HeadsegError, match="precision int8 is served by the onnx backend"):
        Segmenter(backend="torch", precision="int8")
    assert Segmenter(backend="torch", precision="fp32").backend.name == "torch"


@pytest.mark.parametrize("counter", ["embedded", len], ids=["by-name", "builtin"])
def test_options_with_a_token_counter_survive_pickling(counter):
    """Options travel to worker processes (multiprocessing, a process pool): the resolved counter is a
    closure that pickle cannot take, so it is resolved again from ``token_counter`` on the other side."""
    import copy
    import pickle

    from headseg.segmenter.options import SegmentOptions

    opts = SegmentOptions(max_tokens=50, target_tokens=30, token_counter=counter)
    back = pickle.loads(pickle.dumps(opts))
    assert back == opts and back.token_counter == opts.token_counter
    assert back.counter("Rain fell all night, the river rose.") == opts.counter("Rain fell all night, the river rose.")
    assert copy.deepcopy(opts).counter("two words") == opts.counter("two words")


def test_a_profile_of_the_wrong_type_is_a_profile_error():
    from headseg.analysis.errors import ProfileError
    from headseg.api import Segmenter

    with pytest.raises(ProfileError, match="profile must be a HeadProfile or a path"):
        Segmenter(profile=5)


def test_asegment_sees_the_segmenter_as_it_is_now():
    """The async runner is made on the first asegment; settings changed on the segmenter afterwards
    (its public attributes) must reach asegment as they reach segment."""
    from headseg.api import Segmenter

    seg = Segmenter(quiet=True)
    asyncio.run(seg.asegment(TOPICS))
    seg.unit_mode = "rules"
    seg.sentence_splitter = lambda text: [(0, len(text))]
    sync = seg.segment(TOPICS, level="unit")
    assert len(sync) == 1
    assert asyncio.run(seg.asegment(TOPICS, level="unit")).to_dict() == sync.to_dict()


def test_segmenting_with_the_embedded_model_makes_no_network_call(segmenter, monkeypatch, capfd):
    """Offline means no network call at all: not the model, not a token counter by name, not the async
    path (and nothing printed nor any environment variable set on the way, a capped segment count included)."""
    import os
    import socket

    calls: list = []

    def refuse(*args, **kwargs):
        calls.append(args[1:] or kwargs)
        raise OSError("a network call was made")

    import logging

    # A host whose "headseg" logger is as importing headseg leaves it (the command line, run in this
    # process by other tests, adds a stderr handler of its own that outlives it).
    monkeypatch.setattr(logging.getLogger("headseg"), "handlers", [logging.NullHandler()])
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    from headseg.api import Segmenter

    env = dict(os.environ)
    fresh = Segmenter(quiet=True)
    assert fresh.segment(TOPICS).text == TOPICS
    assert segmenter.segment(TOPICS, max_tokens=40, token_counter="embedded", segments=50).text == TOPICS
    assert asyncio.run(fresh.asegment(TOPICS)).to_dict() == fresh.segment(TOPICS).to_dict()
    assert calls == []
    assert capfd.readouterr() == ("", "")
    assert dict(os.environ) == env, "segmenting set or changed an environment variable of the host"


def test_the_model_window_is_window_tokens_and_the_old_keyword_warns(segmenter):
    """``Segmenter(max_tokens=...)`` named the model window while ``SegmentOptions.max_tokens`` is the hard
    segment limit: the window is ``window_tokens`` now, the old keyword still taken, with a warning."""
    import warnings

    from headseg.api import Segmenter

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        old = Segmenter(max_tokens=64, quiet=True)
    assert [w.category for w in seen] == [DeprecationWarning] and "window_tokens" in str(seen[0].message)
    new = Segmenter(window_tokens=64, quiet=True)
    assert old.window_tokens == new.window_tokens == old.config.window_tokens == 64
    assert old.segment(TOPICS).to_dict() == new.segment(TOPICS).to_dict()
    with pytest.raises(HeadsegError, match="not both"):
        Segmenter(max_tokens=64, window_tokens=64)
    with pytest.raises(TypeError, match="unexpected keyword argument 'windw_tokens'"):
        Segmenter(windw_tokens=64)
