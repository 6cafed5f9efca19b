"""The same service as a Ray Serve deployment: each replica holds one :class:`~.host.Host`.

``headseg serve --engine ray --replicas N`` runs it; from Python::

    from ray import serve
    from headseg.serve.host import ServeConfig
    from headseg.serve.ray_serve import build

    serve.run(build(ServeConfig(), replicas=2), route_prefix="/")

Ray Serve's proxy spreads requests over the replicas; within a replica the
windows of its requests share model calls (the batcher), and its queue answers
429 when full, as the single-process server does.  Ray Serve's own per-replica
limit (``max_ongoing_requests``) is set to the replica's ``max_queue`` so the
replica's admission, not Ray's, decides.  docs/scale.md has the multi-node layout.
"""

from __future__ import annotations

import logging
import math
import signal
import threading

from ray import serve

from headseg.analysis.errors import InputError, is_integer, shown
from headseg.analysis.ray import init_ray

from .app import create_app
from .host import Host, ServeConfig

#: seconds a stopping replica waits for its requests in flight
GRACEFUL_SHUTDOWN_S = 60


@serve.ingress()
class SegmentService:
    """One replica: the model loaded once in ``__init__``, the FastAPI app over it."""

    def __init__(self, config: ServeConfig):
        self.host = Host(config, owns_process=True).start()  # a replica is a process of its own

    def __serve_build_asgi_app__(self):
        return create_app(host=self.host)


def build(config: ServeConfig, replicas: int = 1, cpus_per_replica: float = 1.0):
    """The bound Ray Serve application: ``replicas`` copies of :class:`SegmentService`."""
    # checked here, not by Ray: its errors are tracebacks of its own types (a pydantic ValidationError...)
    if not is_integer(replicas) or replicas < 1:
        raise InputError(f"replicas must be an integer of at least 1 (got {shown(replicas)})")
    if isinstance(cpus_per_replica, bool) or not isinstance(cpus_per_replica, (int, float)) \
            or not math.isfinite(cpus_per_replica) or cpus_per_replica <= 0:
        raise InputError(f"cpus_per_replica must be a positive number (got {shown(cpus_per_replica)})")
    deployment = serve.deployment(SegmentService, name="headseg", num_replicas=replicas,
                                  max_ongoing_requests=config.max_queue,
                                  graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_S,
                                  ray_actor_options={"num_cpus": cpus_per_replica})
    return deployment.bind(config)


def start(config: ServeConfig, host: str = "127.0.0.1", port: int = 8000, replicas: int = 1,
          address: str | None = None, cpus_per_replica: float = 1.0):
    """Join or start Ray, start Serve's HTTP proxy on ``host:port`` and deploy (returns when ready)."""
    init_ray(address)
    serve.start(http_options={"host": host, "port": port})
    return serve.run(build(config, replicas, cpus_per_replica), name="headseg", route_prefix="/")


def run_ray(config: ServeConfig, host: str, port: int, replicas: int, address: str | None) -> int:
    """``headseg serve --engine ray``: deploy, then serve until SIGTERM or SIGINT, then shut Serve down."""
    start(config, host, port, replicas, address)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    logging.getLogger("headseg").info("serving on http://%s:%d with %d Ray Serve replica(s)", host, port, replicas)
    stop.wait()
    serve.shutdown()  # replicas drain their requests in flight (GRACEFUL_SHUTDOWN_S)
    return 0
