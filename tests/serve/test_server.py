"""The real ``headseg serve`` in a subprocess on a free loopback port: SIGTERM drains, a gone client costs nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import TOPICS, documents, free_port, needs_serve_extra, wait_ready

pytestmark = pytest.mark.slow

needs_serve_extra()

httpx = pytest.importorskip("httpx")


@pytest.fixture()
def server():
    port = free_port()
    env = {**os.environ, "HEADSEG_API_KEY": ""}
    proc = subprocess.Popen([sys.executable, "-m", "headseg", "serve", "--port", str(port), "--max-queue", "64",
                             "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, 180, proc)
    yield proc, url
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_sigterm_finishes_requests_in_flight_then_exits(server):
    proc, url = server
    body = {"documents": [{"id": str(i), "text": t} for i, t in enumerate(documents(8))]}

    def post(_):
        return httpx.post(url + "/v1/segment", json=body, timeout=120)

    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(post, i) for i in range(6)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every request admitted before the signal
            metrics = httpx.get(url + "/metrics", timeout=5).text
            if "headseg_queue_documents 48.0" in metrics:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        answers = [f.result() for f in futures]
    assert [a.status_code for a in answers] == [200] * 6
    for a in answers:
        assert [json.loads(line)["document"] for line in a.text.splitlines()] == [str(i) for i in range(8)]
    assert proc.wait(60) == 0
    err = proc.stderr.read().decode()
    assert "Traceback" not in err
    with pytest.raises(httpx.TransportError):  # no longer accepting
        httpx.get(url + "/healthz", timeout=2)


def test_a_client_that_disconnects_stops_costing_work(server):
    proc, url = server

    def metric(name: str) -> float:
        text = httpx.get(url + "/metrics", timeout=5).text
        return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + " "))

    # long enough to outlast the 1 s client timeout with room to spare: served without torch in the
    # process (the builder's export), 60 reports took 0.9 s at load 1 and the request finished in time
    long_text = " ".join(documents(240))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/v1/segment", json={"text": long_text}, timeout=1.0)
    deadline = time.monotonic() + 30
    while metric("headseg_queue_documents") != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert metric("headseg_queue_documents") == 0  # released without finishing the document
    windows = metric("headseg_batch_windows_sum")
    time.sleep(1.0)
    assert metric("headseg_batch_windows_sum") - windows <= 64  # at most the call in flight ran after
    assert httpx.post(url + "/v1/segment", json={"text": TOPICS}, timeout=60).status_code == 200
