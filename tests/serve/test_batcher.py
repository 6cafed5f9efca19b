"""The batcher with a recording backend: packing by token budget, rows back to their callers, cancel, errors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from headseg.analysis.capture import HeadActivations
from headseg.analysis.errors import HeadsegError
from headseg.analysis.capture import DEFAULT_MAX_BATCH_TOKENS
from headseg.export.batcher import BatchedBackend, Batcher, Cancelled, Ticket, current_ticket


class FakeWindow:
    """A window of ``n`` tokens whose activations encode (caller, position) so rows can be traced."""

    def __init__(self, caller: int, pos: int, n: int):
        self.caller, self.pos, self.n = caller, pos, n

    def __len__(self) -> int:
        return self.n


class RecordingBackend:
    """A capture backend (the protocol's traits included) that records the windows of each call."""

    name, device, precision = "fake", "cpu", None
    per_window, parallel_calls, max_batch_tokens = False, 1, DEFAULT_MAX_BATCH_TOKENS
    info = None

    def __init__(self, gate: threading.Event | None = None, fail: bool = False):
        self.calls: list[list[FakeWindow]] = []
        self.gate, self.fail = gate, fail

    def _enter(self, windows) -> None:
        self.calls.append(list(windows))
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise HeadsegError("the graph failed")

    def unit_vectors(self, windows, owners, heads, weights, output_weight=0.0):
        """Row ``u``: (callers, positions, tokens) of unit ``u``'s windows, summed: a unit split over two
        calls would come back with a partial row."""
        self._enter(windows)
        rows = np.zeros((int(np.max(owners)) + 1, 3))
        for w, u in zip(windows, owners):
            rows[u] += (w.caller, w.pos, len(w))
        return rows

    def capture(self, windows, heads=None, attention=False, norms=False):
        self._enter(windows)
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


def pooled(windows, owners) -> np.ndarray:
    """What a unit caller must get back: one row per unit, over all its windows (zero for a unit without)."""
    rows = np.zeros((max(owners) + 1, 3))
    for w, u in zip(windows, owners):
        rows[u] += (w.caller, w.pos, len(w))
    return rows


def test_units_of_concurrent_callers_come_back_pooled_and_whole():
    gate = threading.Event()
    backend = RecordingBackend(gate)
    batcher = Batcher(backend, max_batch_tokens=60)
    rng = np.random.default_rng(1)
    callers = []
    for c in range(10):
        owners = np.sort(rng.integers(0, 6, size=int(rng.integers(1, 10))))
        callers.append(([FakeWindow(c, i, int(rng.integers(3, 25))) for i in range(len(owners))], owners))
    results: dict[int, np.ndarray] = {}

    def work(c):
        windows, owners = callers[c]
        results[c] = BatchedBackend(batcher).unit_vectors(windows, owners, [(0, 0)], np.ones(1))

    threads = [threading.Thread(target=work, args=(c,)) for c in range(10)]
    for t in threads:
        t.start()
    total = sum(len(w) for w, _ in callers)
    deadline = time.monotonic() + 10
    while batcher.pending_windows + sum(len(c) for c in backend.calls) < total and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    for t in threads:
        t.join(10)
    batcher.close()
    for c, (windows, owners) in enumerate(callers):
        np.testing.assert_array_equal(results[c], pooled(windows, owners))
    assert any(len({w.caller for w in call}) > 1 for call in backend.calls), "no call mixed callers"
    for call in backend.calls:
        units = {(w.caller, int(callers[w.caller][1][w.pos])) for w in call}
        # a call is within the budget unless it is one unit alone
        assert len(units) == 1 or sum(len(w) for w in call) <= 60
    ran = sorted((w.caller, w.pos) for call in backend.calls for w in call)
    assert ran == sorted((w.caller, w.pos) for ws, _ in callers for w in ws)  # each window ran exactly once


def test_a_unit_over_the_budget_runs_alone_and_whole():
    backend = RecordingBackend()
    batcher = Batcher(backend, max_batch_tokens=10)
    windows = [FakeWindow(1, 0, 8), FakeWindow(1, 1, 8), FakeWindow(1, 2, 3)]
    got = batcher.unit_vectors(windows, np.array([0, 0, 2]), [(0, 0)], np.ones(1))
    batcher.close()
    assert [[w.pos for w in c] for c in backend.calls] == [[0, 1], [2]]
    np.testing.assert_array_equal(got, pooled(windows, [0, 0, 2]))


def test_the_batcher_carries_pooled_rows_fewer_floats_by_the_tokens_per_unit(tiny_bert):
    """Before, a unit caller got its windows' per-token rows ``[N, t, d]`` (then averaged them away); now
    one pooled row ``[N·d]`` per unit: the floats carried fall by the tokens per unit, Σ t / U."""
    from headseg.analysis import TorchBackend, windows_from_text

    text = "The committee met on Monday. It approved the budget, after a long debate! Rain fell all night. "
    windows = [w for s in text.split(". ") for w in windows_from_text(s, tiny_bert.tokenizer, max_tokens=10)]
    owners = np.array([0, 0, 1, 1, 2][: len(windows)] + list(range(3, len(windows) - 2)))
    heads, weights = [(1, 0), (2, 3)], np.array([0.5, 0.5])
    inner = TorchBackend(tiny_bert)
    batcher = Batcher(inner, max_batch_tokens=20)
    try:
        batcher.capture(windows, heads=heads)
        per_token = batcher.floats_carried
        got = batcher.unit_vectors(windows, owners, heads, weights)
        pooled_rows = batcher.floats_carried - per_token
    finally:
        batcher.close()
    n_d, units = len(heads) * tiny_bert.info.head_dim, owners.max() + 1
    tokens = sum(len(w) for w in windows)
    assert per_token == tokens * n_d and pooled_rows == units * n_d
    assert per_token / pooled_rows == tokens / units > 5
    np.testing.assert_allclose(got, inner.unit_vectors(windows, owners, heads, weights), atol=1e-6, rtol=0)


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


class PerWindowBackend(RecordingBackend):
    """A backend like an int8 graph on CPU: each window its own call, ``parallel`` calls at once; a window
    whose caller is in ``hold`` waits for the gate."""

    per_window = True

    def __init__(self, parallel: int, hold=(), gate: threading.Event | None = None):
        super().__init__()
        self.parallel_calls = parallel
        self.hold, self.held = set(hold), threading.Event()
        self.release = gate or threading.Event()
        self._lock = threading.Lock()
        self.running = self.peak = 0

    def capture(self, windows, heads=None, attention=False, norms=False):
        return self._counted(windows, lambda: super(PerWindowBackend, self).capture(windows, heads, attention, norms))

    def unit_vectors(self, windows, owners, heads, weights, output_weight=0.0):
        return self._counted(windows, lambda: super(PerWindowBackend, self).unit_vectors(windows, owners, heads,
                                                                                        weights))

    def _counted(self, windows, call):
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            if any(w.caller in self.hold for w in windows):
                self.held.set()
                self.release.wait(10)
            return call()
        finally:
            with self._lock:
                self.running -= 1


def start_caller(batcher: Batcher, windows, ticket: Ticket) -> tuple[threading.Thread, list]:
    """A started thread capturing ``windows`` under ``ticket``, and the list it puts its Cancelled in."""
    errors: list = []

    def work():
        try:
            batcher.capture(windows, ticket=ticket)
        except Cancelled as exc:
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    return t, errors


def test_backend_lanes_follow_the_backend():
    from headseg.export.batcher import backend_lanes

    assert backend_lanes(RecordingBackend()) == 1  # a batching backend: one lane packs by the budget
    assert backend_lanes(PerWindowBackend(3)) == 3
    assert backend_lanes(PerWindowBackend(1)) == 1
    batcher = Batcher(PerWindowBackend(3))
    assert (batcher.lanes, batcher.single) == (3, True)
    batcher.close()
    batcher = Batcher(RecordingBackend(), lanes=2)  # lanes asked of a batching backend: each packs
    assert (batcher.lanes, batcher.single) == (2, False)
    batcher.close()
    with pytest.raises(HeadsegError, match="lanes"):
        Batcher(RecordingBackend(), lanes=0)


def test_lanes_run_single_windows_side_by_side_and_each_caller_gets_its_rows():
    backend = PerWindowBackend(2)
    batcher = Batcher(backend, max_batch_tokens=10_000)
    callers = [[FakeWindow(c, i, 3 + (c * 7 + i) % 20) for i in range(6)] for c in range(8)]
    results: dict[int, HeadActivations] = {}
    threads = [threading.Thread(target=lambda c=c: results.__setitem__(c, batcher.capture(callers[c])))
               for c in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    batcher.close()
    assert all(len(call) == 1 for call in backend.calls)  # never packed: each window its own call
    assert sorted((call[0].caller, call[0].pos) for call in backend.calls) == \
        sorted((w.caller, w.pos) for ws in callers for w in ws)  # each window ran exactly once
    for c, windows in enumerate(callers):
        np.testing.assert_array_equal(results[c].z, expected(windows))
    assert backend.peak <= 2


def test_lanes_take_a_unit_whole_and_each_caller_gets_its_pooled_rows():
    backend = PerWindowBackend(2)
    batcher = Batcher(backend)
    callers = [([FakeWindow(c, i, 3 + (c + i) % 9) for i in range(5)], np.array([0, 0, 1, 3, 3])) for c in range(6)]
    results: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda c=c: results.__setitem__(
        c, batcher.unit_vectors(*callers[c], [(0, 0)], np.ones(1)))) for c in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    batcher.close()
    # one unit per call: its windows together, never another unit's
    assert sorted(tuple(w.pos for w in call) for call in backend.calls) == sorted([(0, 1), (2,), (3, 4)] * 6)
    for c, (windows, owners) in enumerate(callers):
        np.testing.assert_array_equal(results[c], pooled(windows, owners))
    assert backend.peak <= 2


def test_a_slow_window_holds_up_only_its_own_caller():
    """No barrier: while one lane is stuck on caller 0's window, the other lane serves caller 1 to the end."""
    backend = PerWindowBackend(2, hold={0})
    batcher = Batcher(backend)
    first = threading.Thread(target=batcher.capture, args=([FakeWindow(0, 0, 5)],))
    first.start()
    assert backend.held.wait(10)
    windows = [FakeWindow(1, i, 4) for i in range(5)]
    acts = batcher.capture(windows)  # returns while caller 0's window is still running
    assert first.is_alive() and backend.running == 1
    np.testing.assert_array_equal(acts.z, expected(windows))
    backend.release.set()
    first.join(10)
    batcher.close()


def test_lanes_drop_a_cancelled_callers_windows():
    gate = threading.Event()
    backend = PerWindowBackend(2, hold={7}, gate=gate)
    batcher = Batcher(backend)
    ticket = Ticket()
    t, errors = start_caller(batcher, [FakeWindow(7, i, 4) for i in range(20)], ticket)
    deadline = time.monotonic() + 10
    while (backend.running < 2 or batcher.pending_windows < 18) and time.monotonic() < deadline:
        time.sleep(0.01)
    ticket.cancel()
    t.join(10)
    gate.set()
    batcher.close()
    assert len(errors) == 1 and batcher.pending_windows == 0
    assert len(backend.calls) == 2  # the two held in the lanes; the other 18 never ran


def test_the_lanes_count_their_busy_and_waiting_time():
    batcher = Batcher(PerWindowBackend(2))
    assert batcher.busy_seconds == 0.0
    waited = batcher.waiting_seconds
    batcher.capture([FakeWindow(1, i, 4) for i in range(4)])
    busy = batcher.busy_seconds
    assert busy > 0.0 and batcher.waiting_seconds > waited  # an idle lane's wait counts while it lasts
    batcher.close()


@pytest.mark.parametrize("per_window", [False, True], ids=["budget", "single"])
def test_a_lane_that_drains_only_cancelled_windows_serves_on(monkeypatch, per_window):
    """The lanes, not the caller, find the cancelled windows (the caller's own drop is switched off here,
    as when a client goes away between two of its polls): every lane must stay up for the next caller."""
    gate = threading.Event()
    backend = PerWindowBackend(2, hold={0}, gate=gate) if per_window else RecordingBackend(gate)
    batcher = Batcher(backend, max_batch_tokens=100)
    monkeypatch.setattr(batcher, "drop", lambda ticket: None)
    busy = [threading.Thread(target=batcher.capture, args=([FakeWindow(0, k, 4)],)) for k in range(batcher.lanes)]
    for t in busy:
        t.start()
    deadline = time.monotonic() + 10
    held = (lambda: backend.running) if per_window else (lambda: len(backend.calls))
    while held() < batcher.lanes and time.monotonic() < deadline:
        time.sleep(0.01)  # every lane is held at the gate
    assert held() == batcher.lanes
    ticket = Ticket()
    t, errors = start_caller(batcher, [FakeWindow(7, i, 4) for i in range(3)], ticket)
    while batcher.pending_windows < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    ticket.cancel()
    gate.set()  # the lanes finish their windows and take the cancelled ones
    t.join(10)
    for b in busy:
        b.join(10)
    assert len(errors) == 1 and batcher.pending_windows == 0
    windows = [FakeWindow(9, i, 4) for i in range(4)]
    got: list[HeadActivations] = []
    after = threading.Thread(target=lambda: got.append(batcher.capture(windows)))
    after.start()
    after.join(10)
    alive = after.is_alive()
    batcher.close()
    assert not alive, "no lane left to serve the next caller"
    np.testing.assert_array_equal(got[0].z, expected(windows))


def test_every_engine_declares_the_traits_the_batcher_reads(tiny_bert):
    """The batcher reads per_window / parallel_calls / max_batch_tokens from the capture protocol: each
    engine declares them (a missing one was a silent getattr default before), and a batched backend
    passes its inner backend's on, but runs no calls side by side itself."""
    from headseg.analysis.capture import CaptureBackend, TorchBackend

    torch_backend = TorchBackend(tiny_bert)
    traits = {"name": str, "device": str, "per_window": bool, "parallel_calls": int, "max_batch_tokens": int}
    for backend in (torch_backend, PerWindowBackend(3), RecordingBackend()):
        assert isinstance(backend, CaptureBackend)
        for name, kind in traits.items():
            assert isinstance(getattr(backend, name), kind), (type(backend).__name__, name)
    assert (torch_backend.per_window, torch_backend.parallel_calls, torch_backend.precision) == (False, 1, None)
    inner = PerWindowBackend(3)
    batcher = Batcher(inner, max_batch_tokens=99)
    try:
        shared = BatchedBackend(batcher)
        assert isinstance(shared, CaptureBackend)
        assert (shared.name, shared.device, shared.precision, shared.per_window) == ("fake", "cpu", None, True)
        assert (shared.parallel_calls, shared.max_batch_tokens) == (1, 99)
    finally:
        batcher.close()
