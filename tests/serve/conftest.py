"""Fixtures of the service tests: one started host per session (the model loads once)."""

from __future__ import annotations

import pytest

from headseg.serve import launch
from headseg.serve.launch import free_port  # noqa: F401  (the tests import it from here)

#: three topics, long enough for topic boundaries
TOPICS = (
    "The committee met on Monday. It approved the budget after a long debate. The chair thanked the members. "
    "Next year's spending will rise by two percent.\n\n"
    "Rain fell all night and the river rose quickly. Farmers moved their cattle to higher ground. "
    "The bridge was closed by the morning. Boats were tied up in the harbour.\n\n"
    "The new phone has a larger screen and a faster chip. Its battery lasts two days. "
    "Reviewers praised the camera. The price is lower than last year's model."
)


def documents(n: int) -> list[str]:
    """``n`` different texts (the topics rotated and numbered), for packing tests."""
    parts = TOPICS.split("\n\n")
    return [f"Report {i}. " + "\n\n".join(parts[i % 3:] + parts[: i % 3]) for i in range(n)]


def needs_serve_extra() -> None:
    """Skip the calling module where the 'serve' extra (FastAPI, Prometheus client) is not installed."""
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    pytest.importorskip("prometheus_client", reason="the 'serve' extra is not installed")


@pytest.fixture(scope="session")
def host():
    from headseg.serve.host import Host, ServeConfig

    eng = Host(ServeConfig(max_queue=64, doc_threads=8)).start()
    yield eng
    eng.close()


@pytest.fixture()
def client(host):
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app

    with TestClient(create_app(host=host)) as c:
        yield c


def wait_ready(url: str, timeout: float, proc=None) -> None:
    """:func:`headseg.serve.launch.wait_ready`, failing the test with its message."""
    try:
        launch.wait_ready(url, timeout, proc)
    except launch.ServerNotReady as exc:
        pytest.fail(str(exc))
