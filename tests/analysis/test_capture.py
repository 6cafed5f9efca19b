"""Per-head capture checked against independent recomputation from the model's own weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headseg.analysis import TorchBackend, context_similarity, windows_from_text
from headseg.analysis.capture import attention_hooks
from headseg.analysis.errors import HeadsegError

TEXT = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground."
)


def _reference(loaded, window):
    """Hidden states entering each layer, and each layer's attention dense output, from a plain forward pass."""
    dense_out = {}
    handles = [
        layer.attention.output.dense.register_forward_hook(
            lambda m, a, o, i=i: dense_out.__setitem__(i, o.detach().double().numpy()[0])
        )
        for i, layer in enumerate(loaded.layers)
    ]
    try:
        with torch.no_grad():
            out = loaded.model(
                input_ids=torch.from_numpy(window.input_ids[None]),
                attention_mask=torch.ones(1, len(window), dtype=torch.long),
                output_hidden_states=True,
            )
    finally:
        for h in handles:
            h.remove()
    hidden = [h.detach().double().numpy()[0] for h in out.hidden_states]
    return hidden, dense_out


def _softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _check_model(loaded, text, tol):
    info = loaded.info
    windows = windows_from_text(text, loaded.tokenizer, max_tokens=48)
    w = windows[0]
    acts = TorchBackend(loaded).capture([w], attention=True, norms=True)
    hidden, dense_out = _reference(loaded, w)
    H, d = info.num_heads, info.head_dim
    for l in range(info.num_layers):
        W = loaded.attention_weights(l)
        x = hidden[l]  # [T, hidden] input to layer l
        q = (x @ W["Wq"] + W["bq"]).reshape(-1, H, d).transpose(1, 0, 2)
        k = (x @ W["Wk"] + W["bk"]).reshape(-1, H, d).transpose(1, 0, 2)
        v = (x @ W["Wv"] + W["bv"]).reshape(-1, H, d).transpose(1, 0, 2)
        a_ref = _softmax(q @ k.transpose(0, 2, 1) / np.sqrt(d))  # [H, T, T]
        z_ref = a_ref @ v  # [H, T, d]
        z = np.stack([acts[l, h][0] for h in range(H)])
        a = acts.attn[0, [acts.index(l, h) for h in range(H)]]
        np.testing.assert_allclose(a, a_ref, atol=tol, rtol=0)
        np.testing.assert_allclose(z, z_ref, atol=tol, rtol=0)
        # concatenated Z times W^O plus bias equals the attention output dense layer
        z_cat = z.transpose(1, 0, 2).reshape(len(w), H * d).astype(np.float64)
        assert np.abs(z_cat @ W["Wo"] + W["bo"] - dense_out[l]).max() <= tol
        # norm decomposition: Σ_h Σ_j α_ij f_h(x_j) + b^O equals the same output
        wo_heads = W["Wo"].reshape(H, d, -1)  # rows of W^O belonging to each head
        f = np.einsum("htd,hdo->hto", v, wo_heads)  # f_h(x_j) [H, T, hidden]
        recon = np.einsum("hij,hjo->io", a_ref, f) + W["bo"]
        assert np.abs(recon - dense_out[l]).max() <= tol
        fnorm = acts.fnorm[0, [acts.index(l, h) for h in range(H)]]
        np.testing.assert_allclose(fnorm, np.linalg.norm(f, axis=-1), rtol=1e-4, atol=tol)


@pytest.mark.slow
def test_embedded_model_matches_recomputation(embedded):
    _check_model(embedded, TEXT, tol=1e-5)


def test_tiny_bert_matches_recomputation(tiny_bert):
    _check_model(tiny_bert, TEXT, tol=1e-5)


def test_tiny_roberta_matches_recomputation(tiny_roberta):
    _check_model(tiny_roberta, TEXT, tol=1e-5)


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta", "embedded"])
def test_padding_changes_nothing(fixture, request):
    loaded = request.getfixturevalue(fixture)
    short = windows_from_text("A short one.", loaded.tokenizer)[0]
    long = windows_from_text(TEXT * 2, loaded.tokenizer, max_tokens=64)[0]
    backend = TorchBackend(loaded)
    alone = backend.capture([short], attention=True, norms=True)
    batch = backend.capture([long, short], attention=True, norms=True)
    t = len(short)
    assert batch.z.shape[2] == len(long) > t
    np.testing.assert_allclose(batch.z[1, :, :t], alone.z[0], atol=1e-5)
    # float32 matmuls of a different batch shape may take another BLAS path: a few ulps of 0.5
    np.testing.assert_allclose(batch.attn[1, :, :t, :t], alone.attn[0], atol=5e-6)
    np.testing.assert_allclose(batch.fnorm[1, :, :t], alone.fnorm[0], rtol=1e-5, atol=1e-5)
    # padded keys get no attention and padded query rows are zeroed
    assert np.abs(batch.attn[1, :, :t, t:]).max() <= 1e-7
    assert np.all(batch.z[1, :, t:] == 0)
    # the unpadded view equals the window alone
    np.testing.assert_allclose(batch.window(1).z[0], alone.z[0], atol=1e-5)


def test_subset_equals_full_capture(tiny_bert):
    w = windows_from_text(TEXT, tiny_bert.tokenizer)[0]
    backend = TorchBackend(tiny_bert)
    full = backend.capture([w], attention=True)
    subset = backend.capture([w], heads=[(1, 2), (0, 3)], attention=True)
    assert subset.heads == ((0, 3), (1, 2))
    np.testing.assert_array_equal(subset[1, 2], full[1, 2])
    np.testing.assert_array_equal(subset.attn[:, 0], full.attn[:, full.index(0, 3)])
    grid = full.grid(0, 3, 4)
    np.testing.assert_array_equal(grid[1, 2], full[1, 2][0])
    with pytest.raises(HeadsegError):
        subset[2, 0]
    with pytest.raises(HeadsegError):
        backend.capture([w], heads=[(3, 0)])
    with pytest.raises(HeadsegError):
        backend.capture([w], heads=[])


def test_hooks_are_removed_even_on_error(tiny_bert):
    layer = tiny_bert.layers[0].attention.self
    before = len(layer._forward_hooks)
    with pytest.raises(RuntimeError):
        with attention_hooks(tiny_bert, [0, 1], {}):
            assert len(layer._forward_hooks) == before + 1
            raise RuntimeError("boom")
    assert len(layer._forward_hooks) == before
    # and after a normal capture too
    # (transformers 5 keeps hooks of its own on these modules: count ours, not all)
    counts = [len(l.attention.self._forward_hooks) for l in tiny_bert.layers]
    TorchBackend(tiny_bert).capture(windows_from_text(TEXT, tiny_bert.tokenizer)[:1])
    assert [len(l.attention.self._forward_hooks) for l in tiny_bert.layers] == counts


def test_similarity_symmetric_zero_diagonal_and_definition(tiny_bert):
    w = windows_from_text(TEXT, tiny_bert.tokenizer)[0]
    acts = TorchBackend(tiny_bert).capture([w, w])
    z = acts.z[0, 5]
    s = context_similarity(z)
    assert np.allclose(s, s.T)
    assert np.all(np.diag(s) == 0)
    ref = z.astype(np.float64) @ z.astype(np.float64).T
    np.fill_diagonal(ref, 0)
    np.testing.assert_allclose(s, ref, rtol=1e-5, atol=1e-5)
    c = context_similarity(z, cosine=True)
    zn = z / np.linalg.norm(z, axis=1, keepdims=True)
    ref_c = zn @ zn.T
    np.fill_diagonal(ref_c, 0)
    np.testing.assert_allclose(c, ref_c, atol=1e-5)
    # a mask zeroes padded rows and columns and keeps the rest
    mask = np.ones(len(w), bool)
    mask[-3:] = False
    sm = context_similarity(z, mask=mask)
    assert np.all(sm[-3:] == 0) and np.all(sm[:, -3:] == 0)
    np.testing.assert_allclose(sm[:-3, :-3], s[:-3, :-3])


def test_concurrent_captures_on_one_model_equal_sequential_ones(tiny_bert):
    """The hooks live on the shared model: captures from several threads at once (two backends over one
    model, as two Segmenters sharing a LoadedModel have) must each get their own windows' vectors."""
    from concurrent.futures import ThreadPoolExecutor

    batches = [windows_from_text(TEXT * (1 + i % 3), tiny_bert.tokenizer, max_tokens=16 + 8 * (i % 4))[: 1 + i % 4]
               for i in range(8)]
    backends = [TorchBackend(tiny_bert), TorchBackend(tiny_bert)]
    expected = [backends[0].capture(b).z for b in batches]

    def run(i: int) -> np.ndarray:
        return backends[i % 2].capture(batches[i % len(batches)]).z

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(run, range(8 * len(batches))))
    for i, z in enumerate(got):
        np.testing.assert_array_equal(z, expected[i % len(batches)])
