"""The engine room's async runner: concurrent callers share one model through one :class:`Batcher`.

An :class:`AsyncRunner` runs a segmentation pipeline's CPU work (tokenizing,
units, topic search) in a bounded pool of worker threads and its model work in
one :class:`~headseg.export.batcher.Batcher`, so concurrent coroutines never
block the event loop and their windows share the model: packed into calls by a
token budget, or (an int8 graph on CPU) run one by one by a lane per core, the
callers in turn.

``workers`` documents do CPU work at once (more only contend for the GIL);
a document waiting for the model gives its slot up meanwhile
(:data:`~headseg.export.batcher.current_slot`), and up to ``in_flight``
documents are under way, so a document that arrives behind long ones starts at
once and its few windows take their turn in the batcher beside theirs.  With
a thread per worker and nothing else, six long documents held the four
threads of two cores until they were done, and a short one waited 23-73 s for a
thread (load average 3-11; issue 49, item 10; docs/serve.md).
``await Segmenter.asegment(text)`` and ``headseg serve`` use it.  Cancelling
the awaiting task cancels the document's :class:`~headseg.export.batcher.Ticket`:
its windows that have not run yet are dropped.

The runner needs two things of a pipeline (:class:`Segmenting`): its backend
and ``with_backend``, a pipeline like it whose model calls go to the batcher;
the pipeline itself, and its synchronous methods, are unchanged.  The runner of
a pipeline (:func:`runner_of`) is kept here, in a map that forgets the pipeline
when it goes; the pipeline knows nothing of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol, Sequence

from headseg.analysis.capture import CaptureBackend
from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.text import TokenizedText

from .batcher import BatchedBackend, Batcher, Ticket, current_slot, current_ticket

#: worker threads of a runner: documents whose CPU work and windows are in flight at once
DEFAULT_WORKERS = 16
#: documents under way at once, for each worker (the others doing no CPU work: waiting for the model)
IN_FLIGHT_PER_WORKER = 4

_RUNNERS_LOCK = threading.Lock()
#: each pipeline's runner (runner_of); weak keys: a runner goes with its pipeline (it holds the pipeline
#: only weakly, and its own copy of it)
_RUNNERS: "weakref.WeakKeyDictionary[Any, AsyncRunner]" = weakref.WeakKeyDictionary()


class Segmenting(Protocol):
    """What the runner needs of a segmentation pipeline (:class:`~headseg.segmenter.pipeline.Pipeline`)."""

    @property
    def backend(self) -> CaptureBackend:
        """The capture backend the pipeline runs on."""
        ...

    def with_backend(self, backend: CaptureBackend) -> "Segmenting":
        """The pipeline as it is now, its model calls going to ``backend``."""
        ...

    def segment_many(self, texts: Sequence[str | TokenizedText], options: Any = None, *, progress=None) -> list:
        """Segment ``texts`` with ``options`` (each a text, or its tokens: then not tokenized again)."""
        ...


class AsyncRunner:
    """Segment from asyncio: a batcher owning ``pipeline``'s backend and ``workers`` threads.

    ``max_batch_tokens``: the token budget of one model call (None: the backend's).
    ``on_batch(tokens, windows)``: called after each model call (metrics).
    ``lanes``: threads calling the model side by side (default: what the
    backend runs well, :func:`~headseg.export.batcher.backend_lanes`).
    ``workers``: documents doing CPU work at once; ``in_flight``: documents under way at once, the others
    waiting for the model (default :data:`IN_FLIGHT_PER_WORKER` × ``workers``; at least ``workers``).
    """

    def __init__(self, pipeline: Segmenting, max_batch_tokens: int | None = None, workers: int = DEFAULT_WORKERS,
                 on_batch: Callable[[int, int], None] | None = None, lanes: int | None = None,
                 in_flight: int | None = None):
        for name, v in (("workers", workers), ("in_flight", in_flight)):
            if (v is not None or name == "workers") and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise HeadsegError(f"{name} must be a positive integer (got {shown(v)})")
        self.batcher = Batcher(pipeline.backend, max_batch_tokens, on_batch=on_batch, lanes=lanes)
        self.backend = BatchedBackend(self.batcher)
        #: the pipeline over the batcher, as it was made (used once the source pipeline is gone)
        self.pipeline = pipeline.with_backend(self.backend)
        # weak: the runner map (runner_of) keeps the runner while the pipeline lives, not the other way round
        self._source = weakref.ref(pipeline)
        self._seen = _settings(pipeline)  # the source's settings that self.pipeline was made with
        self._lock = threading.Lock()
        #: the CPU slots: a document holds one except while its windows wait for the model
        self.slots = threading.Semaphore(workers)
        self.workers = workers
        self.in_flight = max(workers, IN_FLIGHT_PER_WORKER * workers if in_flight is None else in_flight)
        self.pool = ThreadPoolExecutor(max_workers=self.in_flight, thread_name_prefix="headseg-worker")
        self._finalizer = weakref.finalize(self, _shutdown, self.batcher, self.pool)

    def segment_many_sync(self, texts: Sequence[str | TokenizedText], options: Any = None, ticket: Ticket | None = None,
                          progress=None) -> list:
        """``segment_many`` on the calling thread, its windows through the batcher under ``ticket``, holding
        one of the runner's CPU slots except while its windows wait for the model."""
        token, slot = current_ticket.set(ticket), current_slot.set(self.slots)
        try:
            with self.slots:
                return self._current().segment_many(list(texts), options, progress=progress)
        finally:
            current_slot.reset(slot)
            current_ticket.reset(token)

    def _current(self) -> Segmenting:
        """The pipeline as it is now (its settings may have changed since the runner was made), on the
        batcher's backend; the runner's own once the pipeline itself is gone.

        The copy over the batcher is made again only when one of the source's attributes is no longer the
        object it was (a knob set anew, another encoder): a copy is shallow, so what it would share with
        the source, the kept one shares too.
        """
        source = self._source()
        if source is None:
            return self.pipeline
        now = _settings(source)
        with self._lock:
            if not _same(now, self._seen):
                self.pipeline, self._seen = source.with_backend(self.backend), now
            return self.pipeline

    async def segment_many(self, texts: Sequence[str | TokenizedText], options: Any = None,
                           ticket: Ticket | None = None) -> list:
        """The segmentations of ``texts`` (one shared ``segment_many`` with ``options``), without blocking
        the event loop.  An item may be a text's tokens (a caller that counted them, like the service's
        token bound, hands them over): the pipeline reads them instead of tokenizing the text again.

        Cancelling the awaiting task cancels ``ticket`` (one is made if not
        given): the pending windows are dropped and the worker stops at its next
        model call.
        """
        texts = list(texts)  # checked by the caller (a str here would be one document per character)
        ticket = ticket or Ticket()
        loop = asyncio.get_running_loop()
        ctx = contextvars.Context()  # the worker's ticket is its own, not the pool thread's
        fut = loop.run_in_executor(self.pool, ctx.run, self.segment_many_sync, texts, options, ticket)
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

    async def segment(self, text: str | TokenizedText, options: Any = None, ticket: Ticket | None = None):
        """One text's segmentation (see :meth:`segment_many`)."""
        return (await self.segment_many([text], options, ticket=ticket))[0]

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


def _settings(pipeline: Segmenting) -> dict:
    """What a pipeline's copy is made of: its attributes (a shallow snapshot: the objects, not copies)."""
    return dict(vars(pipeline))


def _same(a: dict, b: dict) -> bool:
    """Whether two snapshots hold the same objects under the same names."""
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


def runner_of(pipeline: Segmenting) -> AsyncRunner:
    """The pipeline's :class:`AsyncRunner`, made on first use (defaults) and kept while the pipeline lives."""
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(pipeline)
        if runner is None:
            runner = _RUNNERS[pipeline] = AsyncRunner(pipeline)
        return runner
