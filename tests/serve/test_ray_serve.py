"""The same app as a Ray Serve deployment on a local Ray (loopback): answers equal the library's."""

from __future__ import annotations

import pytest

from .conftest import TOPICS, free_port, needs_serve_extra, wait_ready

pytestmark = pytest.mark.slow

needs_serve_extra()

pytest.importorskip("ray.serve", reason="ray[serve] is not installed")
httpx = pytest.importorskip("httpx")


def test_ray_serve_replicas_answer_like_the_library():
    import ray
    from ray import serve

    from headseg.api import Segmenter
    from headseg.serve.host import ServeConfig
    from headseg.serve.ray_serve import start

    port = free_port()
    started_here = not ray.is_initialized()
    try:
        start(ServeConfig(max_queue=32, doc_threads=4), host="127.0.0.1", port=port, replicas=2, cpus_per_replica=0.25)
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, 180)
        pids = set()
        for _ in range(12):
            pids.add(httpx.get(url + "/readyz", timeout=10).json()["pid"])
        r = httpx.post(url + "/v1/segment", json={"text": TOPICS, "max_chars": 300}, timeout=60)
        assert r.status_code == 200
        assert r.json() == Segmenter(quiet=True).segment(TOPICS, max_chars=300).to_dict()
        assert httpx.post(url + "/v1/segment", json={"text": 1}, timeout=30).status_code == 422
        assert len(pids) == 2  # two replicas, each with its own host, both answering
    finally:
        serve.shutdown()
        if started_here:
            ray.shutdown()


@pytest.mark.parametrize("kwargs", [{"replicas": 2.5}, {"replicas": True}, {"replicas": "2"}, {"replicas": 0},
                                    {"cpus_per_replica": -1}, {"cpus_per_replica": float("nan")},
                                    {"cpus_per_replica": 0}])
def test_build_refuses_bad_sizes_with_one_line(kwargs):
    """Before: Ray's own tracebacks (a pydantic ValidationError, a TypeError comparing str and int, a NaN
    conversion), or True taken as one replica."""
    from headseg.analysis.errors import InputError
    from headseg.serve.host import ServeConfig
    from headseg.serve.ray_serve import build

    with pytest.raises(InputError, match="replicas|cpus_per_replica"):
        build(ServeConfig(), **kwargs)
    assert build(ServeConfig(), replicas=2, cpus_per_replica=0.5) is not None
