"""Addresses and ports: a Ray address that cannot be reached or speaks another protocol, and the port
``headseg serve`` binds (in use, a host that does not resolve), each refused in one line before the model.

``NO_MODEL`` (or ``config_only``) shows that a check ran before any model load: reaching the load would
exit 3.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading

import pytest

from headseg.analysis.errors import InputError

from cli_helpers import NO_MODEL, one_line, run

#: what gRPC's HTTP/2 server sends first: a SETTINGS frame (type 4) on stream 0
SETTINGS_FRAME = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + bytes([0, 3, 0, 0, 0, 100])


def test_item13_unreachable_ray_address_study(tmp_path, corpus, config_only, capsys):
    rc, err = run(["study", str(corpus), "--out", str(tmp_path / "s"), "--engine", "ray", "--address", "127.0.0.1:1",
                    "--model", config_only], capsys)
    assert rc == 2 and one_line(err) and "--address 127.0.0.1:1: cannot reach a Ray cluster" in err, err


def test_item13_unreachable_ray_address(tmp_path, corpus, capsys):
    from headseg.analysis.ray import probe_address

    with socket.socket() as s:  # a loopback port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="cannot reach a Ray cluster"):
        probe_address(f"127.0.0.1:{port}")
    with pytest.raises(InputError, match="cannot reach a Ray cluster"):
        probe_address(f"ray://127.0.0.1:{port}")
    probe_address("auto")  # left to Ray (a listener that answers: the listener tests below)
    pytest.importorskip("ray")
    rc, err = run(["segment", str(corpus), "--engine", "ray", "--address", "127.0.0.1:1", "--format", "jsonl",
                    "--out", str(tmp_path / "r.jsonl")] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "--address 127.0.0.1:1: cannot reach a Ray cluster" in err, err


@pytest.fixture
def busy_port():
    """A loopback port something already listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_issue35_item10_serve_on_a_port_in_use(busy_port, capsys, engine):
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    rc, err = run(["serve", "--port", str(busy_port), "--engine", engine, *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and f"127.0.0.1:{busy_port}" in err and "in use" in err, err


@pytest.mark.parametrize("host, says", [("no-such-host.invalid", "does not resolve"),
                                        ("192.0.2.1", "cannot listen on 192.0.2.1:")])
def test_issue35_item10_serve_on_a_host_it_cannot_bind(capsys, host, says):
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    rc, err = run(["serve", "--host", host, "--port", "0", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and says in err and "INFO" not in err, err


def test_issue35_item10_serve_hands_uvicorn_the_socket_it_bound(monkeypatch):
    """The check is the bind itself: the socket bound before the model loads is the one served."""
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    from headseg.cli import serve

    sock = serve.bind_listener("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] > 0
        import socket

        with socket.create_connection(sock.getsockname(), timeout=5):
            pass  # listening already: nothing else can take the port before uvicorn serves it
    finally:
        sock.close()


@contextlib.contextmanager
def _listener(answer: bytes | None):
    """A loopback TCP listener whose every connection gets ``answer`` (None: it is accepted and never answered;
    ``b""``: it is closed at once)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    held = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)
                if not answer:
                    conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        srv.close()
        for conn in held:
            conn.close()


def test_issue35_item6_a_silent_listener_is_given_up_on(tmp_path, corpus, capsys):
    """Before: the listener accepted, Ray waited for an answer for minutes.  The bound is CONNECT_TIMEOUT."""
    from headseg.analysis.ray import CONNECT_TIMEOUT

    assert CONNECT_TIMEOUT <= 30
    with _listener(None) as address:
        rc, err = run(["segment", str(corpus), "--engine", "ray", "--address", address, "--format", "jsonl",
                       "--out", str(tmp_path / "r.jsonl"), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and f"--address {address}: no Ray cluster answers there" in err, err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("answer", [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"+PONG\r\n", b""])
def test_issue35_item6_a_listener_of_another_protocol_is_refused(answer):
    from headseg.analysis.errors import InputError
    from headseg.analysis.ray import probe_address

    with _listener(answer) as address:
        with pytest.raises(InputError, match="not a Ray cluster|cannot reach a Ray cluster"):
            probe_address(address, timeout=2)
        with pytest.raises(InputError, match="not a Ray cluster|cannot reach a Ray cluster"):
            probe_address(f"ray://{address}", timeout=2)


def test_issue35_item6_an_http2_server_is_left_to_ray(monkeypatch):
    from headseg.analysis.ray import probe_address

    with _listener(SETTINGS_FRAME) as address:
        probe_address(address, timeout=5)
    with _listener(None) as address:  # a TLS cluster answers only a TLS hello: the connection is checked alone
        monkeypatch.setenv("RAY_USE_TLS", "1")
        probe_address(address, timeout=2)


def test_issue35_item6_a_real_ray_cluster_passes_the_probe():
    """The probe against the GCS of a Ray started for the test (in a child: this process's Ray is left alone)."""
    pytest.importorskip("ray")
    import subprocess
    import sys

    code = ("import ray\nfrom headseg.analysis.ray import probe_address\n"
            "ctx = ray.init(include_dashboard=False, log_to_driver=False, num_cpus=1, logging_level='ERROR')\n"
            "try:\n    probe_address(ctx.address_info['gcs_address'])\nfinally:\n    ray.shutdown()\nprint('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
