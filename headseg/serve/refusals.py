"""How the service refuses: one-line ``{"error": ...}`` answers, for its own refusals and the framework's.

Every refusal of the service has the same shape, whoever makes it: the
routes raise :class:`Refusal`, and FastAPI's own answers (404 unknown path,
405 wrong method, 422 from its request validation) are rewritten by the
handlers :func:`install` adds, so no ``{"detail": ...}`` reaches a client.
The API key check is here too (:func:`key_check`): a refusal like the others.
A request uvicorn itself cannot parse (a bad request line, ``Content-Length:
abc``) never reaches the app: :func:`http_protocol` is uvicorn's HTTP protocol
with that answer in the same shape, for ``headseg serve``'s uvicorn config.
"""

from __future__ import annotations

import hmac
import json
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

#: seconds a client is told to wait after a 429 or 503
RETRY_AFTER_S = 1


class Refusal(Exception):
    """A refused request: HTTP ``status``, a one-line ``reason`` and any headers (``Retry-After``)."""

    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, headers

    def response(self) -> JSONResponse:
        """The answer: ``{"error": reason}`` with the status and headers."""
        return error(self.status, self.reason, self.headers)


def error(status: int, reason: str, headers: dict | None = None) -> JSONResponse:
    """A refusal: ``{"error": reason}`` (one line) with ``status``."""
    return JSONResponse({"error": reason.splitlines()[0] if reason else ""}, status_code=status, headers=headers)


def busy(reason: str, status: int = 503) -> Refusal:
    """A refusal the client should retry after :data:`RETRY_AFTER_S` (503 not ready, 429 queue full)."""
    return Refusal(status, reason, {"Retry-After": str(RETRY_AFTER_S)})


def key_check(api_key: str | None) -> Callable[[Request], None]:
    """A check that raises a 401 :class:`Refusal` unless ``request`` carries ``api_key`` (None: no key needed).

    The key is taken from ``Authorization: Bearer KEY`` or ``X-API-Key``, and
    compared in constant time, so the time taken says nothing about how much of
    it matched.
    """
    key = api_key.encode("utf-8") if api_key else None

    def check(request: Request) -> None:
        if key is None:
            return
        given = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if given is None and auth[:7].lower() == "bearer ":
            given = auth[7:]
        if not hmac.compare_digest((given or "").encode("utf-8", "surrogateescape"), key):
            raise Refusal(401, "missing or wrong API key (Authorization: Bearer KEY or X-API-Key)",
                          {"WWW-Authenticate": "Bearer"})

    return check


def install(app: FastAPI) -> None:
    """Answer :class:`Refusal` and FastAPI's own refusals as ``{"error": ...}`` on ``app``."""

    @app.exception_handler(Refusal)
    async def refused(request: Request, exc: Refusal) -> JSONResponse:
        return exc.response()

    @app.exception_handler(HTTPException)
    async def http_refused(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            reason = f"no such endpoint: {request.method} {request.url.path} (see /docs)"
        elif exc.status_code == 405:
            allowed = exc.headers.get("Allow", "") if exc.headers else ""
            reason = f"{request.method} is not allowed on {request.url.path}" + (f" (use {allowed})" if allowed else "")
        else:
            reason = str(exc.detail)
        return error(exc.status_code, reason, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = (exc.errors() or [{}])[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error(422, f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request")


#: the answer to a request that is not HTTP/1.1 (uvicorn's own is plain text: "Invalid HTTP request received.")
UNPARSABLE = "invalid HTTP request: malformed request line, header or body framing (e.g. Content-Length)"


def http_protocol(base: type | None = None) -> type:
    """uvicorn's HTTP protocol class ``base`` (default: the one uvicorn's ``http="auto"`` picks, httptools
    or h11) answering a request it cannot parse ``400 {"error": ...}`` instead of plain text.

    Both uvicorn protocols send that answer through ``send_400_response`` (uvicorn 0.2x to 0.5x), so the
    subclass replaces just that; the connection is closed after it, as uvicorn's is, because a parser
    that failed has lost the request's framing.
    """
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol
    if not callable(getattr(base, "send_400_response", None)):
        raise TypeError(f"{base.__name__} has no send_400_response: this uvicorn answers unparsable requests "
                        "in another way")
    body = json.dumps({"error": UNPARSABLE}).encode("ascii")

    class JSONRefusingProtocol(base):  # type: ignore[misc, valid-type]
        def send_400_response(self, msg: str) -> None:
            # written raw, as the httptools protocol writes its own: no parser state is needed for it
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
            head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body),
                     b"connection: close\r\n", b"\r\n"]
            self.transport.write(b"".join(head) + body)
            self.transport.close()

    JSONRefusingProtocol.__name__ = JSONRefusingProtocol.__qualname__ = f"JSONRefusing{base.__name__}"
    return JSONRefusingProtocol
