"""``headseg serve``: the segmentation service over HTTP (the ``serve`` extra; :mod:`headseg.serve`).

One model per process; the windows of concurrent requests share onnxruntime
calls by a token budget (``--max-batch-tokens``); at most ``--max-queue``
documents are admitted at once, more are answered 429.  Binds 127.0.0.1
unless told otherwise.  The API key comes from ``--api-key`` or the
``HEADSEG_API_KEY`` environment variable (read here, by the command, never by
the library).  SIGTERM stops accepting, finishes the requests in flight and
exits.  ``--engine ray`` runs ``--replicas`` hosts as a Ray Serve deployment.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.settings import add_flags, values_from_args
from headseg.config import SegmenterConfig, add_config_flags

#: where the API key is read from when ``--api-key`` is not given
API_KEY_ENV = "HEADSEG_API_KEY"


def register(sub) -> None:
    """Declare ``headseg serve`` and its options on the subcommand parsers."""
    p = sub.add_parser("serve", help="serve segmentation over HTTP (batched, with backpressure and metrics)",
                       description="Serve POST /v1/segment, /healthz, /readyz, /metrics, the viewer page at / and "
                                   "OpenAPI at /docs.  The model loads once; concurrent requests share model calls "
                                   "by a token budget; a full queue answers 429.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    from headseg.serve.config import ServeConfig

    # --model --profile --artifact --backend --precision --device --threads (SegmenterConfig), then the
    # service's own limits (ServeConfig): declared once, with their defaults
    add_config_flags(p, command="serve")
    add_flags(p, ServeConfig)
    # --doc-threads' old name, kept for one release: ``headseg segment``'s --workers are Ray actors
    p.add_argument("--workers", dest="old_doc_threads", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--api-key", default=None,
                   help=f"require this key (Authorization: Bearer KEY or X-API-Key); default ${API_KEY_ENV}")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (this process) or ray (a Ray Serve deployment; needs the 'ray' extra)")
    p.add_argument("--replicas", type=int, default=1, help="ray: host replicas (default 1)")
    p.add_argument("--address", default=None, help="ray: cluster address (default: start a local Ray)")
    p.add_argument("--log-level", choices=("critical", "error", "warning", "info"), default="info",
                   help="server log level (info: one access line per request)")
    p.set_defaults(func=run)


def _server_class():
    """uvicorn's server, except that a stop by SIGTERM/SIGINT ends in exit code 0, not by the signal."""
    import contextlib
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            # uvicorn re-raises the signal after draining; a drained stop is a clean exit here
            old = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, h in old.items():
                    signal.signal(s, h)

    return Server


def config_of(args):
    """The :class:`~headseg.serve.host.ServeConfig` of parsed ``args`` (validated, nothing loaded)."""
    from headseg.serve.config import ServeConfig

    if not 0 <= args.port <= 65535:
        raise InputError(f"--port must be between 0 and 65535 (got {args.port})")
    if args.replicas < 1:
        raise InputError(f"--replicas must be at least 1 (got {args.replicas})")
    key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None
    from headseg.serve.config import SERVE_BATCH_SIZE

    segmenter = SegmenterConfig.from_args(args, batch_size=SERVE_BATCH_SIZE)
    values = values_from_args(ServeConfig, args)
    if getattr(args, "old_doc_threads", None) is not None:
        if values.get("doc_threads") is not None:
            raise InputError("give --doc-threads alone (--workers is its old name)")
        logging.getLogger("headseg").warning("note: --workers is now --doc-threads (the old name goes in the "
                                             "next release)")
        values["doc_threads"] = args.old_doc_threads
    try:
        return ServeConfig(segmenter=segmenter, api_key=key, **values)
    except HeadsegError as exc:
        raise InputError(f"--{exc}") from None


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port``, or :class:`InputError` in one line.

    Bound before the model loads, so that a port in use or a host that does not resolve costs no load and
    prints none of uvicorn's lines; the socket itself is handed to uvicorn, so nothing can take the port
    between the check and the serving.  Only the first address of a name is bound (uvicorn's own bind does
    the same), with the options uvicorn sets.
    """
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise InputError(f"--host {host!r} does not resolve ({exc.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InputError(f"cannot listen on {where}: the port is in use (--port 0 takes a free one)") from None
        raise InputError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run(args) -> int:
    """``headseg serve``: bind, load the model (errors exit before serving), then serve until SIGTERM/SIGINT."""
    config = config_of(args)
    sock = bind_listener(args.host, args.port)
    if args.engine == "ray":
        from headseg.serve.ray_serve import run_ray

        sock.close()  # Ray Serve's proxy binds the port itself; the check above is all this process does
        return run_ray(config, host=args.host, port=args.port, replicas=args.replicas, address=args.address)
    import uvicorn

    from headseg.serve.app import create_app
    from headseg.serve.host import Host
    from headseg.serve.refusals import http_protocol

    _Server = _server_class()
    try:
        host = Host(config, owns_process=True).start()  # a bad model or profile: one line and its exit code
    except BaseException:
        sock.close()
        raise
    app = create_app(host=host)
    # uvicorn handles SIGTERM and SIGINT: stop accepting, finish in-flight requests, run the shutdown; a
    # request it cannot parse is answered {"error": ...} like every other refusal (http_protocol)
    server = _Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                                    timeout_graceful_shutdown=None, server_header=False, http=http_protocol()))
    # uvicorn says where it serves only when it binds itself; the port matters most with --port 0
    logging.getLogger("headseg").info("serving on http://%s (Press CTRL+C to quit)", _address(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        host.close()
    return 0
