"""``POST /v1/segment``: one ``text`` → one JSON record; a list of ``documents`` → NDJSON, in order.

The body's schema is made from the segmentation options
(:func:`~headseg.serve.requests.request_schema`).  Each request is admitted
against the queue bound (429 when full), its documents go to the host's
async runner, and a client that disconnects has its pending windows dropped
(499 in the metrics).  A document that fails in a stream is a line
``{"document": id, "error": ...}`` and the stream goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import AsyncIterator, Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from headseg.analysis.errors import InputError
from headseg.analysis.text import TokenizedText
from headseg.export.batcher import Cancelled, Ticket
from headseg.formats import failure_record, json_line
from headseg.segmenter.pipeline import Pipeline

from .host import Host
from .refusals import Refusal, busy, error
from .requests import RequestError, SegmentRequest, parse_request, read_body, request_schema

log = logging.getLogger("headseg.serve")

#: how often a waiting request checks that its client is still there
_POLL_S = 0.1

_RESPONSES = {200: {"description": "one record (`text`) or NDJSON records (`documents`)"},
              401: {"description": "API key"}, 413: {"description": "body too large"},
              422: {"description": "malformed body, options or query string"}, 429: {"description": "queue full"},
              503: {"description": "not ready"}}


def segment_router(host: Host, check_key: Callable[[Request], None]) -> APIRouter:
    """The router of ``POST /v1/segment`` over ``host``; ``check_key`` refuses a missing API key."""
    router = APIRouter()
    config = host.config

    @router.post("/v1/segment", responses=_RESPONSES, openapi_extra={"requestBody": {
        "required": True, "content": {"application/json": {"schema": request_schema()}}}})
    async def segment(request: Request) -> Response:
        """Segment one ``text`` or a list of ``documents``; options as `headseg segment`'s flags."""
        started = time.perf_counter()
        try:
            response = await _segment(request)
        except Refusal as exc:
            response = exc.response()
        if not isinstance(response, StreamingResponse):
            host.metrics.requests.labels(str(response.status_code)).inc()
            host.metrics.latency.observe(time.perf_counter() - started)
        return response

    async def _segment(request: Request) -> Response:
        check_key(request)
        if not host.ready:
            raise busy("shutting down" if host.closing else host.error or "loading the model")
        if request.query_params:
            # options in the URL would be silently ignored: the body is the one place they are read
            raise Refusal(422, f"options go in the JSON body, not the query string "
                               f"(got ?{', '.join(sorted(set(request.query_params)))})")
        try:
            body = await read_body(request.stream(), request.headers.get("content-length"),
                                   config.max_request_bytes)
            req = parse_request(body, config.max_queue)
        except RequestError as exc:
            raise Refusal(exc.status, exc.reason) from None
        tokens = await _tokens_within(req.texts, config.max_request_tokens, host.runner.pipeline)
        if not host.admit(len(req.texts)):
            raise busy(f"queue full ({host.in_flight} of {config.max_queue} documents in flight)", 429)
        if req.many:
            return StreamingResponse(_stream(request, req, tokens, time.perf_counter()),
                                     media_type="application/x-ndjson")
        try:
            task = asyncio.ensure_future(host.runner.segment(tokens[0], req.options))
            if not await _finished_or_gone(request, [task]):
                return Response(status_code=499)
            seg = task.result()
        except Exception as exc:  # noqa: BLE001 - one line to the client and the log, no traceback
            return _failed(exc)
        finally:
            host.release(1)
        _served(req)
        return JSONResponse(seg.to_dict())

    async def _stream(request: Request, req: SegmentRequest, tokens: list[str | TokenizedText],
                      started: float) -> AsyncIterator[bytes]:
        # One ticket for the request: its documents take one turn in the batcher between other requests,
        # not one each; and at most ``workers`` of them are under way at once, so that a request of many
        # documents does not take every thread an ordinary request behind it needs (issue 49, item 10).
        ticket, under_way = Ticket(), asyncio.Semaphore(host.runner.workers)

        async def one(text: str | TokenizedText):
            async with under_way:
                return await host.runner.segment(text, req.options, ticket=ticket)

        tasks = [asyncio.ensure_future(one(t)) for t in tokens]
        status = "200"
        try:
            for doc_id, task in zip(req.ids, tasks):
                if not await _finished_or_gone(request, [task]):
                    status = "499"
                    return
                try:
                    record = task.result().to_dict(document=doc_id)
                except Exception as exc:  # noqa: BLE001 - the document's line says it, the stream goes on
                    record = failure_record(doc_id, _reason(exc))
                yield json_line(record).encode("utf-8")
            _served(req)
        finally:
            for task in tasks:
                task.cancel()  # a client gone mid-stream: the rest of its windows are dropped
            host.release(len(req.texts))
            host.metrics.requests.labels(status).inc()
            host.metrics.latency.observe(time.perf_counter() - started)

    def _served(req: SegmentRequest) -> None:
        host.metrics.documents.inc(len(req.texts))
        host.metrics.characters.inc(req.characters)

    return router


#: the most model tokens one character can make (a byte-level BPE: four for a 4-byte character)
_TOKENS_PER_CHAR = 4


async def _tokens_within(texts: list[str], limit: int, pipeline: Pipeline) -> list[str | TokenizedText]:
    """Refuse (413) texts of more than ``limit`` model tokens, before any model work: the bound on what
    one request may cost.  What the runner is handed: texts too short to reach the limit as they are
    (not tokenized here: the worker tokenizes them once), the others as the tokens counted here, in
    threads off the event loop, which the pipeline reads instead of tokenizing again."""
    if sum(len(t) for t in texts) * _TOKENS_PER_CHAR <= limit:
        return list(texts)
    tokens = await asyncio.gather(*(asyncio.to_thread(pipeline.tokenize, t) for t in texts))
    count = sum(len(t) for t in tokens)
    if count > limit:
        raise Refusal(413, f"the request's text is {count:,} model tokens, over the limit of {limit:,} "
                           "(split it into several requests)")
    return list(tokens)


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
    if not isinstance(exc, (InputError, Cancelled)):
        log.error("segmentation failed: %s: %s", type(exc).__name__, (str(exc).splitlines() or [""])[0])
        return "segmentation failed"
    return (str(exc).splitlines() or [""])[0]


def _failed(exc: BaseException) -> JSONResponse:
    """A segmentation that failed: 422 for the input's fault, 503 when stopping, else 500 (one log line)."""
    if isinstance(exc, Cancelled):
        return error(503, "cancelled: the server is stopping")
    if isinstance(exc, InputError):
        return error(422, str(exc))
    log.error("segmentation failed: %s: %s", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    return error(500, "segmentation failed")
