"""One engine per process: the model loaded once, its batcher, and the admission count of the queue."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from headseg.analysis.capture import DEFAULT_MAX_BATCH_TOKENS
from headseg.analysis.errors import HeadsegError
from headseg.analysis.memory import release_memory
from headseg.analysis.settings import flag
from headseg.config import SegmenterConfig, config_names
from headseg.export.runner import DEFAULT_WORKERS, AsyncRunner
from headseg.segmenter.options import SegmentOptions

from .metrics import Metrics

#: Text Embeddings Inference's ``--max-concurrent-requests``: documents admitted at once
DEFAULT_MAX_QUEUE = 512
#: largest request body, in bytes
DEFAULT_MAX_REQUEST_BYTES = 2 * 1024 * 1024
#: the service's segmenter: windows per capture call (the batcher packs the calls of all requests)
SERVE_BATCH_SIZE = 16

#: a short text segmented at start-up, so the first request finds the graph warm
_WARM_TEXT = ("The model is loaded once. Its graph runs here for the first time.\n\n"
              "Rain fell over the harbour all night. The boats stayed in.")


@dataclass(frozen=True)
class ServeConfig:
    """What ``headseg serve`` runs and its limits (the command-line flags, without host and port).

    ``segmenter``: the :class:`~headseg.config.SegmenterConfig` of the one
    segmenter (the operator's choice; a request never names a path).  The
    service's own limits carry their flags as the segmenter's settings do:
    ``max_batch_tokens``: token budget of one model call; ``max_queue``:
    documents admitted at once (more: 429); ``max_request_bytes``: largest body
    (more: 413); ``workers``: documents segmented side by side (threads; None:
    :func:`default_workers`); ``api_key``: required as ``Authorization: Bearer
    KEY`` or ``X-API-Key`` when set (the command reads it from ``--api-key`` or
    the environment, never the library).  :meth:`of` takes the segmenter's
    settings as keywords too.
    """

    segmenter: SegmenterConfig = field(default_factory=lambda: SegmenterConfig(batch_size=SERVE_BATCH_SIZE))
    max_batch_tokens: int = field(default=DEFAULT_MAX_BATCH_TOKENS, metadata=flag(
        "--max-batch-tokens", f"token budget of one model call, shared by concurrent requests "
                              f"(default {DEFAULT_MAX_BATCH_TOKENS})", type=int))
    max_queue: int = field(default=DEFAULT_MAX_QUEUE, metadata=flag(
        "--max-queue", f"documents admitted at once; more are answered 429 with Retry-After "
                       f"(default {DEFAULT_MAX_QUEUE})", type=int))
    max_request_bytes: int = field(default=DEFAULT_MAX_REQUEST_BYTES, metadata=flag(
        "--max-request-bytes", "largest request body; larger ones are answered 413 (default 2 MiB)", type=int))
    workers: int | None = field(default=None, metadata=flag(
        "--workers", f"documents segmented side by side in this process (threads; default two per model "
                     f"thread, at most {DEFAULT_WORKERS}): each holds its document's working memory", type=int))
    api_key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.segmenter, SegmenterConfig):
            raise HeadsegError(f"segmenter must be a SegmenterConfig (got {type(self.segmenter).__name__})")
        for name in ("max_batch_tokens", "max_queue", "max_request_bytes", "workers"):
            v = getattr(self, name)
            if name == "workers" and v is None:
                continue  # default_workers(threads)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise HeadsegError(f"{name.replace('_', '-')} must be a positive integer (got {v!r})")
        if self.api_key is not None and not self.api_key:
            raise HeadsegError("api-key must not be empty")

    @classmethod
    def of(cls, config: "ServeConfig | None" = None, **settings: Any) -> "ServeConfig":
        """``config`` (default: the defaults) with ``settings`` applied: the service's own fields and any
        :class:`SegmenterConfig` field (``model=...``, ``threads=...``), e.g. ``ServeConfig.of(threads=1)``."""
        config = config or cls()
        mine = {k: v for k, v in settings.items() if k not in config_names()}
        theirs = {k: v for k, v in settings.items() if k in config_names()}
        return replace(config, segmenter=SegmenterConfig.of(config.segmenter, **theirs), **mine)


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


class Engine:
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

    def start(self) -> "Engine":
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
                workers = default_workers(c.segmenter.threads) if c.workers is None else c.workers
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
