"""The segmentation service: :func:`create_app`, a FastAPI app over one :class:`~.engine.Engine`.

Endpoints: ``POST /v1/segment`` (one ``text`` → one JSON record; a list of
``documents`` → NDJSON, streamed in order), ``GET /healthz`` (the process
answers), ``GET /readyz`` (model loaded and graph warm), ``GET /metrics``
(Prometheus text), ``GET /`` (the viewer page), OpenAPI at ``/docs``.

Status codes: 401 missing or wrong API key, 413 body over the limit, 422
malformed JSON or options (one-line ``{"error": ...}``), 429 queue full
(``Retry-After``), 503 not ready yet or shutting down.  Refusals log nothing
beyond the access line; an unexpected failure logs one line, never a
traceback.  A client that disconnects has its pending windows dropped.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from headseg.analysis.errors import HeadsegError
from headseg.export.batcher import Cancelled

from .engine import Engine, ServeConfig
from .page import page_html
from .requests import HTTP_OPTIONS, RequestError, SegmentRequest, parse_request, read_body

log = logging.getLogger("headseg.serve")

#: seconds a client is told to wait after a 429 or 503
RETRY_AFTER_S = 1
#: how often a waiting request checks that its client is still there
_POLL_S = 0.1

_SEGMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "one document: the answer is one JSON record"},
        "documents": {"type": "array", "description": "several documents: the answer is NDJSON, in order",
                      "items": {"type": "object", "properties": {"id": {"type": "string"},
                                                                   "text": {"type": "string"}},
                                "required": ["text"]}},
        "level": {"type": "string", "enum": ["topic", "unit"]},
        "segments": {"type": "integer", "minimum": 1},
        "min_chars": {"type": "integer", "minimum": 1},
        "max_chars": {"type": "integer", "minimum": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "penalty": {"type": "number", "minimum": 0},
    },
}


def error(status: int, reason: str, headers: dict | None = None) -> JSONResponse:
    """A refusal: ``{"error": reason}`` (one line) with ``status``."""
    return JSONResponse({"error": reason.splitlines()[0] if reason else ""}, status_code=status, headers=headers)


def create_app(config: ServeConfig | None = None, engine: Engine | None = None) -> FastAPI:
    """The service over ``engine`` (started already, and left open at shutdown), or over one made from
    ``config``, started in the background at start-up (``/readyz`` answers 503 until it is warm) and
    closed at shutdown."""
    owned = engine is None  # an engine passed in outlives the app (the caller closes it)
    engine = engine or Engine(config or ServeConfig())
    config = engine.config
    key = config.api_key.encode("utf-8") if config.api_key else None

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loading = None
        if owned:
            loading = asyncio.get_running_loop().run_in_executor(None, _start_quietly, engine)
        try:
            yield
        finally:
            if owned:
                engine.closing = True
                if loading is not None:
                    await loading
                engine.close()

    app = FastAPI(title="headseg", summary="Topic segments with exact offsets, from attention heads",
                  lifespan=lifespan)
    app.state.engine = engine

    def authorised(request: Request) -> bool:
        if key is None:
            return True
        given = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if given is None and auth[:7].lower() == "bearer ":
            given = auth[7:]
        # compare_digest: the time taken says nothing about how much of the key matched
        return hmac.compare_digest((given or "").encode("utf-8", "surrogateescape"), key)

    def unauthorised() -> JSONResponse:
        return error(401, "missing or wrong API key (Authorization: Bearer KEY or X-API-Key)",
                     {"WWW-Authenticate": "Bearer"})

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page_html(HTTP_OPTIONS, key is not None))

    @app.get("/healthz")
    async def healthz() -> dict:
        """The process is up and answering."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz():
        """200 once the model is loaded and its graph warm; 503 before, after a failed load, or when stopping."""
        if engine.ready:
            return {"status": "ready", **engine.describe()}
        reason = engine.error or ("shutting down" if engine.closing else "loading the model")
        return error(503, reason, {"Retry-After": str(RETRY_AFTER_S)})

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        """Prometheus text exposition."""
        if not authorised(request):
            return unauthorised()
        from .metrics import CONTENT_TYPE

        engine.metrics.pending_windows.set(engine.runner.batcher.pending_windows if engine.runner else 0)
        return Response(engine.metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/v1/segment", openapi_extra={"requestBody": {
        "required": True, "content": {"application/json": {"schema": _SEGMENT_SCHEMA}}}},
        responses={200: {"description": "one record (`text`) or NDJSON records (`documents`)"},
                   401: {"description": "API key"}, 413: {"description": "body too large"},
                   422: {"description": "malformed"}, 429: {"description": "queue full"},
                   503: {"description": "not ready"}})
    async def segment(request: Request) -> Response:
        """Segment one ``text`` or a list of ``documents``; options as `headseg segment`'s flags."""
        started = time.perf_counter()
        response = await _segment(request)
        if not isinstance(response, StreamingResponse):
            engine.metrics.requests.labels(str(response.status_code)).inc()
            engine.metrics.latency.observe(time.perf_counter() - started)
        return response

    async def _segment(request: Request) -> Response:
        if not authorised(request):
            return unauthorised()
        if not engine.ready:
            return error(503, "shutting down" if engine.closing else engine.error or "loading the model",
                         {"Retry-After": str(RETRY_AFTER_S)})
        try:
            body = await read_body(request.stream(), request.headers.get("content-length"),
                                   config.max_request_bytes)
            req = parse_request(body, config.max_queue)
        except RequestError as exc:
            return error(exc.status, exc.reason)
        if not engine.admit(len(req.texts)):
            return error(429, f"queue full ({engine.in_flight} of {config.max_queue} documents in flight)",
                         {"Retry-After": str(RETRY_AFTER_S)})
        if req.many:
            return StreamingResponse(_stream(request, req, time.perf_counter()), media_type="application/x-ndjson")
        try:
            task = asyncio.ensure_future(engine.runner.segment(req.texts[0], req.options))
            if not await _finished_or_gone(request, [task]):
                return Response(status_code=499)
            seg = task.result()
        except Exception as exc:  # noqa: BLE001 - one line to the client and the log, no traceback
            return _failed(exc)
        finally:
            engine.release(1)
        _served(req)
        return JSONResponse(seg.to_dict())

    async def _stream(request: Request, req: SegmentRequest, started: float) -> AsyncIterator[bytes]:
        tasks = [asyncio.ensure_future(engine.runner.segment(t, req.options)) for t in req.texts]
        status = "200"
        try:
            for doc_id, task in zip(req.ids, tasks):
                if not await _finished_or_gone(request, [task]):
                    status = "499"
                    return
                try:
                    record = task.result().to_dict(document=doc_id)
                except Exception as exc:  # noqa: BLE001 - the document's line says it, the stream goes on
                    record = {"document": doc_id, "error": _reason(exc)}
                yield (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
            _served(req)
        finally:
            for task in tasks:
                task.cancel()  # a client gone mid-stream: the rest of its windows are dropped
            engine.release(len(req.texts))
            engine.metrics.requests.labels(status).inc()
            engine.metrics.latency.observe(time.perf_counter() - started)

    def _served(req: SegmentRequest) -> None:
        engine.metrics.documents.inc(len(req.texts))
        engine.metrics.characters.inc(req.characters)

    return app


async def _finished_or_gone(request: Request, tasks: list) -> bool:
    """Wait for ``tasks``; False (and the tasks cancelled) if the client disconnects first."""
    while True:
        done, _ = await asyncio.wait(tasks, timeout=_POLL_S)
        if len(done) == len(tasks):
            return True
        if await request.is_disconnected():
            for t in tasks:
                t.cancel()
            return False


def _reason(exc: BaseException) -> str:
    """One line for a failed document (the cause logged once when it is not the input's fault)."""
    from headseg.analysis.errors import InputError

    if not isinstance(exc, (InputError, Cancelled)):
        log.error("segmentation failed: %s: %s", type(exc).__name__, (str(exc).splitlines() or [""])[0])
        return "segmentation failed"
    return (str(exc).splitlines() or [""])[0]


def _failed(exc: BaseException) -> JSONResponse:
    """A segmentation that failed: 422 for the input's fault, 503 when stopping, else 500 (one log line)."""
    if isinstance(exc, Cancelled):
        return error(503, "cancelled: the server is stopping")
    from headseg.analysis.errors import InputError

    if isinstance(exc, InputError):
        return error(422, str(exc))
    log.error("segmentation failed: %s: %s", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    return error(500, "segmentation failed")


def _start_quietly(engine: Engine) -> None:
    """:meth:`Engine.start` for the background load: a failure is kept for ``/readyz`` and logged once."""
    try:
        engine.start()
    except HeadsegError as exc:
        log.error("the model did not load: %s", str(exc).splitlines()[0])
    except Exception as exc:  # noqa: BLE001 - reported on /readyz, not as a traceback
        engine.error = f"{type(exc).__name__}: {exc}"
        log.error("the model did not load: %s", engine.error.splitlines()[0])
