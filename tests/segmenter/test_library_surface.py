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
    from headseg.segmenter.api import Segmenter

    return Segmenter(quiet=True)


def test_a_cancelled_asegment_leaves_no_unretrieved_error_for_the_loop(segmenter):
    """Cancelling the awaiting task is the caller's choice: the worker's own `Cancelled` must not reach
    the loop's exception handler ("Future exception was never retrieved", printed on stderr)."""
    from headseg.segmenter.aio import runner_of

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
        task = asyncio.create_task(segmenter.asegment(" ".join([TOPICS] * 40)))
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
