"""The segmentation service: :func:`create_app`, a FastAPI app over one :class:`~.host.Host`.

Endpoints: ``POST /v1/segment`` (one ``text`` → one JSON record; a list of
``documents`` → NDJSON, streamed in order), ``GET /healthz`` (the process
answers), ``GET /readyz`` (model loaded and graph warm), ``GET /metrics``
(Prometheus text), ``GET /`` (the viewer page), OpenAPI at ``/docs``.

Status codes: 401 missing or wrong API key, 404 no such endpoint, 405 wrong
method, 413 body over the limit, 422 malformed JSON, options or a query string,
429 queue full (``Retry-After``), 503 not ready yet or shutting down; every
refusal is one line, ``{"error": ...}`` (:mod:`.refusals`).  The endpoints are
routers of their own: :mod:`.probes` (page, health, readiness, metrics) and
:mod:`.segmenting` (``POST /v1/segment``).  Refusals log nothing
beyond the access line; an unexpected failure logs one line, never a
traceback.  A client that disconnects has its pending windows dropped.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from contextlib import asynccontextmanager

from fastapi import FastAPI

from headseg.analysis.errors import HeadsegError, InputError

from . import openapi, refusals
from .host import Host, ServeConfig
from .probes import probe_router
from .segmenting import segment_router

log = logging.getLogger("headseg.serve")


def create_app(config: ServeConfig | None = None, host: Host | None = None, *,
               engine: Host | None = None) -> FastAPI:
    """The service over ``host`` (started already, and left open at shutdown), or over one made from
    ``config``, started in the background at start-up (``/readyz`` answers 503 until it is warm) and
    closed at shutdown.  ``engine`` is the deprecated old name of ``host``."""
    if engine is not None:
        # docs/serve.md showed create_app(engine=Engine(config).start()) before the rename
        warnings.warn("create_app(engine=...) is deprecated: use create_app(host=...)", DeprecationWarning,
                      stacklevel=2)
        if host is not None:
            raise InputError("create_app takes host or its old name engine, not both")
        host = engine
    owned = host is None  # a host passed in outlives the app (the caller closes it)
    host = host or Host(config or ServeConfig())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loading = None
        if owned:
            loading = asyncio.get_running_loop().run_in_executor(None, _start_quietly, host)
        try:
            yield
        finally:
            if owned:
                host.closing = True
                if loading is not None:
                    await loading
                host.close()

    # FastAPI's /docs and /redoc load their scripts from a CDN (a blank page offline): /docs is the
    # service's own page instead (probes.py), and there is no /redoc
    app = FastAPI(title="headseg", summary="Topic segments with exact offsets, from attention heads",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.host = host
    check_key = refusals.key_check(host.config.api_key)
    app.include_router(probe_router(host, check_key))
    app.include_router(segment_router(host, check_key))
    refusals.install(app)
    openapi.install(app)  # the package's version, and the schemas of the body and the answer
    return app


def _start_quietly(host: Host) -> None:
    """:meth:`Host.start` for the background load: a failure is kept for ``/readyz`` and logged once."""
    try:
        host.start()
    except HeadsegError as exc:
        log.error("the model did not load: %s", str(exc).splitlines()[0])
    except Exception as exc:  # noqa: BLE001 - reported on /readyz, not as a traceback
        host.error = f"{type(exc).__name__}: {exc}"
        log.error("the model did not load: %s", host.error.splitlines()[0])
