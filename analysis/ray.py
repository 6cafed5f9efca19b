"""Starting or joining Ray (the ``ray`` extra), shared by the Ray study and Ray segmentation.

Ray is imported only when :func:`init_ray` is called, so nothing else needs the extra.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from typing import Any, Iterator

from .errors import InputError

#: seconds a cluster address has to accept a TCP connection and answer before Ray is asked to join it
#: (Ray 2.x itself retries an unreachable address for minutes)
CONNECT_TIMEOUT = 5.0


#: what an HTTP/2 client sends first (RFC 9113 §3.4): the preface, then an empty SETTINGS frame
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
#: the frame type of SETTINGS, which an HTTP/2 server sends first (byte 3 of the frame header)
_H2_SETTINGS = 4


def probe_address(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse (:class:`InputError`) a ``HOST:PORT`` cluster address (``ray://`` too) that does not answer
    as a Ray cluster within ``timeout`` seconds.  ``auto``, ``local`` and addresses without a port are left to Ray.

    Both Ray's GCS and the Ray Client server speak gRPC, whose HTTP/2 server opens with a
    SETTINGS frame: a listener that accepts the connection and then says nothing (where
    ``ray.init`` would wait for minutes) or answers in another protocol is refused here.
    With ``RAY_USE_TLS`` set the cluster expects TLS first, so only the connection is checked.
    """
    rest = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or address in ("auto", "local"):
        return
    try:
        port_no = int(port)
    except ValueError:
        raise InputError(f"--address {address}: the port '{port}' is not a number") from None
    host = host.strip("[]")  # [::1]:6379
    tls = os.environ.get("RAY_USE_TLS", "").strip().lower() in ("1", "true", "yes")
    try:
        with socket.create_connection((host, port_no), timeout=timeout) as conn:
            if tls:
                return
            conn.sendall(_H2_PREFACE)
            reply = b""
            while len(reply) < 9:  # one frame header
                try:
                    chunk = conn.recv(9 - len(reply))
                except socket.timeout:
                    if reply:  # a few bytes of something else
                        break
                    raise
                if not chunk:
                    break
                reply += chunk
    except socket.timeout:
        raise InputError(f"--address {address}: no Ray cluster answers there (no reply within "
                         f"{timeout:g} s)") from None
    except OSError as exc:
        raise InputError(f"--address {address}: cannot reach a Ray cluster there ({exc.strerror or exc})") from None
    if len(reply) < 9 or reply[3] != _H2_SETTINGS:
        raise InputError(f"--address {address}: what answers there is not a Ray cluster (it does not speak gRPC)")


def init_ray(address: str | None, num_cpus: int | None = None, quiet: bool = False):
    """The ``ray`` module, connected to the cluster at ``address`` or to a local Ray it starts.

    A Ray this process has already started or joined is used as it is.
    ``num_cpus`` sizes a local Ray (ignored with ``address``); no dashboard, no
    worker logs on the driver, and Ray's own log from warnings up (errors only
    with ``quiet``).  A Ray that cannot be started or reached raises
    :class:`InputError`.
    """
    if address:
        probe_address(address)
    import ray

    if not ray.is_initialized():
        # Ray's own notices at INFO ("Started a local Ray instance.") are noise on a command's stderr;
        # its warnings (the cluster's token authentication, say) show unless the user asked for quiet
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "logging_level": logging.ERROR if quiet else logging.WARNING}
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"cannot start or reach Ray{' at ' + address if address else ''}: {exc}") from None
    return ray


@contextlib.contextmanager
def ray_session(address: str | None, num_cpus: int | None = None, quiet: bool = False) -> Iterator[Any]:
    """:func:`init_ray` for the length of one command: the ``ray`` module inside the block.

    A Ray started here is shut down when the block ends, and the environment
    variables Ray sets in this process while starting one (``RAY_USAGE_STATS_ENABLED``,
    ``RAY_AUTH_MODE``, ``PYTHONBREAKPOINT``...) and the "ray" logger's level are
    put back as they were, so a command run inside a program (``headseg.cli.main``) leaves that program as it
    found it.  A Ray the program had started or joined is used and left running.
    """
    before = sys.modules.get("ray")
    started = before is None or not before.is_initialized()
    env = dict(os.environ)
    log = logging.getLogger("ray")
    level = log.level
    try:
        yield init_ray(address, num_cpus, quiet)
    finally:
        ray = sys.modules.get("ray")
        if started and ray is not None and ray.is_initialized():
            ray.shutdown()
        if started:
            _restore_environment(env)
            log.setLevel(level)  # init_ray's logging_level outlives the Ray it started


def _restore_environment(env: dict[str, str]) -> None:
    """Put ``os.environ`` back to ``env``: what was added is removed, what was changed is set back."""
    for key in set(os.environ) - set(env):
        os.environ.pop(key, None)
    for key, value in env.items():
        if os.environ.get(key) != value:
            os.environ[key] = value
