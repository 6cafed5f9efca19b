"""Token-budget dynamic batching: one engine serving the model calls of many concurrent callers.

A :class:`Batcher` owns a capture backend and its *lanes*: threads that call
the backend.  Callers (one thread per document being segmented) hand it their
windows through :class:`BatchedBackend`, a
:class:`~headseg.analysis.capture.CaptureBackend` that a segmentation pipeline
takes like any other; the lanes take the pending work of all callers from
one shared queue, the callers in turn (:class:`~.fairqueue.FairQueue`: a
request with thousands of windows does not hold back one with ten), and hand
each caller its rows.
What is queued is an *item*: one unit's windows for ``unit_vectors`` (a unit
is pooled within one backend call, and its caller gets back its pooled row
``[D]``), one window for ``capture`` (its per-token rows).  The
segmentation logic stays in the pipeline; only who runs the model changes.
Everything the batcher needs of the backend is a trait of the capture protocol
(``per_window``, ``parallel_calls``, ``max_batch_tokens``).

How a lane takes windows depends on the backend (:func:`backend_lanes`):

* a backend that batches (fp32/fp16 ONNX, torch, CUDA): one lane packs the
  pending items into one call of at most ``max_batch_tokens`` tokens (the
  design of Text Embeddings Inference's ``--max-batch-tokens``);
* a backend that runs each window in its own single-threaded call (an int8
  graph on CPU: ``OnnxBackend.per_window``): one lane per core, each taking the
  next item as soon as its last one is done.  Packing such windows into one
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
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from headseg.analysis.capture import DEFAULT_MAX_BATCH_TOKENS, CaptureBackend, HeadActivations
from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.pooling import check_owners, unit_groups
from headseg.analysis.text import Window

from .fairqueue import FairQueue

__all__ = ["DEFAULT_MAX_BATCH_TOKENS", "BatchedBackend", "Batcher", "Cancelled", "Ticket", "backend_lanes",
           "current_slot", "current_ticket"]


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
#: the slot the code running now holds among the callers doing CPU work (the runner's ``workers``): given
#: up while its windows wait for the model, so that a caller waiting only for the model holds no slot that
#: a newly arrived caller needs to start
current_slot: contextvars.ContextVar[threading.Semaphore | None] = contextvars.ContextVar("headseg_slot", default=None)


@dataclass(eq=False)
class _Job:
    """One ``capture`` or ``unit_vectors`` call waiting for its items' rows.

    ``key`` says what is asked (calls of one key share backend calls); ``groups[k]``: the window indices
    of item ``k`` (one unit's, or one window), whose row is ``rows[k]``.
    """

    windows: Sequence[Window]
    key: tuple
    ticket: Ticket | None
    groups: list
    rows: list = field(default_factory=list)
    remaining: int = 0
    error: BaseException | None = None
    heads: tuple = ()
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.rows = [None] * len(self.groups)
        self.remaining = len(self.groups)

    def tokens(self, k: int) -> int:
        """The real tokens of item ``k``."""
        return sum(len(self.windows[i]) for i in self.groups[k])

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
            raise HeadsegError(f"max_batch_tokens must be a positive integer (got {shown(max_batch_tokens)})")
        if lanes is not None and (isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1):
            raise HeadsegError(f"lanes must be a positive integer (got {shown(lanes)})")
        self.backend = backend
        self.max_batch_tokens = max_batch_tokens
        self.on_batch = on_batch
        #: threads calling the backend side by side (see :func:`backend_lanes`)
        self.lanes = backend_lanes(backend) if lanes is None else lanes
        #: each lane takes one window per call (several lanes on a per-window backend) instead of a
        #: token-budget batch; other backends' lanes each pack batches
        self.single = self.lanes > 1 and bool(backend.per_window)
        self._cv = threading.Condition()
        self._pending = FairQueue(_caller, lambda job, k: len(job.groups[k]), lambda job, k: job.tokens(k), _live)
        self._closed = False
        self._busy = 0.0  # lane-seconds spent in backend calls
        self._floats = 0  # floats handed to callers (floats_carried)
        self._waiting = 0.0  # lane-seconds spent waiting for a window (finished waits)
        self._wait_since: dict[int, float] = {}  # lane (thread id) -> when its wait now under way began
        self._threads = [threading.Thread(target=self._loop, name=f"headseg-lane-{k}", daemon=True)
                         for k in range(self.lanes)]
        for t in self._threads:
            t.start()

    @property
    def pending_windows(self) -> int:
        """Windows waiting for a backend call."""
        with self._cv:
            return self._pending.windows

    @property
    def busy_seconds(self) -> float:
        """Seconds the lanes spent in backend calls so far, summed over the lanes (wall clock)."""
        return self._busy

    @property
    def floats_carried(self) -> int:
        """Floats the lanes have handed to callers so far: per-token rows for ``capture``, one pooled row
        ``[D]`` per unit for ``unit_vectors`` (what the batcher carries between the model and its callers)."""
        return self._floats

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
        key = ("capture", None if heads is None else _heads_key(heads), bool(attention), bool(norms), bool(hidden))
        job = self._run(_Job(windows, key, ticket, groups=[(i,) for i in range(len(windows))]))
        return _assemble(job)

    def unit_vectors(self, windows: Sequence[Window], owners: np.ndarray, heads: Sequence[Sequence[int]],
                     weights: np.ndarray, output_weight: float = 0.0, ticket: Ticket | None = None) -> np.ndarray:
        """The backend's ``unit_vectors`` ``[U, D]``, its units run in shared calls (each unit's windows in
        one); blocks until done.  ``ticket``, errors: as in :meth:`capture`."""
        owners, count = check_owners(windows, owners)
        weights = np.asarray(weights, dtype=np.float64)
        key = ("units", _heads_key(heads), weights.tobytes(), float(output_weight))
        units, groups = unit_groups(owners)
        job = self._run(_Job(windows, key, ticket, groups=groups))
        out = np.zeros((count, job.rows[0].shape[0]), dtype=job.rows[0].dtype)
        out[units] = job.rows
        return out

    def _run(self, job: _Job) -> _Job:
        """Queue ``job``'s items and wait until they ran (or raise its error, or :class:`Cancelled`)."""
        ticket = job.ticket = job.ticket if job.ticket is not None else current_ticket.get()
        with self._cv:
            if self._closed:
                raise HeadsegError("the batcher is closed")
            if ticket is not None and ticket.cancelled:
                raise Cancelled("cancelled")
            self._pending.extend(job, range(len(job.groups)))
            self._cv.notify(len(job.groups))  # a lane per item, in single mode
        slot = current_slot.get()
        if slot is not None:
            slot.release()
        try:
            while not job.done.wait(0.05):
                if ticket is not None and ticket.cancelled:
                    self.drop(ticket)
        finally:
            if slot is not None:
                slot.acquire()
        if job.error is not None:
            raise job.error
        return job

    def drop(self, ticket: Ticket) -> None:
        """Fail and remove the pending windows of ``ticket`` (cancel it first)."""
        with self._cv:
            gone = {id(j): j for j, _ in self._pending.remove(ticket)}
        for j in gone.values():
            j.fail(Cancelled("cancelled"))

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop taking windows, fail the pending ones, and join the thread."""
        with self._cv:
            self._closed = True
            left = {id(j): j for j, _ in self._pending.clear()}
            self._cv.notify_all()
        for j in left.values():
            j.fail(HeadsegError("the batcher was closed"))
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)

    def _take(self) -> list[tuple[_Job, int]] | None:
        """The next batch: pending items of the next caller's kind, callers in turn, within the token budget
        (one item in :attr:`single` mode; :class:`~.fairqueue.FairQueue`); None once the batcher is closed.

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
                batch = self._pending.take_one() if self.single else \
                    self._pending.take_budget(self.max_batch_tokens, lambda job: job.key)
                if batch:
                    return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            # a job another lane failed since this one was taken needs no call
            batch = [(j, k) for j, k in batch if not j.done.is_set()]
            if not batch:
                continue
            key = batch[0][0].key
            windows = [j.windows[i] for j, k in batch for i in j.groups[k]]
            t0 = time.perf_counter()
            try:
                rows = self._call(key, batch, windows)
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
            carried = sum(a.size for row in rows for a in row if a is not None) if key[0] == "capture" else \
                sum(row.size for row in rows)
            for (job, k), row in zip(batch, rows):
                job.rows[k] = row
                with self._cv:  # lanes finish items of one job concurrently
                    job.remaining -= 1
                    last = job.remaining == 0
                if last:
                    job.done.set()
            with self._cv:
                self._floats += carried

    def _call(self, key: tuple, batch: list[tuple[_Job, int]], windows: list[Window]) -> list:
        """One backend call for ``batch`` (its ``windows``, item by item): each item's row."""
        if key[0] == "units":
            _, heads, weights, output_weight = key
            owners = np.repeat(np.arange(len(batch)), [len(j.groups[k]) for j, k in batch])
            vectors = self.backend.unit_vectors(windows, owners, heads, np.frombuffer(weights),
                                                output_weight=output_weight)
            return list(vectors)
        _, heads, attention, norms, hidden = key
        # a backend that never reads the model's output need not know the keyword
        extra = {"hidden": True} if hidden else {}
        acts = self.backend.capture(windows, heads=heads, attention=attention, norms=norms, **extra)
        for job, _ in batch:
            job.heads = acts.heads
        return [(_row(acts.z, b, len(w), 1), _row(acts.attn, b, len(w), 2), _row(acts.fnorm, b, len(w), 1),
                 None if acts.hidden is None else acts.hidden[b, :len(w)].copy()) for b, w in enumerate(windows)]


def _heads_key(heads: Iterable[Sequence[int]]) -> tuple:
    """``heads`` as a hashable key (and the argument the backend gets)."""
    return tuple(tuple(int(v) for v in h) for h in heads)


def _caller(job: _Job) -> object:
    """Whose turn ``job``'s items wait for: its ticket's (a request's), else the job's own."""
    return job if job.ticket is None else job.ticket


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

    def unit_vectors(self, windows: Sequence[Window], owners: np.ndarray, heads: Sequence[Sequence[int]],
                     weights: np.ndarray, output_weight: float = 0.0) -> np.ndarray:
        """:meth:`Batcher.unit_vectors` (pooled rows ``[U, D]``) with the caller's :data:`current_ticket`."""
        return self.batcher.unit_vectors(windows, owners, heads, weights, output_weight=output_weight)
