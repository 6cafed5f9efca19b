"""Token-budget dynamic batching: one engine serving the capture calls of many concurrent callers.

A :class:`Batcher` owns a capture backend and a thread.  Callers (one thread
per document being segmented) hand it their windows through
:class:`BatchedBackend`, a :class:`~headseg.analysis.capture.CaptureBackend`
that a :class:`~headseg.segmenter.api.Segmenter` takes like any other; the
thread packs the pending windows of all callers, first come first served, into
one backend call of at most ``max_batch_tokens`` tokens (the design of Text
Embeddings Inference's ``--max-batch-tokens``), then hands each caller its
rows.  The segmentation logic stays in ``Segmenter``; only who runs the model
changes.

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
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from headseg.analysis.capture import HeadActivations
from headseg.analysis.errors import HeadsegError
from headseg.analysis.text import Window

#: Text Embeddings Inference's default ``--max-batch-tokens``
DEFAULT_MAX_BATCH_TOKENS = 16384


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
    """A thread that owns ``backend`` and runs the windows of all callers in token-budget batches.

    ``max_batch_tokens``: at most this many real tokens per backend call (one
    window longer than that still runs, alone).  ``on_batch(tokens, windows)``
    is called after each backend call (metrics).  Thread-safe; :meth:`close`
    stops the thread after failing what is still pending.
    """

    def __init__(self, backend, max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
                 on_batch: Callable[[int, int], None] | None = None):
        if isinstance(max_batch_tokens, bool) or not isinstance(max_batch_tokens, int) or max_batch_tokens < 1:
            raise HeadsegError(f"max_batch_tokens must be a positive integer (got {max_batch_tokens!r})")
        self.backend = backend
        self.max_batch_tokens = max_batch_tokens
        self.on_batch = on_batch
        self._cv = threading.Condition()
        self._pending: deque[tuple[_Job, int]] = deque()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="headseg-batcher", daemon=True)
        self._thread.start()

    @property
    def pending_windows(self) -> int:
        """Windows waiting for a backend call."""
        return len(self._pending)

    def capture(self, windows: Sequence[Window], heads: Iterable[Sequence[int]] | None = None,
                attention: bool = False, norms: bool = False, ticket: Ticket | None = None) -> HeadActivations:
        """The backend's ``capture`` for ``windows``, run in shared calls; blocks until done.

        ``ticket`` (default: :data:`current_ticket`) lets the caller be cancelled.
        Raises :class:`Cancelled` when it is, and the backend's error when its call fails.
        """
        if not windows:
            raise HeadsegError("capture() needs at least one window")
        ticket = ticket if ticket is not None else current_ticket.get()
        key = (None if heads is None else tuple(tuple(int(v) for v in h) for h in heads), bool(attention), bool(norms))
        job = _Job(windows, key, ticket, rows=[None] * len(windows), remaining=len(windows))
        with self._cv:
            if self._closed:
                raise HeadsegError("the batcher is closed")
            if ticket is not None and ticket.cancelled:
                raise Cancelled("cancelled")
            self._pending.extend((job, i) for i in range(len(windows)))
            self._cv.notify()
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
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _take(self) -> list[tuple[_Job, int]]:
        """The next batch: pending windows of the first caller's kind, in order, within the token budget."""
        with self._cv:
            while not self._pending and not self._closed:
                self._cv.wait()
            if self._closed:
                return []
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
                if job.ticket is not None and job.ticket.cancelled:
                    job.fail(Cancelled("cancelled"))
                    continue
                batch.append((job, i))
                tokens += n
            keep.extend(self._pending)
            self._pending = keep
            return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return
            batch = [(j, i) for j, i in batch if not j.done.is_set()]
            if not batch:
                continue
            heads, attention, norms = batch[0][0].key
            windows = [j.windows[i] for j, i in batch]
            try:
                acts = self.backend.capture(windows, heads=heads, attention=attention, norms=norms)
            except BaseException as exc:  # the callers get the error; the thread serves on
                for j, _ in batch:
                    j.fail(exc)
                continue
            if self.on_batch is not None:
                self.on_batch(sum(len(w) for w in windows), len(windows))
            for b, (job, i) in enumerate(batch):
                t = len(windows[b])
                job.heads = acts.heads
                job.rows[i] = (acts.z[b, :, :t].copy(), None if acts.attn is None else acts.attn[b, :, :t, :t].copy(),
                               None if acts.fnorm is None else acts.fnorm[b, :, :t].copy())
                job.remaining -= 1
                if job.remaining == 0:
                    job.done.set()


def _assemble(job: _Job) -> HeadActivations:
    """The job's rows as one :class:`HeadActivations`, padded to its own longest window."""
    B, T = len(job.windows), max(len(w) for w in job.windows)
    z0 = job.rows[0][0]
    z = np.zeros((B, z0.shape[0], T, z0.shape[2]), dtype=z0.dtype)
    mask = np.zeros((B, T), dtype=bool)
    attn = np.zeros((B, z0.shape[0], T, T), dtype=np.float32) if job.rows[0][1] is not None else None
    fnorm = np.zeros((B, z0.shape[0], T), dtype=np.float32) if job.rows[0][2] is not None else None
    for b, (zb, ab, fb) in enumerate(job.rows):
        t = zb.shape[1]
        z[b, :, :t] = zb
        mask[b, :t] = True
        if attn is not None:
            attn[b, :, :t, :t] = ab
        if fnorm is not None:
            fnorm[b, :, :t] = fb
    return HeadActivations(heads=tuple(job.heads), z=z, attention_mask=mask, attn=attn, fnorm=fnorm)


class BatchedBackend:
    """A :class:`~headseg.analysis.capture.CaptureBackend` whose calls go through a :class:`Batcher`.

    Give it to a ``Segmenter`` (``copy.copy(segmenter)`` with ``backend``
    replaced, or ``Segmenter(backend=...)``): its windows then share backend
    calls with every other caller of the same batcher.
    """

    def __init__(self, batcher: Batcher):
        self.batcher = batcher
        inner = batcher.backend
        self.name = inner.name
        self.device = getattr(inner, "device", "cpu")

    @property
    def info(self):
        """The inner backend's :class:`~headseg.analysis.model.ModelInfo`."""
        return self.batcher.backend.info

    @property
    def precision(self) -> str | None:
        """The inner backend's precision (None for torch)."""
        return getattr(self.batcher.backend, "precision", None)

    def capture(self, windows: Sequence[Window], heads: Iterable[Sequence[int]] | None = None,
                attention: bool = False, norms: bool = False) -> HeadActivations:
        """:meth:`Batcher.capture` with the caller's :data:`current_ticket`."""
        return self.batcher.capture(windows, heads=heads, attention=attention, norms=norms)
