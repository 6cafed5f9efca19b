"""A uvicorn server over an app in a thread of the test process, on a free loopback port."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

from .conftest import free_port


@contextlib.contextmanager
def serve_in_thread(app, **config) -> Iterator[str]:
    """Serve ``app`` with uvicorn (``config``: more of ``uvicorn.Config``'s settings) until the block ends;
    yields its base URL.  Fails when the server has not started within 30 s."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        if not thread.is_alive():
            raise RuntimeError("the server thread ended before it started serving")
        time.sleep(0.05)
    if not server.started:
        raise RuntimeError(f"the server on port {port} did not start within 30 s")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
