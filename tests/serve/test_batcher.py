"""The batcher with a recording backend: packing by token budget, rows back to their callers, cancel, errors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from headseg.analysis.capture import HeadActivations
from headseg.analysis.errors import HeadsegError
from headseg.segmenter.batcher import BatchedBackend, Batcher, Cancelled, Ticket, current_ticket


class FakeWindow:
    """A window of ``n`` tokens whose activations encode (caller, position) so rows can be traced."""

    def __init__(self, caller: int, pos: int, n: int):
        self.caller, self.pos, self.n = caller, pos, n

    def __len__(self) -> int:
        return self.n


class RecordingBackend:
    name, device = "fake", "cpu"
    info = None

    def __init__(self, gate: threading.Event | None = None, fail: bool = False):
        self.calls: list[list[FakeWindow]] = []
        self.gate, self.fail = gate, fail

    def capture(self, windows, heads=None, attention=False, norms=False):
        self.calls.append(list(windows))
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise HeadsegError("the graph failed")
        T = max(len(w) for w in windows)
        z = np.zeros((len(windows), 2, T, 3), np.float32)
        mask = np.zeros((len(windows), T), bool)
        for b, w in enumerate(windows):
            z[b, :, : len(w)] = w.caller * 1000 + w.pos  # each real token carries its window's identity
            mask[b, : len(w)] = True
        return HeadActivations(heads=((0, 0), (0, 1)), z=z, attention_mask=mask)


def expected(windows) -> np.ndarray:
    """What the caller must get back: its own rows, padded to its own longest window."""
    T = max(len(w) for w in windows)
    z = np.zeros((len(windows), 2, T, 3), np.float32)
    for b, w in enumerate(windows):
        z[b, :, : len(w)] = w.caller * 1000 + w.pos
    return z


def test_windows_of_concurrent_callers_share_calls_within_the_token_budget():
    gate = threading.Event()
    backend = RecordingBackend(gate)
    batcher = Batcher(backend, max_batch_tokens=100)
    rng = np.random.default_rng(0)
    callers = [[FakeWindow(c, i, int(rng.integers(3, 40))) for i in range(int(rng.integers(1, 9)))]
               for c in range(12)]
    results: dict[int, HeadActivations] = {}

    def work(c):
        results[c] = batcher.capture(callers[c], heads=[(0, 0), (0, 1)])

    threads = [threading.Thread(target=work, args=(c,)) for c in range(12)]
    for t in threads:
        t.start()
    total = sum(len(w) for w in callers)
    deadline = time.monotonic() + 10
    while batcher.pending_windows + sum(len(c) for c in backend.calls) < total and time.monotonic() < deadline:
        time.sleep(0.01)  # every caller has queued its windows (the first call is held at the gate)
    gate.set()
    for t in threads:
        t.join(10)
    batcher.close()
    for c, windows in enumerate(callers):
        np.testing.assert_array_equal(results[c].z, expected(windows))
        assert results[c].attention_mask.sum() == sum(len(w) for w in windows)
    for call in backend.calls:
        assert len(call) == 1 or sum(len(w) for w in call) <= 100
    assert any(len({w.caller for w in call}) > 1 for call in backend.calls), "no call mixed callers"
    ran = sorted((w.caller, w.pos) for call in backend.calls for w in call)
    assert ran == sorted((w.caller, w.pos) for ws in callers for w in ws)  # each window ran exactly once


def test_a_window_over_the_budget_runs_alone():
    backend = RecordingBackend()
    batcher = Batcher(backend, max_batch_tokens=10)
    acts = batcher.capture([FakeWindow(1, 0, 30), FakeWindow(1, 1, 5)])
    batcher.close()
    assert [len(c) for c in backend.calls] == [1, 1]
    np.testing.assert_array_equal(acts.z, expected([FakeWindow(1, 0, 30), FakeWindow(1, 1, 5)]))


def test_a_cancelled_ticket_drops_its_pending_windows_and_raises():
    gate = threading.Event()
    backend = RecordingBackend(gate)
    batcher = Batcher(backend, max_batch_tokens=8)
    ticket, errors = Ticket(), []

    def work():
        token = current_ticket.set(ticket)
        try:
            BatchedBackend(batcher).capture([FakeWindow(7, i, 8) for i in range(20)])
        except Cancelled as exc:
            errors.append(exc)
        finally:
            current_ticket.reset(token)

    t = threading.Thread(target=work)
    t.start()
    deadline = time.monotonic() + 10
    while batcher.pending_windows < 19 and time.monotonic() < deadline:
        time.sleep(0.01)
    ticket.cancel()
    t.join(10)
    gate.set()
    batcher.close()
    assert len(errors) == 1
    assert batcher.pending_windows == 0
    assert len(backend.calls) <= 2  # the one held at the gate, at most one more: the other 18 never ran


def test_a_cancelled_ticket_gets_no_model_time():
    backend = RecordingBackend()
    batcher = Batcher(backend)
    ticket = Ticket()
    ticket.cancel()
    with pytest.raises(Cancelled):
        batcher.capture([FakeWindow(7, 0, 3)], ticket=ticket)
    batcher.close()
    assert backend.calls == []


def test_a_failing_call_fails_its_callers_and_the_batcher_serves_on():
    backend = RecordingBackend(fail=True)
    batcher = Batcher(backend)
    with pytest.raises(HeadsegError, match="the graph failed"):
        batcher.capture([FakeWindow(1, 0, 4)])
    backend.fail = False
    np.testing.assert_array_equal(batcher.capture([FakeWindow(2, 0, 4)]).z, expected([FakeWindow(2, 0, 4)]))
    batcher.close()
    with pytest.raises(HeadsegError, match="closed"):
        batcher.capture([FakeWindow(3, 0, 4)])


@pytest.mark.parametrize("budget", [0, -5, True, 2.5])
def test_bad_budget(budget):
    with pytest.raises(HeadsegError, match="max_batch_tokens"):
        Batcher(RecordingBackend(), max_batch_tokens=budget)
