"""The CUDA path of the onnxruntime backend; runs only where onnxruntime can use a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from headseg.analysis import TorchBackend, windows_from_text
from headseg.export.backends import make_backend
from headseg.export.onnx_backend import OnnxBackend
from headseg.export.runtime import cuda_provider_works
from headseg.export.exporter import export_artifact

pytestmark = pytest.mark.skipif(not cuda_provider_works(), reason="no CUDA GPU usable by onnxruntime")

TEXT = ("The committee met on Monday. It approved the budget, after a long debate! "
        "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground.")


def _windows(tok):
    ws = windows_from_text(TEXT, tok, max_tokens=16) + windows_from_text(TEXT, tok, max_tokens=40)[:1]
    assert len({len(w) for w in ws}) >= 2
    return ws


@pytest.mark.parametrize("model", ["tiny_bert", "embedded"])
def test_cuda_fp32_parity_and_provider(request, model, tmp_path):
    loaded = request.getfixturevalue(model)
    heads = [(0, 1), (loaded.info.num_layers - 1, 2)]
    out = tmp_path / "fp32"
    m = export_artifact(loaded, heads, "h", out, parity_device="cuda")
    assert m.parity["device"] == "cuda"
    backend = OnnxBackend(loaded, out, device="cuda")
    # Really on the GPU, not silently on CPU.
    assert backend.device == "cuda" and backend.session.providers[0] == "CUDAExecutionProvider"
    ws = _windows(loaded.tokenizer)
    ref = TorchBackend(loaded, device="cpu").capture(ws, heads=heads, attention=False)
    got = backend.capture(ws)
    np.testing.assert_array_equal(ref.attention_mask, got.attention_mask)
    assert np.abs(ref.z - got.z).max() <= 1e-4


def test_cuda_fp16_close_and_auto_prefers_it(tiny_bert, tmp_path, monkeypatch):
    from headseg.analysis.profile import HeadProfile
    from headseg.export.artifact import cache_dir

    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path))
    info = tiny_bert.info
    prof = HeadProfile(model_fingerprint=info.fingerprint, heads=[(2, 1)], weights=[1.0])
    where = cache_dir(info.fingerprint, prof.hash(), "fp16")
    export_artifact(tiny_bert, prof.heads, prof.hash(), where, precision="fp16", parity_device="cuda")
    backend = make_backend(tiny_bert, prof, backend="auto")
    assert isinstance(backend, OnnxBackend) and backend.device == "cuda" and backend.precision == "fp16"
    ws = _windows(tiny_bert.tokenizer)
    ref = TorchBackend(tiny_bert).capture(ws, heads=prof.heads, attention=False)
    got = backend.capture(ws)
    assert np.abs(ref.z - got.z).max() <= 1e-2 * np.abs(ref.z).max()
