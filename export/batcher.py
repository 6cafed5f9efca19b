"""Token-budget dynamic batching: one engine serving the capture calls of many concurrent callers.

A :class:`Batcher` owns a capture backend and its *lanes*: threads that call
the backend.  Callers (one thread per document being segmented) hand it their
windows through :class:`BatchedBackend`, a
:class:`~headseg.analysis.capture.CaptureBackend` that a segmentation pipeline
takes like any other; the lanes take the pending windows of all callers from
one shared queue, first come first served, and hand each caller its rows.  The
segmentation logic stays in the pipeline; only who runs the model changes.
Everything the batcher needs of the backend is a trait of the capture protocol
(``per_window``, ``parallel_calls``, ``max_batch_tokens``).

How a lane takes windows depends on the backend (:func:`backend_lanes`):

* a backend that batches (fp32/fp16 ONNX, torch, CUDA): one lane packs the
  pending windows into one call of at most ``max_batch_tokens`` tokens (the
  design of Text Embeddings Inference's ``--max-batch-tokens``);
* a backend that runs each window in its own single-threaded call (an int8
  graph on CPU: ``OnnxBackend.per_window``): one lane per core, each taking the
  next window as soon as its last one is done.  Packing such windows into one
  call bought nothing but a barrier: the call ended with its slowest window,
  the cores idle meanwhile and again while the one batcher thread handed out
  rows and packed the next call (measured: 1.2 of 2 cores busy at 16 clients).

A result never depends on which other callers shared its call where the
backend runs each window in its own call (an int8 ONNX graph:
``OnnxBackend.per_window``), so a document gives the same bytes alone or
among fifty.  Each caller carries a :class:`Ticket`; cancelling it drops the
caller's pending windows, and its ``capture`` raises :class:`Cancelled`, so a
client that went away stops costing model time.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from headseg.analysis.capture import DEFAULT_MAX_BATCH_TOKENS, CaptureBackend, HeadActivations
from headseg.analysis.errors import HeadsegError
from headseg.analysis.text import Window

__all__ = ["DEFAULT_MAX_BATCH_TOKENS", "BatchedBackend", "Batcher", "Cancelled", "Ticket", "backend_lanes",
           "current_ticket"]


class Cancelled(HeadsegError):
    """The caller's :class:`Ticket` was cancelled: its windows were dropped unrun."""


class Ticket:
    """One caller's claim on the batcher (a request, a document); :meth:`cancel` gives it up."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._event.is_set()

    def cancel(self) -> None:
        """Drop the caller's pending windows; its waiting and future ``capture`` calls raise :class:`Cancelled`."""
        self._event.set()


#: the ticket of the code running now (set by whoever runs a caller's work in a thread)
current_ticket: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar("headseg_ticket", default=None)


@dataclass(eq=False)
class _Job:
    """One ``capture`` call waiting for its windows' rows."""

    windows: Sequence[Window]
    key: tuple
    ticket: Ticket | None
    rows: list = field(default_factory=list)
    remaining: int = 0
    error: BaseException | None = None
    heads: tuple = ()
    done: threading.Event = field(default_factory=threading.Event)

    def fail(self, exc: BaseException) -> None:
        if not self.done.is_set():
            self.error = exc
            self.done.set()


class Batcher:
    """Lanes (threads) that own ``backend`` and run the windows of all callers from one queue.

    ``max_batch_tokens``: at most this many real tokens per backend call (one
    window longer than that still runs, alone; unused in :attr:`single` mode;
    None: the backend's own ``max_batch_tokens``).
    ``lanes``: threads calling the backend side by side (default
    :func:`backend_lanes`).  ``on_batch(tokens, windows)`` is called after each
    backend call (metrics).  Thread-safe; :meth:`close` stops the lanes after
    failing what is still pending.
    """

    def __init__(self, backend: CaptureBackend, max_batch_tokens: int | None = None,
                 on_batch: Callable[[int, int], None] | None = None, lanes: int | None = None):
        if max_batch_tokens is None:
            max_batch_tokens = backend.max_batch_tokens
        if isinstance(max_batch_tokens, bool) or not isinstance(max_batch_tokens, int) or max_batch_tokens < 1:
            raise HeadsegError(f"max_batch_tokens must be a positive integer (got {max_batch_tokens!r})")
        if lanes is not None and (isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1):
            raise HeadsegError(f"lanes must be a positive integer (got {lanes!r})")
        self.backend = backend
        self.max_batch_tokens = max_batch_tokens
        self.on_batch = on_batch
        #: threads calling the backend side by side (see :func:`backend_lanes`)
        self.lanes = backend_lanes(backend) if lanes is None else lanes
        #: each lane takes one window per call (several lanes on a per-window backend) instead of a
        #: token-budget batch; other backends' lanes each pack batches
        self.single = self.lanes > 1 and bool(backend.per_window)
        self._cv = threading.Condition()
        self._pending: deque[tuple[_Job, int]] = deque()
        self._closed = False
        self._busy = 0.0  # lane-seconds spent in backend calls
        self._waiting = 0.0  # lane-seconds spent waiting for a window (finished waits)
        self._wait_since: dict[int, float] = {}  # lane (thread id) -> when its wait now under way began
        self._threads = [threading.Thread(target=self._loop, name=f"headseg-lane-{k}", daemon=True)
                         for k in range(self.lanes)]
        for t in self._threads:
            t.start()

    @property
    def pending_windows(self) -> int:
        """Windows waiting for a backend call."""
        return len(self._pending)

    @property
    def busy_seconds(self) -> float:
        """Seconds the lanes spent in backend calls so far, summed over the lanes (wall clock)."""
        return self._busy

    @property
    def waiting_seconds(self) -> float:
        """Seconds the lanes spent waiting for windows so far, summed over the lanes: model time left unused
        (with work in flight, a sign that the callers cannot feed the lanes)."""
        with self._cv:
            now = time.perf_counter()
            return self._waiting + sum(now - t0 for t0 in self._wait_since.values())

    def capture(self, windows: Sequence[Window], heads: Iterable[Sequence[int]] | None = None,
                attention: bool = False, norms: bool = False, ticket: Ticket | None = None,
                hidden: bool = False) -> HeadActivations:
        """The backend's ``capture`` for ``windows``, run in shared calls; blocks until done.

        ``ticket`` (default: :data:`current_ticket`) lets the caller be cancelled.
        Raises :class:`Cancelled` when it is, and the backend's error when its call fails.
        """
        if not windows:
            raise HeadsegError("capture() needs at least one window")
        ticket = ticket if ticket is not None else current_ticket.get()
        key = (None if heads is None else tuple(tuple(int(v) for v in h) for h in heads), bool(attention), bool(norms),
               bool(hidden))
        job = _Job(windows, key, ticket, rows=[None] * len(windows), remaining=len(windows))
        with self._cv:
            if self._closed:
                raise HeadsegError("the batcher is closed")
            if ticket is not None and ticket.cancelled:
                raise Cancelled("cancelled")
            self._pending.extend((job, i) for i in range(len(windows)))
            self._cv.notify(len(windows))  # a lane per window, in single mode
        while not job.done.wait(0.05):
            if ticket is not None and ticket.cancelled:
                self.drop(ticket)
        if job.error is not None:
            raise job.error
        return _assemble(job)

    def drop(self, ticket: Ticket) -> None:
        """Fail and remove the pending windows of ``ticket`` (cancel it first)."""
        with self._cv:
            gone = {id(j): j for j, _ in self._pending if j.ticket is ticket}
            if gone:
                self._pending = deque(p for p in self._pending if p[0].ticket is not ticket)
        for j in gone.values():
            j.fail(Cancelled("cancelled"))

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop taking windows, fail the pending ones, and join the thread."""
        with self._cv:
            self._closed = True
            left = {id(j): j for j, _ in self._pending}
            self._pending.clear()
            self._cv.notify_all()
        for j in left.values():
            j.fail(HeadsegError("the batcher was closed"))
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)

    def _take(self) -> list[tuple[_Job, int]] | None:
        """The next batch: pending windows of the first caller's kind, in order, within the token budget
        (one window in :attr:`single` mode); None once the batcher is closed.

        Windows whose caller was cancelled are failed and skipped here; if nothing else was pending the
        lane waits again (it must not mistake an all-cancelled queue for the end).
        """
        with self._cv:
            while True:
                if not self._pending and not self._closed:
                    lane = threading.get_ident()
                    self._wait_since[lane] = time.perf_counter()
                    while not self._pending and not self._closed:
                        self._cv.wait()
                    self._waiting += time.perf_counter() - self._wait_since.pop(lane)
                if self._closed:
                    return None
                batch = self._take_single() if self.single else self._take_budget()
                if batch:
                    return batch

    def _take_single(self) -> list[tuple[_Job, int]]:
        """The first pending window of a live caller (lock held)."""
        while self._pending:
            job, i = self._pending.popleft()
            if _live(job):
                return [(job, i)]
        return []

    def _take_budget(self) -> list[tuple[_Job, int]]:
        """Pending windows of the first caller's kind, in order, within the token budget (lock held)."""
        key = self._pending[0][0].key
        batch, keep, tokens = [], deque(), 0
        while self._pending:
            job, i = self._pending.popleft()
            n = len(job.windows[i])
            if job.key != key or (batch and tokens + n > self.max_batch_tokens):
                keep.append((job, i))
                if job.key == key:
                    break  # budget full: the rest waits, in order
                continue
            if _live(job):
                batch.append((job, i))
                tokens += n
        keep.extend(self._pending)
        self._pending = keep
        return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            # a job another lane failed since this one was taken needs no call
            batch = [(j, i) for j, i in batch if not j.done.is_set()]
            if not batch:
                continue
            heads, attention, norms, hidden = batch[0][0].key
            windows = [j.windows[i] for j, i in batch]
            t0 = time.perf_counter()
            try:
                # a backend that never reads the model's output need not know the keyword
                extra = {"hidden": True} if hidden else {}
                acts = self.backend.capture(windows, heads=heads, attention=attention, norms=norms, **extra)
            except BaseException as exc:  # the callers get the error; the thread serves on
                for j, _ in batch:
                    j.fail(exc)
                continue
            finally:
                spent = time.perf_counter() - t0
                with self._cv:
                    self._busy += spent
            if self.on_batch is not None:
                self.on_batch(sum(len(w) for w in windows), len(windows))
            for b, (job, i) in enumerate(batch):
                t = len(windows[b])
                job.heads = acts.heads
                job.rows[i] = (_row(acts.z, b, t, 1), _row(acts.attn, b, t, 2), _row(acts.fnorm, b, t, 1),
                               None if acts.hidden is None else acts.hidden[b, :t].copy())
                with self._cv:  # lanes finish windows of one job concurrently
                    job.remaining -= 1
                    last = job.remaining == 0
                if last:
                    job.done.set()


def _live(job: _Job) -> bool:
    """Whether ``job`` still wants its windows run: a cancelled caller's job is failed here, and a job
    already failed (by another lane's call) wants nothing more (called with the batcher's lock held)."""
    if job.ticket is not None and job.ticket.cancelled:
        job.fail(Cancelled("cancelled"))
        return False
    return not job.done.is_set()


def backend_lanes(backend: CaptureBackend) -> int:
    """How many calls of ``backend`` a :class:`Batcher` runs side by side: 1, unless the backend runs each
    window in its own single-threaded call (an int8 graph on CPU), then its number of such calls at once."""
    if not backend.per_window:
        return 1
    return max(1, int(backend.parallel_calls))


def _row(a: np.ndarray | None, b: int, t: int, token_axes: int) -> np.ndarray | None:
    """Row ``b`` of ``a [B, N, T, ...]`` cut to its ``t`` tokens on the first ``token_axes`` token axes;
    a copy, so the call's padded arrays are freed (not when the call had one row of exactly ``t``)."""
    if a is None:
        return None
    cut = a[b][(slice(None),) + (slice(0, t),) * token_axes]
    return cut if a.shape[0] == 1 and a.shape[2] == t else cut.copy()


def _assemble(job: _Job) -> HeadActivations:
    """The job's rows as one :class:`HeadActivations`, padded to its own longest window."""
    B, T = len(job.windows), max(len(w) for w in job.windows)
    z0 = job.rows[0][0]
    z = np.zeros((B, z0.shape[0], T, z0.shape[2]), dtype=z0.dtype)
    mask = np.zeros((B, T), dtype=bool)
    attn = np.zeros((B, z0.shape[0], T, T), dtype=np.float32) if job.rows[0][1] is not None else None
    fnorm = np.zeros((B, z0.shape[0], T), dtype=np.float32) if job.rows[0][2] is not None else None
    h0 = job.rows[0][3]
    hidden = np.zeros((B, T, h0.shape[1]), dtype=np.float32) if h0 is not None else None
    for b, (zb, ab, fb, hb) in enumerate(job.rows):
        t = zb.shape[1]
        z[b, :, :t] = zb
        mask[b, :t] = True
        if attn is not None:
            attn[b, :, :t, :t] = ab
        if fnorm is not None:
            fnorm[b, :, :t] = fb
        if hidden is not None:
            hidden[b, :t] = hb
    return HeadActivations(heads=tuple(job.heads), z=z, attention_mask=mask, attn=attn, fnorm=fnorm, hidden=hidden)


class BatchedBackend:
    """A :class:`~headseg.analysis.capture.CaptureBackend` whose calls go through a :class:`Batcher`.

    Give it to a pipeline (``pipeline.with_backend(BatchedBackend(batcher))``, or
    ``Segmenter(backend=...)``): its windows then share backend calls with every
    other caller of the same batcher.  Its traits are the inner backend's, except
    that the batcher, not its caller, runs calls side by side.
    """

    parallel_calls = 1

    def __init__(self, batcher: Batcher):
        self.batcher = batcher
        inner = batcher.backend
        self.name = inner.name
        self.device = inner.device
        self.precision = inner.precision
        self.per_window = inner.per_window
        self.max_batch_tokens = batcher.max_batch_tokens

    @property
    def info(self):
        """The inner backend's :class:`~headseg.analysis.model.ModelInfo`."""
        return self.batcher.backend.info

    def capture(self, windows: Sequence[Window], heads: Iterable[Sequence[int]] | None = None,
                attention: bool = False, norms: bool = False, hidden: bool = False) -> HeadActivations:
        """:meth:`Batcher.capture` with the caller's :data:`current_ticket`."""
        return self.batcher.capture(windows, heads=heads, attention=attention, norms=norms, hidden=hidden)
