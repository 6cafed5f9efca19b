"""One host per process: the model loaded once, its batcher, and the admission count of the queue."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace

from headseg.analysis.errors import HeadsegError
from headseg.analysis.memory import release_memory
from headseg.export.runner import DEFAULT_WORKERS, AsyncRunner
from headseg.segmenter.options import SegmentOptions

from .config import ServeConfig  # the host runs one; callers also import it from here
from .metrics import Metrics

#: a short text segmented at start-up, so the first request finds the graph warm
_WARM_TEXT = ("The model is loaded once. Its graph runs here for the first time.\n\n"
              "Rain fell over the harbour all night. The boats stayed in.")


def default_workers(threads: int | None) -> int:
    """Documents segmented side by side when nobody says: two per model thread (``threads``, or one per
    core when None), at most :data:`~headseg.export.runner.DEFAULT_WORKERS`.

    Two keep the model busy (one document's Python steps, tokenizing, pooling and the topic search, run
    while another's windows are in the model); more only contend for the GIL and the cores.  Counting
    the model's threads, not the machine's cores, matters where a process has fewer cores than the
    machine: two one-thread Ray replicas on 2 cores served 64 846 chars/s with the machine's four
    workers each and 67 957 with two, side by side (docs/performance.md).
    """
    return min(DEFAULT_WORKERS, 2 * (threads or os.cpu_count() or 1))


class Host:
    """The segmenter of one process and the queue in front of it.

    :meth:`start` loads the model and warms the graph (blocking; seconds);
    :meth:`admit`/:meth:`release` count the documents in flight against
    ``max_queue`` (called from the event loop only).
    """

    def __init__(self, config: ServeConfig, metrics: Metrics | None = None, owns_process: bool = False):
        self.config = config
        #: the command line and a Ray replica own their process: they may tune its allocator
        self.owns_process = owns_process
        self.metrics = metrics or Metrics()
        self.runner: AsyncRunner | None = None
        self.in_flight = 0
        self.closing = False
        self.error: str | None = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        """Model loaded and graph warm, and not shutting down."""
        return self.runner is not None and not self.closing

    def start(self) -> "Host":
        """Load the model, start the batcher, segment a warm-up text (idempotent)."""
        with self._lock:
            if self.runner is not None:
                return self
            from headseg.api import Segmenter

            c = self.config
            if self.owns_process:
                _limit_arenas()
            try:
                seg = Segmenter(config=replace(c.segmenter, quiet=True))
                workers = default_workers(c.segmenter.threads) if c.doc_threads is None else c.doc_threads
                runner = AsyncRunner(seg, c.max_batch_tokens, workers, on_batch=self.metrics.on_batch)
                self.metrics.watch(runner.batcher)
                runner.segment_many_sync([_WARM_TEXT], SegmentOptions())
            except HeadsegError as exc:
                self.error = str(exc)
                raise
            self.runner = runner
            return self

    def admit(self, documents: int) -> bool:
        """Take ``documents`` places in the queue; False when they do not fit (answer 429)."""
        if self.in_flight + documents > self.config.max_queue:
            return False
        self.in_flight += documents
        self.metrics.in_flight.set(self.in_flight)
        return True

    def release(self, documents: int) -> None:
        """Give back places taken by :meth:`admit`."""
        self.in_flight -= documents
        self.metrics.in_flight.set(self.in_flight)
        if self.in_flight == 0 and self.owns_process:
            release_memory()  # idle: the requests' freed arrays go back to the system

    def close(self) -> None:
        """Stop the batcher and the workers."""
        self.closing = True
        if self.runner is not None:
            self.runner.close()

    def describe(self) -> dict:
        """What serves: model, backend, device, precision, profile (for ``/readyz``)."""
        if self.runner is None:
            return {}
        pipeline, backend = self.runner.pipeline, self.runner.batcher.backend
        return {"model": backend.info.name, "backend": backend.name, "device": backend.device,
                "precision": backend.precision, "profile": pipeline.profile.hash(), "pid": os.getpid()}


def _limit_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas (one per worker thread by default) for a process the server owns.

    Each worker thread otherwise gets an arena of its own, and each keeps the
    peak of the documents it segmented: measured with 4 workers, RSS under overload
    fell from 2.3× to 1.7× of the idle size (docs/performance.md).  Elsewhere than glibc, nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass
