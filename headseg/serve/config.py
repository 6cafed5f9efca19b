"""What ``headseg serve`` runs and its limits: :class:`ServeConfig`, declared once with its flags.

Importable without the ``serve`` extra (the command line builds its flags from it
before anything is served).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any

from headseg.analysis.capture import DEFAULT_MAX_BATCH_TOKENS
from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.settings import flag
from headseg.config import SegmenterConfig, config_names
from headseg.export.runner import DEFAULT_WORKERS

#: Text Embeddings Inference's ``--max-concurrent-requests``: documents admitted at once
DEFAULT_MAX_QUEUE = 512
#: largest request body, in bytes
DEFAULT_MAX_REQUEST_BYTES = 2 * 1024 * 1024
#: the most model tokens one request's texts may hold: the model's work is about linear in tokens (2 MiB
#: of prose is about 390,000; 2 MiB of "." is 2.1 million, 12× prose's work per byte), so a body under
#: the byte limit cannot cost more than this much prose does (docs/performance.md)
DEFAULT_MAX_REQUEST_TOKENS = 400_000
#: the service's segmenter: windows per capture call (the batcher packs the calls of all requests)
SERVE_BATCH_SIZE = 16
#: the old name of ``doc_threads`` (``--workers``, which ``headseg segment`` and ``study`` keep for Ray's
#: actors and shards), accepted with a deprecation notice for one release
OLD_DOC_THREADS = "workers"


@dataclass(frozen=True)
class ServeConfig:
    """What ``headseg serve`` runs and its limits (the command-line flags, without host and port).

    ``segmenter``: the :class:`~headseg.config.SegmenterConfig` of the one
    segmenter (the operator's choice; a request never names a path).  The
    service's own limits carry their flags as the segmenter's settings do:
    ``max_batch_tokens``: token budget of one model call; ``max_queue``:
    documents admitted at once (more: 429); ``max_request_bytes``: largest body
    (more: 413); ``max_request_tokens``: most model tokens in one request's texts, the bound
    on its work (more: 413); ``doc_threads``: documents segmented side by side, one per thread
    (None: :func:`~.host.default_workers`; its old name ``workers`` is deprecated); ``api_key``: required as ``Authorization: Bearer
    KEY`` or ``X-API-Key`` when set (the command reads it from ``--api-key`` or
    the environment, never the library).  :meth:`of` takes the segmenter's
    settings as keywords too (and ``workers``, deprecated, for ``doc_threads``).
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
    max_request_tokens: int = field(default=DEFAULT_MAX_REQUEST_TOKENS, metadata=flag(
        "--max-request-tokens", "most model tokens one request's texts may hold, the bound on one request's "
                                f"work; more are answered 413 (default {DEFAULT_MAX_REQUEST_TOKENS:,})", type=int))
    doc_threads: int | None = field(default=None, metadata=flag(
        "--doc-threads", f"documents segmented side by side in this process, one per thread (default two per "
                         f"model thread, at most {DEFAULT_WORKERS}): each holds its document's working memory",
        type=int))
    api_key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.segmenter, SegmenterConfig):
            raise HeadsegError(f"segmenter must be a SegmenterConfig (got {type(self.segmenter).__name__})")
        for name in ("max_batch_tokens", "max_queue", "max_request_bytes", "max_request_tokens", "doc_threads"):
            v = getattr(self, name)
            if name == "doc_threads" and v is None:
                continue  # default_workers(threads)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise HeadsegError(f"{name.replace('_', '-')} must be a positive integer (got {shown(v)})")
        if self.api_key is not None and not self.api_key:
            raise HeadsegError("api-key must not be empty")

    @classmethod
    def of(cls, config: "ServeConfig | None" = None, **settings: Any) -> "ServeConfig":
        """``config`` (default: the defaults) with ``settings`` applied: the service's own fields and any
        :class:`SegmenterConfig` field (``model=...``, ``threads=...``), e.g. ``ServeConfig.of(threads=1)``."""
        config = config or cls()
        if OLD_DOC_THREADS in settings:
            warnings.warn("ServeConfig's workers is now doc_threads (the old name goes in the next release)",
                          DeprecationWarning, stacklevel=2)
            if "doc_threads" in settings:
                raise HeadsegError("give doc_threads alone (workers is its old name)")
            settings["doc_threads"] = settings.pop(OLD_DOC_THREADS)
        mine = {k: v for k, v in settings.items() if k not in config_names()}
        theirs = {k: v for k, v in settings.items() if k in config_names()}
        return replace(config, segmenter=SegmenterConfig.of(config.segmenter, **theirs), **mine)
