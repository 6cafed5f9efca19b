"""Issue 49 item 3: a request uvicorn cannot parse is refused ``400 {"error": ...}``, the service's one shape.

uvicorn answers such requests itself, before the app, in plain text ("Invalid
HTTP request received."); ``headseg serve`` gives it a protocol class
(:func:`headseg.serve.refusals.http_protocol`) that answers in JSON.  Checked
with raw bytes on a socket (no client would send them), for both of uvicorn's
parsers and through the real ``headseg serve``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from .conftest import free_port, needs_serve_extra, wait_ready

pytestmark = pytest.mark.slow

needs_serve_extra()

#: requests neither httptools nor h11 can parse
UNPARSABLE = {
    "content-length-not-a-number": b"POST /v1/segment HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: abc\r\n\r\n{}",
    "header-without-colon": b"GET /healthz HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
    "request-line-garbage": b"\x16\x03\x01 not http at all\r\n\r\n",
}


def raw(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as it is to ``url``'s host and port; the status, headers and body of the answer
    (read to the end: every answer here closes the connection)."""
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return int(status_line.split()[1]), headers, body


def check_refusal(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    assert headers["connection"] == "close"
    answer = json.loads(body)
    assert set(answer) == {"error"} and "\n" not in answer["error"]
    assert answer["error"].startswith("invalid HTTP request")


@pytest.fixture(scope="module", params=["httptools", "h11"])
def protocol_url(request, host):
    """The app over the session's host, served through the JSON-refusing subclass of each uvicorn parser."""
    if request.param == "httptools":
        pytest.importorskip("httptools")
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    else:
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    from headseg.serve.app import create_app
    from headseg.serve.refusals import http_protocol

    from .live import serve_in_thread

    with serve_in_thread(create_app(host=host), http=http_protocol(base)) as url:
        yield url


@pytest.mark.parametrize("case", sorted(UNPARSABLE))
def test_unparsable_request_is_a_json_refusal(protocol_url, case):
    check_refusal(*raw(protocol_url, UNPARSABLE[case]))


def test_a_parsable_request_is_served_as_before(protocol_url):
    status, headers, body = raw(protocol_url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    status, _, body = raw(protocol_url, b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 404 and set(json.loads(body)) == {"error"}  # the app's own refusals are untouched


def test_uvicorn_alone_answers_plain_text(host):
    """What the protocol class replaces: without it the same bytes get uvicorn's plain-text 400 (if uvicorn
    ever answers JSON itself, the class is no longer needed)."""
    from headseg.serve.app import create_app

    from .live import serve_in_thread

    with serve_in_thread(create_app(host=host)) as url:
        status, headers, body = raw(url, UNPARSABLE["content-length-not-a-number"])
    assert status == 400 and headers["content-type"].startswith("text/plain")
    assert body == b"Invalid HTTP request received."


def test_a_protocol_without_the_hook_is_refused():
    from headseg.serve.refusals import http_protocol

    with pytest.raises(TypeError, match="send_400_response"):
        http_protocol(object)


def test_headseg_serve_refuses_unparsable_requests_in_json():
    """The real command: its uvicorn config carries the protocol class."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "headseg", "serve", "--port", str(port), "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "HEADSEG_API_KEY": ""})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, 180, proc)
        for request in UNPARSABLE.values():
            check_refusal(*raw(url, request))
        status, _, body = raw(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status == 200 and json.loads(body) == {"status": "ok"}
    finally:
        proc.terminate()
        proc.wait(60)
    assert "Traceback" not in proc.stderr.read().decode()
