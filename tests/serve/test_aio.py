"""The async API and the shared batcher on the real model: equal results, no blocking, int8 independence."""

from __future__ import annotations

import asyncio
import json

import pytest

from headseg.analysis.errors import HeadsegError

from .conftest import TOPICS, documents

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def segmenter():
    from headseg.api import Segmenter

    return Segmenter(quiet=True)


def test_asegment_equals_segment_and_keeps_the_loop_free(segmenter):
    ticks = 0

    async def ticker(stop: asyncio.Event):
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    async def main():
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))
        one = await segmenter.asegment(TOPICS, max_chars=300)
        many = await segmenter.asegment_many(documents(3), level="unit")
        stop.set()
        await tick
        return one, many

    one, many = asyncio.run(main())
    assert one.to_dict() == segmenter.segment(TOPICS, max_chars=300).to_dict()
    assert [r.to_dict() for r in many] == [r.to_dict() for r in segmenter.segment_many(documents(3), level="unit")]
    assert ticks > 1  # the loop ran other coroutines while the model worked in the threads


@pytest.mark.parametrize("lanes", [None, 1], ids=["lane-per-core", "one-lane-packing"])
def test_int8_result_does_not_depend_on_its_batch_mates(segmenter, lanes):
    """The same document alone and among 50 others sharing the model: byte-for-byte equal, whether the
    lanes run windows one by one side by side (the default on CPU) or one lane packs them into calls."""
    from headseg.export.runner import AsyncRunner

    assert segmenter.backend.precision == "int8"
    calls: list[int] = []
    runner = AsyncRunner(segmenter, max_batch_tokens=16384, workers=16, on_batch=lambda t, w: calls.append(w),
                         lanes=lanes)
    try:
        target = TOPICS + "\n\nA last line about the weather."
        alone = asyncio.run(runner.segment(target))
        alone_calls = len(calls)
        windows_alone = sum(calls)

        async def crowd():
            texts = documents(50)
            texts.insert(25, target)
            return await asyncio.gather(*(runner.segment(t) for t in texts))

        results = asyncio.run(crowd())
        assert json.dumps(results[25].to_dict()) == json.dumps(alone.to_dict())
        if runner.batcher.single:  # a lane per core: every call is one window, the lanes shared by all
            assert runner.batcher.lanes == segmenter.backend.parallel_calls > 1
            assert set(calls) == {1}
        else:
            assert max(calls[alone_calls:]) > windows_alone  # the crowd's windows really shared calls
    finally:
        runner.close()


def test_cancelling_the_task_drops_the_windows(segmenter):
    from headseg.export.runner import AsyncRunner
    from headseg.export.batcher import Ticket

    calls: list[int] = []
    runner = AsyncRunner(segmenter, max_batch_tokens=64, workers=2, on_batch=lambda t, w: calls.append(w))
    # each sentence numbered: repeated units are encoded once, and this must keep the model busy a while
    long_text = " ".join(d.replace(". ", f" {i}. ") for i, d in enumerate(documents(40)))
    ticket = Ticket()

    async def main():
        task = asyncio.create_task(runner.segment(long_text, ticket=ticket))
        while not calls:  # the model has started on it
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
        assert ticket.cancelled and runner.batcher.pending_windows == 0
        done = len(calls)
        asyncio.run(asyncio.sleep(0.3))
        # at most the calls in flight (one per lane) finished; nothing else ran for it
        assert len(calls) <= done + runner.batcher.lanes
        n_windows = len(segmenter.segment(long_text, level="unit").segments)
        assert sum(calls) < n_windows
    finally:
        runner.close()


def test_default_workers_follow_the_model_threads(monkeypatch):
    """Two workers per model thread (one per core when unset), at most 16: a one-thread Ray replica on a
    larger machine gets two, not two per core of the machine."""
    from headseg.serve.host import ServeConfig, default_workers

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert [default_workers(t) for t in (1, 2, 3, None)] == [2, 4, 6, 16]
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert default_workers(None) == 4
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert default_workers(None) == 2
    assert ServeConfig().doc_threads is None and ServeConfig(doc_threads=3).doc_threads == 3
    with pytest.raises(HeadsegError, match="doc-threads must be a positive integer"):
        ServeConfig(doc_threads=0)


def test_the_engine_starts_the_default_workers():
    from headseg.serve.host import Host, ServeConfig

    host = Host(ServeConfig.of(threads=1)).start()
    try:
        assert host.runner.workers == 2  # two per model thread doing CPU work
        assert host.runner.pool._max_workers == 8  # and as many again three times over waiting for the model
    finally:
        host.close()
