"""ONNX export parity: the exported graph gives the torch backend's activations."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from headseg.analysis import TorchBackend, windows_from_text
from headseg.analysis.profile import HeadProfile
from headseg.export.onnx_backend import OnnxBackend
from headseg.export.exporter import export_artifact

TEXT = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground. "
    "Stocks fell sharply in early trading. Analysts blamed rising interest rates and weak demand. "
    "The orchestra played Brahms to a full hall, and the audience stood to applaud."
)


def _profile(loaded, heads):
    info = loaded.info
    return HeadProfile(model_fingerprint=info.fingerprint, heads=heads, weights=[1.0] * len(heads),
                       model_name=info.name, num_layers=info.num_layers, num_heads=info.num_heads)


def _mixed_windows(tokenizer):
    """Windows of several lengths, so that every batch is padded."""
    ws = windows_from_text(TEXT, tokenizer, max_tokens=20)
    ws += windows_from_text(TEXT, tokenizer, max_tokens=48)[:2]
    ws += windows_from_text("Short one.", tokenizer, max_tokens=48)
    lengths = {len(w) for w in ws}
    assert len(lengths) >= 3
    return ws


@pytest.fixture(scope="module")
def tiny_artifact(tiny_bert, tmp_path_factory):
    heads = [(0, 1), (2, 0), (2, 3)]
    out = tmp_path_factory.mktemp("tiny") / "art"
    m = export_artifact(tiny_bert, heads, _profile(tiny_bert, heads).hash(), out, attention=True, norms=True)
    return out, m, heads


@pytest.fixture(scope="module")
def embedded_artifact(embedded, tmp_path_factory):
    # The mix spans layers 1 and 3 so that truncation (4 of 6 layers) is exercised.
    heads = [(1, 4), (3, 0), (3, 11)]
    out = tmp_path_factory.mktemp("emb") / "art"
    m = export_artifact(embedded, heads, _profile(embedded, heads).hash(), out)
    return out, m, heads


def _assert_parity(ref, got, tol=1e-4):
    assert ref.heads == got.heads
    assert ref.z.shape == got.z.shape
    np.testing.assert_array_equal(ref.attention_mask, got.attention_mask)
    assert np.abs(ref.z - got.z).max() <= tol
    # Padded positions are exactly zero in both, so nothing can leak downstream.
    pad = ~got.attention_mask
    assert np.all(got.z[np.broadcast_to(pad[:, None, :, None], got.z.shape)] == 0)


def test_tiny_bert_fp32_parity_padded(tiny_bert, tiny_artifact):
    out, m, heads = tiny_artifact
    ws = _mixed_windows(tiny_bert.tokenizer)
    ref = TorchBackend(tiny_bert).capture(ws, heads=heads, attention=True, norms=True)
    got = OnnxBackend(tiny_bert, out, device="cpu").capture(ws, attention=True, norms=True)
    _assert_parity(ref, got)
    real = ref.attention_mask
    assert np.abs((ref.attn - got.attn) * real[:, None, :, None]).max() <= 1e-5
    assert np.abs((ref.fnorm - got.fnorm) * real[:, None, :]).max() <= 1e-4
    assert m.parity["z_max_abs_error"] <= 1e-4 and m.parity["padded_batch"]


def test_tiny_bert_head_subset_and_order(tiny_bert, tiny_artifact):
    out, _, _ = tiny_artifact
    ws = _mixed_windows(tiny_bert.tokenizer)[:3]
    backend = OnnxBackend(tiny_bert, out, device="cpu")
    full = backend.capture(ws)
    sub = backend.capture(ws, heads=[(2, 3), (0, 1)])
    assert sub.heads == ((0, 1), (2, 3))
    np.testing.assert_array_equal(sub[2, 3], full[2, 3])
    np.testing.assert_array_equal(sub[0, 1], full[0, 1])
    with pytest.raises(Exception, match="not in the exported artifact"):
        backend.capture(ws, heads=[(1, 0)])


def test_bucketing_gives_same_result_as_one_batch(tiny_bert, tiny_artifact):
    out, _, _ = tiny_artifact
    ws = _mixed_windows(tiny_bert.tokenizer)
    one = OnnxBackend(tiny_bert, out, device="cpu", batch_size=64).capture(ws)
    small = OnnxBackend(tiny_bert, out, device="cpu", batch_size=2).capture(ws)
    np.testing.assert_array_equal(one.attention_mask, small.attention_mask)
    assert np.abs(one.z - small.z).max() <= 1e-5


def test_tiny_roberta_fp32_parity(tiny_roberta, tmp_path):
    # RoBERTa derives position ids from the padding, a path BERT does not take.
    heads = [(1, 2), (2, 1)]
    out = tmp_path / "rob"
    export_artifact(tiny_roberta, heads, _profile(tiny_roberta, heads).hash(), out)
    ws = _mixed_windows(tiny_roberta.tokenizer)
    ref = TorchBackend(tiny_roberta).capture(ws, heads=heads, attention=False)
    got = OnnxBackend(tiny_roberta, out, device="cpu").capture(ws)
    _assert_parity(ref, got)


def test_embedded_fp32_parity_padded(embedded, embedded_artifact):
    out, m, heads = embedded_artifact
    ws = _mixed_windows(embedded.tokenizer)
    ref = TorchBackend(embedded).capture(ws, heads=heads, attention=False)
    got = OnnxBackend(embedded, out, device="cpu").capture(ws)
    _assert_parity(ref, got)


def test_embedded_truncation_recorded(embedded_artifact):
    import onnx

    out, m, _ = embedded_artifact
    assert m.layers_exported == 4 and m.num_layers == 6 and m.truncated
    g = onnx.load(str(out / "model.onnx"), load_external_data=False)
    values = {o for n in g.graph.node for o in n.output}
    # Layers 0..2 run whole, layer 3 only through the selected heads' attention.
    assert "l2.ffn_out" in values and "l3.context" in values
    assert not any(v.startswith(("l3.ffn", "l3.attn_out", "l4.", "l5.")) for v in values)


def test_truncated_graph_matches_full_graph(tiny_bert, tmp_path):
    import onnx

    heads = [(0, 2), (1, 1)]
    short = export_artifact(tiny_bert, heads, "x", tmp_path / "short")
    full = export_artifact(tiny_bert, heads, "x", tmp_path / "full", truncate=False)
    assert (short.layers_exported, full.layers_exported) == (2, 3)
    assert full.graph_bytes > short.graph_bytes
    assert "last_hidden_state" in full.outputs and "last_hidden_state" not in short.outputs
    g = onnx.load(str(tmp_path / "short" / "model.onnx"))
    assert not any("upper" in n.name or "lower.1" in n.name for n in g.graph.node)
    ws = _mixed_windows(tiny_bert.tokenizer)
    a = OnnxBackend(tiny_bert, tmp_path / "short", device="cpu").capture(ws)
    b = OnnxBackend(tiny_bert, tmp_path / "full", device="cpu").capture(ws)
    assert np.abs(a.z - b.z).max() <= 1e-5


def test_int8_close_to_torch(tiny_bert, tmp_path):
    logging.getLogger().setLevel(logging.ERROR)
    heads = [(1, 0), (2, 2)]
    out = tmp_path / "int8"
    m = export_artifact(tiny_bert, heads, "h", out, precision="int8")
    assert m.precision == "int8"
    ws = _mixed_windows(tiny_bert.tokenizer)
    ref = TorchBackend(tiny_bert).capture(ws, heads=heads, attention=False)
    got = OnnxBackend(tiny_bert, out, device="cpu").capture(ws)
    real = ref.attention_mask[:, None, :]
    num = (ref.z * got.z).sum(-1)
    cos = num / np.maximum(np.linalg.norm(ref.z, axis=-1) * np.linalg.norm(got.z, axis=-1), 1e-12)
    # Quantised, so not equal; but a real approximation, not noise.
    assert np.median(cos[np.broadcast_to(real, cos.shape)]) > 0.95
    assert np.abs(ref.z - got.z).max() > 0
    assert 0 < m.parity["z_max_abs_error"] and m.parity["z_min_cosine"] < 1.0


@pytest.mark.parametrize("threads", [1, 2])
def test_int8_windows_run_alone_whatever_the_batch(tiny_bert, tmp_path, threads):
    """An int8 graph runs each window in its own call: a batch gives exactly each window's own result."""
    heads = [(1, 0), (2, 2)]
    out = tmp_path / "int8"
    export_artifact(tiny_bert, heads, "h", out, precision="int8", attention=True, norms=True)
    backend = OnnxBackend(tiny_bert, out, device="cpu", threads=threads, batch_size=3)
    assert backend.per_window and backend.precision == "int8"
    # the traits a batcher reads (analysis.capture.CaptureBackend): one call per core side by side
    assert backend.parallel_calls == backend.session.parallel_calls == threads
    fp32 = tmp_path / "fp32"
    export_artifact(tiny_bert, heads, "h", fp32, precision="fp32")
    plain = OnnxBackend(tiny_bert, fp32, device="cpu", threads=threads)
    assert (plain.per_window, plain.parallel_calls, plain.precision) == (False, 1, "fp32")
    ws = _mixed_windows(tiny_bert.tokenizer)
    assert len({len(w) for w in ws}) > 1
    batch = backend.capture(ws, attention=True, norms=True)
    T = max(len(w) for w in ws)
    for i, w in enumerate(ws):
        alone = backend.capture([w], attention=True, norms=True)
        n = len(w)
        np.testing.assert_array_equal(batch.z[i, :, :n], alone.z[0])
        np.testing.assert_array_equal(batch.attn[i, :, :n, :n], alone.attn[0])
        np.testing.assert_array_equal(batch.fnorm[i, :, :n], alone.fnorm[0])
        # padding is zeros, as in a padded batch
        assert not batch.z[i, :, n:].any() and not batch.attn[i, :, n:, :].any() and not batch.attn[i, :, :, n:].any()
        assert batch.z.shape[2] == T and batch.attention_mask[i].sum() == n


def test_fp16_keeps_io_types_and_is_close(tiny_bert, tmp_path):
    import onnx

    heads = [(2, 1)]
    out = tmp_path / "fp16"
    m = export_artifact(tiny_bert, heads, "h", out, precision="fp16")
    g = onnx.load(str(out / "model.onnx"))
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    assert [i.type.tensor_type.elem_type for i in g.graph.input] == [i64, i64]
    assert [o.type.tensor_type.elem_type for o in g.graph.output] == [f32]
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in g.graph.initializer)
    if "not_measured" in m.parity:
        pytest.skip(f"onnxruntime cannot run fp16 here: {m.parity['not_measured']}")
    ws = _mixed_windows(tiny_bert.tokenizer)
    ref = TorchBackend(tiny_bert).capture(ws, heads=heads, attention=False)
    got = OnnxBackend(tiny_bert, out, device="cpu").capture(ws)
    scale = np.abs(ref.z).max()
    assert np.abs(ref.z - got.z).max() <= 1e-2 * scale


def test_segmenter_same_result_with_onnx_backend(tiny_bert, tmp_path):
    from headseg.api import Segmenter

    info = tiny_bert.info
    prof = HeadProfile(model_fingerprint=info.fingerprint, heads=[(0, 1), (1, 2)], weights=[0.5, 0.5],
                       model_name=info.name, num_layers=info.num_layers, num_heads=info.num_heads)
    out = tmp_path / "seg"
    export_artifact(tiny_bert, prof.capture_heads, prof.hash(), out)
    text = TEXT + "\n\n" + TEXT.replace("committee", "board")
    by_torch = Segmenter(model=tiny_bert, profile=prof, backend="torch").segment(text, segments=3)
    by_onnx = Segmenter(model=tiny_bert, profile=prof, backend=OnnxBackend(tiny_bert, out, device="cpu")).segment(
        text, segments=3)
    assert len(by_torch) == 3
    assert by_onnx.boundaries == by_torch.boundaries
    assert "".join(s.text for s in by_onnx) == text
