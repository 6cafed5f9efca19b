"""A request's share of the model is bounded: a small caller behind large ones is served within a round of
calls (issue 49, item 10), counted in model calls, never in seconds."""

from __future__ import annotations

import asyncio
import copy
import threading
import time

import numpy as np
import pytest

from headseg.analysis.capture import DEFAULT_MAX_BATCH_TOKENS
from headseg.export.batcher import BatchedBackend, Batcher, Ticket, current_ticket
from headseg.export.runner import AsyncRunner


class Win:
    def __init__(self, caller: str, pos: int, n: int = 10):
        self.caller, self.pos, self.n = caller, pos, n

    def __len__(self) -> int:
        return self.n


class CallLog:
    """A capture backend that records each call's windows; the first call waits for ``gate``."""

    name, device, precision, info = "fake", "cpu", None, None
    max_batch_tokens = DEFAULT_MAX_BATCH_TOKENS

    def __init__(self, per_window: bool, lanes: int = 1):
        self.per_window, self.parallel_calls = per_window, lanes
        self.calls: list[list[Win]] = []
        self.gate = threading.Event()
        self.lock = threading.Lock()

    def unit_vectors(self, windows, owners, heads, weights, output_weight=0.0):
        with self.lock:
            self.calls.append(list(windows))
        self.gate.wait(10)
        rows = np.zeros((int(np.max(owners)) + 1, 2))
        for w, u in zip(windows, owners):
            rows[u] += (ord(w.caller[0]), w.pos)
        return rows

    def first_call_of(self, caller: str) -> int:
        return next(i for i, call in enumerate(self.calls) if any(w.caller == caller for w in call))


def _queue_and_wait(batcher: Batcher, backend: CallLog, jobs: dict[str, int]) -> dict[str, np.ndarray]:
    """Each caller (its own ticket, as a request has) asks for its units, one window each, in the order
    given, each queued before the next starts; then the model runs."""
    results: dict[str, np.ndarray] = {}

    def work(name: str, n: int) -> None:
        token = current_ticket.set(Ticket())
        try:
            windows = [Win(name, i) for i in range(n)]
            results[name] = BatchedBackend(batcher).unit_vectors(windows, np.arange(n), [(0, 0)], np.ones(1))
        finally:
            current_ticket.reset(token)

    threads = []
    queued = 0
    for name, n in jobs.items():
        threads.append(threading.Thread(target=work, args=(name, n)))
        threads[-1].start()
        queued += n
        deadline = time.monotonic() + 10
        # in order: the lanes hold (at most) one call at the gate, the rest is queued
        while batcher.pending_windows + sum(len(c) for c in backend.calls) < queued and time.monotonic() < deadline:
            time.sleep(0.005)
    backend.gate.set()
    for t in threads:
        t.join(10)
    batcher.close()
    return results


@pytest.mark.parametrize("per_window", [True, False], ids=["a lane per core", "one packing lane"])
def test_a_small_caller_behind_six_large_ones_is_served_within_a_round(per_window):
    backend = CallLog(per_window, lanes=2)
    batcher = Batcher(backend, max_batch_tokens=60)  # six windows of 10 tokens per packed call
    jobs = {f"large{c}": 200 for c in range(6)} | {"small": 3}
    results = _queue_and_wait(batcher, backend, jobs)
    # first come first served, the small caller's windows ran after the 1,200 before them: call 1,200
    # (or 200 packed); in turn, within the first round after it arrived
    assert backend.first_call_of("small") <= len(jobs) + batcher.lanes
    last = max(i for i, call in enumerate(backend.calls) if any(w.caller == "small" for w in call))
    assert last <= 3 * (len(jobs) + batcher.lanes)  # its three windows: three rounds at most
    for name, n in jobs.items():  # every caller gets its own rows back, whole, whatever the order
        np.testing.assert_array_equal(results[name], [(ord(name[0]), i) for i in range(n)])


def test_in_turn_a_packed_call_holds_every_callers_first_windows():
    backend = CallLog(per_window=False)
    batcher = Batcher(backend, max_batch_tokens=40)
    _queue_and_wait(batcher, backend, {"a": 20, "b": 20, "c": 20})
    # call 0 is a's first window alone (taken while the others were not queued yet); then each call is
    # shared: no caller has more than half of it
    for call in backend.calls[1:-3]:
        counts = [sum(w.caller == c for w in call) for c in "abc"]
        assert max(counts) <= (len(call) + 1) // 2, counts


class SerialPipeline:
    """A pipeline whose document ``(name, calls)`` makes ``calls`` model calls one after another (as the
    unit detector and the encoder do), each of one window."""

    def __init__(self, backend):
        self.backend = backend

    def with_backend(self, backend):
        other = copy.copy(self)
        other.backend = backend
        return other

    def segment_many(self, texts, options=None, *, progress=None):
        out = []
        for name, calls in texts:
            for i in range(calls):
                self.backend.unit_vectors([Win(name, i)], np.zeros(1, dtype=np.int64), [(0, 0)], np.ones(1))
            out.append(name)
        return out


def test_a_short_document_behind_long_ones_starts_and_is_served_within_a_round():
    """One worker doing CPU work: before, a document held its thread through its model waits, and a short
    document behind three long ones waited for all three (120 model calls); now the long ones give their
    slot up while they wait for the model, so the short one starts and its call comes within a round."""
    backend = CallLog(per_window=True)
    runner = AsyncRunner(SerialPipeline(backend), workers=1, lanes=1)

    async def queued(n: int) -> None:
        """Until ``n`` windows wait for the model (the first call is held at the gate), or 5 s passed
        (before the change, the documents behind the first never got a thread to queue anything)."""
        deadline = time.monotonic() + 5
        while runner.batcher.pending_windows < n and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def main():
        long = [asyncio.ensure_future(runner.segment((f"long{k}", 40))) for k in range(3)]
        await queued(2)
        short = asyncio.ensure_future(runner.segment(("short", 1)))
        await queued(3)
        backend.gate.set()
        return await short, await asyncio.gather(*long)

    try:
        assert asyncio.run(main()) == ("short", ["long0", "long1", "long2"])
    finally:
        runner.close()
    assert backend.first_call_of("short") <= 4, backend.first_call_of("short")  # before: call 120
    assert sum(len(c) for c in backend.calls) == 121  # every window ran once


def test_a_requests_documents_share_one_ticket_and_at_most_workers_threads(monkeypatch):
    """Over HTTP, the documents of one request are one caller in the batcher (one ticket, one turn), and at
    most ``workers`` of them are under way at once: a request of many documents takes neither every turn
    nor every thread from the ordinary request behind it."""
    from .conftest import needs_serve_extra

    needs_serve_extra()
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import Host, ServeConfig

    host = Host(ServeConfig.of(threads=1)).start()
    seen, running, most = [], [0], [0]
    real = host.runner.segment

    async def segment(text, options=None, ticket=None):
        seen.append(ticket)
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            return await real(text, options, ticket=ticket)
        finally:
            running[0] -= 1

    monkeypatch.setattr(host.runner, "segment", segment)
    try:
        with TestClient(create_app(host=host)) as client:
            body = {"documents": [{"text": f"Document {i}. It has two sentences."} for i in range(9)]}
            r = client.post("/v1/segment", json=body)
            assert r.status_code == 200 and len(r.text.splitlines()) == 9
    finally:
        host.close()
    assert len(seen) == 9 and seen[0] is not None and all(t is seen[0] for t in seen)
    assert most[0] <= host.runner.workers == 2
