"""The service's Prometheus metrics, in a registry of its own (the host's global one is left alone)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: ``Content-Type`` of :meth:`Metrics.render`
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """Requests by status, queue depth, batch sizes in tokens, latency, documents and characters served."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("headseg_requests", "HTTP requests to /v1/segment by status code", ["status"],
                                registry=r)
        self.in_flight = Gauge("headseg_queue_documents", "documents admitted and not yet answered", registry=r)
        self.pending_windows = Gauge("headseg_queue_windows", "model windows waiting for a batch", registry=r)
        self.batch_tokens = Histogram("headseg_batch_tokens", "real tokens per model call", registry=r,
                                      buckets=(64, 256, 1024, 2048, 4096, 8192, 16384, 32768))
        self.batch_windows = Histogram("headseg_batch_windows", "windows per model call", registry=r,
                                       buckets=(1, 4, 16, 64, 128, 256, 512, 1024))
        self.latency = Histogram("headseg_request_seconds", "time from admission to the last byte of the answer",
                                 registry=r, buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.documents = Counter("headseg_documents", "documents segmented", registry=r)
        self.characters = Counter("headseg_characters", "characters segmented", registry=r)
        self.model_lanes = Gauge("headseg_model_lanes", "threads running model calls side by side", registry=r)
        self.model_busy = Gauge("headseg_model_busy_seconds",
                                "seconds the model lanes spent in model calls, summed over the lanes", registry=r)
        self.model_waiting = Gauge("headseg_model_waiting_seconds",
                                   "seconds the model lanes waited for windows, summed over the lanes", registry=r)

    def watch(self, batcher) -> None:
        """Read the model lanes' counters from ``batcher`` (a :class:`~headseg.export.batcher.Batcher`)
        at each scrape."""
        self.model_lanes.set(batcher.lanes)
        self.model_busy.set_function(lambda: batcher.busy_seconds)
        self.model_waiting.set_function(lambda: batcher.waiting_seconds)

    def on_batch(self, tokens: int, windows: int) -> None:
        """The batcher's hook: one model call of ``tokens`` real tokens in ``windows`` windows."""
        self.batch_tokens.observe(tokens)
        self.batch_windows.observe(windows)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
