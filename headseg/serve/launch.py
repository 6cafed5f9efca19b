"""Starting a server from a script: a free loopback port, and waiting until ``/readyz`` answers 200.

For the tests, the load benchmark and anyone who starts ``headseg serve`` as a
child process.  Only the standard library: no client package needed.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request

from headseg.analysis.errors import HeadsegError


class ServerNotReady(HeadsegError):
    """The server exited, or ``/readyz`` did not answer 200 in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url + "/readyz"`` every 0.3 s until it answers 200.

    Raises :class:`ServerNotReady` when ``proc`` (the server's process, if given)
    exits first, with the last 2000 characters of its stderr when it was piped,
    or when ``timeout`` seconds pass.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            raise ServerNotReady(f"the server exited {proc.returncode}: {err}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or 503 while warming up
        time.sleep(0.3)
    raise ServerNotReady(f"{url} not ready after {timeout} s")
