"""The model's own output embedding beside the topic heads (``HeadProfile.topic_output_weight``).

Checked against independent recomputation: the captured last hidden states
are the model's forward output, the ONNX engine's equal torch's, and a unit
vector is the heads' pooled vectors and the mean-pooled, normalised output
mixed at the profile's share.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headseg.analysis import TorchBackend, windows_from_text
from headseg.analysis.errors import ArtifactError, ProfileError
from headseg.analysis.profile import HeadProfile, resolve_profile
from headseg.analysis.text import tokenize
from headseg.export.onnx_backend import OnnxBackend
from headseg.export.exporter import export_artifact

TEXT = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground. "
    "Stocks fell sharply in early trading. Analysts blamed rising interest rates and weak demand."
)


def _profile(loaded, output_weight=0.0):
    info = loaded.info
    return HeadProfile(model_fingerprint=info.fingerprint, heads=[(0, 1), (1, 2)], weights=[0.5, 0.5],
                       model_name=info.name, num_layers=info.num_layers, num_heads=info.num_heads,
                       topic_output_weight=output_weight)


def _windows(tokenizer):
    ws = windows_from_text(TEXT, tokenizer, max_tokens=20) + windows_from_text("Short one.", tokenizer, max_tokens=48)
    assert len({len(w) for w in ws}) >= 2  # a padded batch
    return ws


def _forward_output(loaded, window) -> np.ndarray:
    """The encoder's output for one window alone, by a plain forward pass."""
    with torch.no_grad():
        out = loaded.model(input_ids=torch.from_numpy(window.input_ids[None]),
                           attention_mask=torch.ones(1, len(window), dtype=torch.long))
    return out.last_hidden_state[0].double().numpy()


def test_torch_capture_returns_the_models_output(tiny_bert):
    ws = _windows(tiny_bert.tokenizer)
    backend = TorchBackend(tiny_bert)
    acts = backend.capture(ws, heads=[(0, 1), (1, 2)], hidden=True)
    plain = backend.capture(ws, heads=[(0, 1), (1, 2)])
    assert plain.hidden is None
    # running the whole encoder changes nothing the heads give
    np.testing.assert_array_equal(acts.z, plain.z)
    assert acts.hidden.shape == (len(ws), max(map(len, ws)), tiny_bert.info.hidden_size)
    for b, w in enumerate(ws):
        np.testing.assert_allclose(acts.hidden[b, : len(w)], _forward_output(tiny_bert, w), atol=1e-5, rtol=0)
        assert not acts.hidden[b, len(w):].any()  # padding is zero
        np.testing.assert_array_equal(acts.window(b).hidden[0], acts.hidden[b, : len(w)])


def test_onnx_output_equals_torch_and_a_truncated_graph_has_none(tiny_bert, tmp_path):
    ws = _windows(tiny_bert.tokenizer)
    heads = [(0, 1), (1, 2)]
    export_artifact(tiny_bert, heads, "x", tmp_path / "full", truncate=False)
    export_artifact(tiny_bert, heads, "x", tmp_path / "short")
    ref = TorchBackend(tiny_bert).capture(ws, heads=heads, hidden=True)
    got = OnnxBackend(tiny_bert, tmp_path / "full", device="cpu").capture(ws, heads=heads, hidden=True)
    assert np.abs(ref.hidden - got.hidden).max() <= 1e-4
    assert not got.hidden[~got.attention_mask].any()
    with pytest.raises(ArtifactError, match="no-truncate"):
        OnnxBackend(tiny_bert, tmp_path / "short", device="cpu").capture(ws, heads=heads, hidden=True)


def test_unit_vectors_mix_the_heads_and_the_output_at_the_share(tiny_bert):
    from headseg.api import Segmenter

    share = 0.3
    mixed = Segmenter(model=tiny_bert, profile=_profile(tiny_bert, share), backend="torch")
    heads_only = Segmenter(model=tiny_bert, profile=_profile(tiny_bert), backend="torch")
    doc = tokenize(TEXT, tiny_bert.tokenizer)
    units = mixed.units(TEXT, doc=doc, mode="rules")
    x = mixed.unit_vectors(doc, units)
    h = heads_only.unit_vectors(doc, units)
    D = tiny_bert.info.hidden_size
    assert x.shape == (len(units), h.shape[1] + D)
    np.testing.assert_allclose(x[:, :-D], h * math.sqrt(1 - share), atol=1e-12)
    # the output part: each unit alone, all its window's last hidden states ([CLS], [SEP] too) averaged, unit length
    for u, (a, b) in enumerate(units):
        ws = windows_from_text(TEXT[a:b], tiny_bert.tokenizer, max_tokens=128)
        assert len(ws) == 1
        w = ws[0]
        assert w.special.sum() == 2
        mean = _forward_output(tiny_bert, w).mean(axis=0)
        np.testing.assert_allclose(x[u, -D:], mean / np.linalg.norm(mean) * math.sqrt(share), atol=1e-5)
    # so a dot product is (1 - s) · the heads' weighted cosine + s · the outputs' cosine
    cos_out = (x[:, -D:] @ x[:, -D:].T) / share
    np.testing.assert_allclose(x @ x.T, (1 - share) * (h @ h.T) + share * cos_out, atol=1e-10)


def test_segmenter_with_an_output_share_gives_the_same_cuts_on_onnx_and_torch(tiny_bert, tiny_bert_dir, tmp_path,
                                                                             monkeypatch):
    from headseg.export.provision import onnx_backend
    from headseg.api import Segmenter

    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    prof = _profile(tiny_bert, 0.4)
    backend = onnx_backend(tiny_bert, prof, "cpu", None, "fp32", True, None, True, export_in_memory=True)
    assert not backend.manifest.truncated and "last_hidden_state" in backend.session.output_names
    text = TEXT + "\n\n" + TEXT.replace("committee", "board")
    by_torch = Segmenter(model=tiny_bert, profile=prof, backend="torch").segment(text, segments=3)
    by_onnx = Segmenter(model=tiny_bert, profile=prof, backend=backend).segment(text, segments=3)
    assert by_onnx.boundaries == by_torch.boundaries and len(by_onnx) == 3
    # an artifact that stops at the deepest head cannot serve that profile
    from headseg.export.provision import open_for_profile

    export_artifact(tiny_bert, prof.capture_heads, prof.hash(), tmp_path / "short")
    with pytest.raises(ArtifactError, match="last hidden states"):
        open_for_profile(tiny_bert, tmp_path / "short", "cpu", prof)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), "much"])
def test_an_output_share_outside_0_1_is_refused(tiny_bert, bad):
    with pytest.raises(ProfileError, match="topic_output_weight"):
        _profile(tiny_bert, bad)


def test_the_share_round_trips_and_leaves_older_profiles_keys_alone(tiny_bert, tmp_path):
    plain = _profile(tiny_bert)
    assert "topic_output_weight" not in plain.to_dict()
    # a profile written before the field existed keeps its artifact key
    assert HeadProfile.from_dict(plain.to_dict()).hash() == plain.hash()
    mixed = _profile(tiny_bert, 0.25)
    mixed.save(tmp_path / "p.json")
    back = HeadProfile.load(tmp_path / "p.json")
    assert back.topic_output_weight == 0.25 and back.needs_output and not plain.needs_output
    assert back.hash() == mixed.hash() != plain.hash()


def test_the_embedded_models_profile_gives_its_output_a_share(embedded):
    prof = resolve_profile(embedded.info)
    assert prof.topic_output_weight == 0.4


def test_the_batcher_hands_each_caller_its_own_output_rows(tiny_bert):
    from headseg.export.batcher import BatchedBackend, Batcher

    ws = _windows(tiny_bert.tokenizer)
    inner = TorchBackend(tiny_bert)
    ref = inner.capture(ws, heads=[(1, 2)], hidden=True)
    batcher = Batcher(inner, max_batch_tokens=40)  # several calls, windows of other lengths beside
    try:
        got = BatchedBackend(batcher).capture(ws, heads=[(1, 2)], hidden=True)
        plain = BatchedBackend(batcher).capture(ws, heads=[(1, 2)])
    finally:
        batcher.close()
    assert plain.hidden is None
    np.testing.assert_array_equal(got.attention_mask, ref.attention_mask)
    assert np.abs(got.hidden - ref.hidden).max() <= 1e-5 and np.abs(got.z - ref.z).max() <= 1e-5
