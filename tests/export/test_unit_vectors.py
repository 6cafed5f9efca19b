"""The engines' pooled unit vectors, checked against pooling recomputed by hand from their own captures."""

from __future__ import annotations

import numpy as np
import pytest

from headseg.analysis import TorchBackend, windows_from_text
from headseg.analysis.errors import HeadsegError
from headseg.analysis.pooling import token_batches
from headseg.export.exporter import export_artifact
from headseg.export.onnx_backend import OnnxBackend

TEXT = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground. "
    "The market opened late, and prices of grain fell."
)
HEADS = [(0, 1), (1, 2), (2, 0), (2, 3)]
WEIGHTS = np.array([0.1, 0.2, 0.3, 0.4])


def _windows(tokenizer):
    """Windows of several lengths, and owners: unit 0 has two windows, unit 2 none (its row must be zero)."""
    ws = windows_from_text(TEXT, tokenizer, max_tokens=12)[:2] + [
        windows_from_text(s, tokenizer, max_tokens=24)[0] for s in TEXT.replace("!", ".").split(". ")[1:5]]
    assert len(ws) == 6 and len({len(w) for w in ws}) >= 3
    return ws, np.array([0, 0, 1, 3, 4, 5])


def _by_hand(acts, windows, owners, weights, share=0.0):
    """Each unit: per head the mean of its windows' content tokens, unit length, times sqrt(weight); with a
    share, the mean of all its windows' last hidden states appended, the parts at sqrt(1-s) and sqrt(s)."""
    units = owners.max() + 1
    out = []
    for u in range(units):
        mine = [b for b in range(len(windows)) if owners[b] == u]
        if not mine:
            out.append(None)
            continue
        parts = []
        for n in range(len(weights)):
            tokens = np.concatenate([acts.z[b, n, : len(windows[b])][~windows[b].special] for b in mine])
            m = tokens.astype(np.float64).mean(axis=0)
            parts.append(m / np.linalg.norm(m) * np.sqrt(weights[n]))
        row = np.concatenate(parts)
        if share:
            h = np.concatenate([acts.hidden[b, : len(windows[b])] for b in mine]).astype(np.float64).mean(axis=0)
            row = np.concatenate([row * np.sqrt(1 - share), h / np.linalg.norm(h) * np.sqrt(share)])
        out.append(row)
    width = len(next(r for r in out if r is not None))
    return np.stack([np.zeros(width) if r is None else r for r in out])


@pytest.mark.parametrize("share", [0.0, 0.3])
def test_torch_unit_vectors_are_the_pooled_capture_in_batches_of_the_token_budget(tiny_bert, share):
    ws, owners = _windows(tiny_bert.tokenizer)
    backend = TorchBackend(tiny_bert)
    acts = backend.capture(ws, heads=HEADS, hidden=share > 0)
    backend.max_batch_tokens = 20  # several forward passes; unit 0's windows in different ones
    passes = token_batches([len(w) for w in ws], 20)
    assert len(passes) > 2 and not any({0, 1} <= set(p) for p in passes)
    got = backend.unit_vectors(ws, owners, HEADS, WEIGHTS, output_weight=share)
    want = _by_hand(acts, ws, owners, WEIGHTS, share)
    assert got.shape == (6, len(HEADS) * tiny_bert.info.head_dim + (tiny_bert.info.hidden_size if share else 0))
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    assert not got[2].any()
    np.testing.assert_allclose(np.linalg.norm(got[[0, 1, 3, 4, 5]], axis=1), 1.0, atol=1e-9)


def test_onnx_unit_vectors_are_its_pooled_capture_and_the_torch_ones(tiny_bert, tmp_path):
    ws, owners = _windows(tiny_bert.tokenizer)
    export_artifact(tiny_bert, HEADS + [(1, 0)], "x", tmp_path / "full", truncate=False)
    backend = OnnxBackend(tiny_bert, tmp_path / "full", device="cpu", batch_size=2)  # several calls
    acts = backend.capture(ws, heads=HEADS, hidden=True)
    got = backend.unit_vectors(ws, owners, HEADS, WEIGHTS, output_weight=0.4)
    np.testing.assert_allclose(got, _by_hand(acts, ws, owners, WEIGHTS, 0.4), atol=1e-9, rtol=0)
    ref = TorchBackend(tiny_bert).unit_vectors(ws, owners, HEADS, WEIGHTS, output_weight=0.4)
    assert np.abs(got - ref).max() <= 1e-5


def test_unit_vectors_refuse_what_they_cannot_align(tiny_bert):
    ws, owners = _windows(tiny_bert.tokenizer)
    backend = TorchBackend(tiny_bert)
    with pytest.raises(HeadsegError, match="capture order"):
        backend.unit_vectors(ws, owners, HEADS[::-1], WEIGHTS)
    with pytest.raises(HeadsegError, match="one owner per window"):
        backend.unit_vectors(ws, owners[:-1], HEADS, WEIGHTS)
    with pytest.raises(HeadsegError, match="one weight per head"):
        backend.unit_vectors(ws, owners, HEADS, WEIGHTS[:-1])
    with pytest.raises(HeadsegError, match="at least one window"):
        backend.unit_vectors([], np.zeros(0, np.int64), HEADS, WEIGHTS)


def test_token_batches_hold_the_budget_and_every_window_once():
    lengths = [5, 30, 7, 7, 12, 3, 9, 50, 8]
    batches = token_batches(lengths, 24)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 24  # a longer window runs alone
    assert [lengths[b[0]] for b in batches] == sorted(lengths[b[0]] for b in batches)  # shortest first


def test_torch_unit_vectors_on_cuda_pool_on_the_gpu(tiny_bert, monkeypatch):
    """On CUDA the per-token tensors stay on the GPU: the sums the host reads are on the device until the
    end, and the vectors are the CPU's."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU usable by torch")
    from headseg.analysis.pooling import UnitPool

    ws, owners = _windows(tiny_bert.tokenizer)
    ref = TorchBackend(tiny_bert, device="cpu").unit_vectors(ws, owners, HEADS, WEIGHTS, output_weight=0.3)
    seen = []
    real = UnitPool.vectors
    monkeypatch.setattr(UnitPool, "vectors", lambda self, w: (seen.append(self.sums.device.type), real(self, w))[1])
    try:
        got = TorchBackend(tiny_bert, device="cuda").unit_vectors(ws, owners, HEADS, WEIGHTS, output_weight=0.3)
    finally:
        tiny_bert.model.to("cpu")  # the model is the session's: leave it where the other tests want it
    assert seen == ["cuda"]
    assert np.abs(got - ref).max() <= 1e-5
