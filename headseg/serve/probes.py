"""The service's read-only endpoints: the viewer page, liveness, readiness and metrics.

``GET /`` the viewer page (its form made from the options' schema),
``GET /healthz`` (the process answers), ``GET /readyz`` (model loaded and graph
warm; 503 with ``Retry-After`` before, after a failed load, or when stopping),
``GET /metrics`` (Prometheus text; behind the API key when one is set).
"""

from __future__ import annotations

from typing import Callable

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from .host import Host
from .page import docs_html, page_html
from .refusals import busy
from .requests import option_schema


def probe_router(host: Host, check_key: Callable[[Request], None]) -> APIRouter:
    """The router of the read-only endpoints over ``host``; ``check_key`` guards ``/metrics``."""
    router = APIRouter()
    needs_key = bool(host.config.api_key)

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page_html(option_schema(), needs_key))

    @router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(docs_html())

    @router.get("/healthz")
    async def healthz() -> dict:
        """The process is up and answering."""
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz():
        """200 once the model is loaded and its graph warm; 503 before, after a failed load, or when stopping."""
        if host.ready:
            return {"status": "ready", **host.describe()}
        raise busy(host.error or ("shutting down" if host.closing else "loading the model"))

    @router.get("/metrics", dependencies=[Depends(check_key)])
    async def metrics() -> Response:
        """Prometheus text exposition."""
        from .metrics import CONTENT_TYPE

        host.metrics.pending_windows.set(host.runner.batcher.pending_windows if host.runner else 0)
        return Response(host.metrics.render(), media_type=CONTENT_TYPE)

    return router
