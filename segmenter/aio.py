"""The asyncio face of a :class:`~headseg.segmenter.api.Segmenter`: ``await seg.asegment(text)``.

An :class:`AsyncRunner` runs the segmenter's CPU work (tokenizing, units,
topic search) in a bounded pool of worker threads and its model work in one
:class:`~headseg.segmenter.batcher.Batcher`, so concurrent coroutines never
block the event loop and their windows share the model: packed into calls by a
token budget, or (an int8 graph on CPU) run one by one by a lane per core.
``headseg serve`` uses the same runner.  Cancelling the awaiting task cancels
the document's :class:`~headseg.segmenter.batcher.Ticket`: its windows that
have not run yet are dropped.

The runner works on a shallow copy of the segmenter whose backend is the
batcher's; the segmenter itself, and its synchronous methods, are unchanged.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Sequence

from headseg.analysis.errors import HeadsegError

from .batcher import DEFAULT_MAX_BATCH_TOKENS, BatchedBackend, Batcher, Ticket, current_ticket
from .options import SegmentOptions
from .stream import iterable_of

#: worker threads of a runner: documents whose CPU work and windows are in flight at once
DEFAULT_WORKERS = 16

_RUNNERS_LOCK = threading.Lock()


class AsyncRunner:
    """Segment from asyncio: a batcher owning ``segmenter``'s backend and ``workers`` threads.

    ``max_batch_tokens``: the token budget of one model call.
    ``on_batch(tokens, windows)``: called after each model call (metrics).
    ``lanes``: threads calling the model side by side (default: what the
    backend runs well, :func:`~headseg.segmenter.batcher.backend_lanes`).
    """

    def __init__(self, segmenter, max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS, workers: int = DEFAULT_WORKERS,
                 on_batch: Callable[[int, int], None] | None = None, lanes: int | None = None):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise HeadsegError(f"workers must be a positive integer (got {workers!r})")
        self.batcher = Batcher(segmenter.backend, max_batch_tokens, on_batch=on_batch, lanes=lanes)
        self.segmenter = copy.copy(segmenter)
        self.segmenter.backend = BatchedBackend(self.batcher)
        # weak: the segmenter keeps its runner (runner_of), and it should go with its segmenter
        self._source = weakref.ref(segmenter)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="headseg-worker")
        self._finalizer = weakref.finalize(self, _shutdown, self.batcher, self.pool)

    def segment_many_sync(self, texts: Sequence[str], opts: SegmentOptions, ticket: Ticket | None = None,
                          progress=None) -> list:
        """``segment_many`` on the calling thread, its windows through the batcher under ``ticket``."""
        token = current_ticket.set(ticket)
        try:
            return self._current().segment_many(list(texts), opts, progress=progress)
        finally:
            current_ticket.reset(token)

    def _current(self):
        """The segmenter as it is now (its settings may have changed since the runner was made), on the
        batcher's backend; the runner's copy once the segmenter itself is gone."""
        source = self._source()
        if source is None:
            return self.segmenter
        seg = copy.copy(source)
        seg.backend = self.segmenter.backend
        return seg

    async def segment_many(self, texts: Sequence[str], options: SegmentOptions | Mapping[str, Any] | None = None,
                           ticket: Ticket | None = None, **overrides: Any) -> list:
        """The segmentations of ``texts`` (one shared ``segment_many``), without blocking the event loop.

        Cancelling the awaiting task cancels ``ticket`` (one is made if not
        given): the pending windows are dropped and the worker stops at its next
        model call.
        """
        opts = SegmentOptions.of(options, **overrides)
        texts = iterable_of(texts, "texts must be a list of str")
        ticket = ticket or Ticket()
        loop = asyncio.get_running_loop()
        ctx = contextvars.Context()  # the worker's ticket is its own, not the pool thread's
        fut = loop.run_in_executor(self.pool, ctx.run, self.segment_many_sync, texts, opts, ticket)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            ticket.cancel()
            self.batcher.drop(ticket)
            # shield() stops watching the worker's future once the caller is gone: retrieve its end
            # (the Cancelled it raises now) here, or the loop reports "Future exception was never
            # retrieved" on stderr.
            fut.add_done_callback(_retrieve)
            raise

    async def segment(self, text: str, options: SegmentOptions | Mapping[str, Any] | None = None,
                      ticket: Ticket | None = None, **overrides: Any):
        """One text's segmentation (see :meth:`segment_many`)."""
        return (await self.segment_many([text], options, ticket=ticket, **overrides))[0]

    async def segment_each(self, texts: Sequence[str], options: SegmentOptions | Mapping[str, Any] | None = None,
                           **overrides: Any) -> list:
        """Each text segmented on its own, all at once: their windows meet in the batcher."""
        opts = SegmentOptions.of(options, **overrides)
        return list(await asyncio.gather(*(self.segment(t, opts) for t in texts)))

    def close(self) -> None:
        """Stop the batcher and the worker threads (pending work fails)."""
        self._finalizer()


def _retrieve(fut: asyncio.Future) -> None:
    """Mark ``fut``'s outcome as seen: nobody awaits it any more."""
    if not fut.cancelled():
        fut.exception()


def _shutdown(batcher: Batcher, pool: ThreadPoolExecutor) -> None:
    batcher.close()
    pool.shutdown(wait=False, cancel_futures=True)


def runner_of(segmenter) -> AsyncRunner:
    """The segmenter's :class:`AsyncRunner`, made on first use (defaults) and kept with it."""
    with _RUNNERS_LOCK:
        runner = segmenter.__dict__.get("_async_runner")
        if runner is None:
            runner = AsyncRunner(segmenter)
            segmenter.__dict__["_async_runner"] = runner
        return runner


async def asegment(segmenter, text: str, options=None, **overrides: Any):
    """``await``-able :meth:`Segmenter.segment` through the segmenter's shared runner."""
    return await runner_of(segmenter).segment(text, options, **overrides)


async def asegment_many(segmenter, texts: Sequence[str], options=None, **overrides: Any) -> list:
    """``await``-able :meth:`Segmenter.segment_many`; documents of concurrent calls share model calls."""
    return await runner_of(segmenter).segment_many(texts, options, **overrides)
