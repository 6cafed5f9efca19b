"""``--backend auto`` on a GPU host whose onnxruntime has no CUDA provider: the engine chosen, and the line said.

No GPU here: torch's view of one and onnxruntime's providers are replaced by
mocks; the rule itself (:func:`headseg.export.policy.choose_engine`) is checked
on every branch, then through ``make_backend`` and the command line.
"""

from __future__ import annotations

import importlib.machinery
import logging
import sys
import types

import pytest

from headseg.analysis.capture import TorchBackend
from headseg.export import backends, policy
from headseg.export.onnx_backend import OnnxBackend
from headseg.analysis.errors import ArtifactError
from headseg.export.policy import GpuMeasurement, choose_engine

GPU = "NVIDIA H200"
#: torch-CUDA 100k document tokens/s; ONNX int8 10k per core: torch wins below 10 cores
MEASURED = GpuMeasurement(gpu=GPU, torch_cuda_tokens_per_s=100_000.0, onnx_int8_tokens_per_s_per_core=10_000.0,
                          cores=16)


def test_no_gpu_for_torch_keeps_the_plain_rule():
    assert choose_engine("auto", None, 16) is None
    assert choose_engine("cuda", None, 16, measured=MEASURED) is None


def test_cuda_asked_for_is_served_by_torch_when_onnxruntime_cannot():
    c = choose_engine("cuda", GPU, 16)
    assert (c.backend, c.device) == ("torch", "cuda")
    assert GPU in c.reason and "no CUDA provider" in c.reason


def test_unmeasured_keeps_onnx_int8_on_the_cpu_and_says_how_to_use_the_gpu():
    for device in ("auto", None):
        c = choose_engine(device, GPU, 16)
        assert (c.backend, c.device) == ("onnx", "cpu")
        assert "ONNX int8 on the CPU" in c.reason and "not measured" in c.reason
        assert "--backend torch --device cuda" in c.reason and "\n" not in c.reason


def test_measured_choice_scales_the_onnx_figure_with_the_cores():
    # 100k vs 10k per core: torch on 8 cores (80k), ONNX on 12 (120k)
    few = choose_engine("auto", GPU, 8, measured=MEASURED)
    many = choose_engine("auto", GPU, 12, measured=MEASURED)
    assert (few.backend, few.device) == ("torch", "cuda")
    assert (many.backend, many.device) == ("onnx", "cpu")
    assert "80,000" in few.reason and "100,000" in few.reason
    assert "120,000" in many.reason and "12 cores" in many.reason


def test_a_precision_only_onnx_serves_stays_on_onnx():
    for p in ("int8", "fp16"):
        c = choose_engine("auto", GPU, 2, precision=p, measured=MEASURED)
        assert (c.backend, c.device) == ("onnx", "cpu") and p in c.reason
    c = choose_engine("auto", GPU, 2, precision="fp32", measured=MEASURED)
    assert c.backend == "torch"  # torch runs fp32


def test_torch_gpu_name_imports_no_torch_without_a_driver(monkeypatch):
    monkeypatch.setattr(policy, "cuda_driver_loads", lambda: False)
    monkeypatch.setitem(sys.modules, "torch", None)  # an import of torch would now raise
    assert policy.torch_gpu_name() is None


def test_torch_gpu_name_reads_torch_where_the_driver_loads(monkeypatch):
    fake = types.ModuleType("torch")
    fake.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    fake.cuda = types.SimpleNamespace(is_available=lambda: True, get_device_name=lambda i: f"Fake GPU {i}")
    monkeypatch.setattr(policy, "cuda_driver_loads", lambda: True)
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert policy.torch_gpu_name() == "Fake GPU 0"
    fake.cuda.is_available = lambda: False
    assert policy.torch_gpu_name() is None

    def broken():
        raise RuntimeError("CUDA driver initialization failed")

    fake.cuda.is_available = broken
    assert policy.torch_gpu_name() is None


@pytest.fixture
def gpu_host(monkeypatch):
    """A host where torch sees an H200 and onnxruntime has no CUDA provider; returns the torch calls made."""
    monkeypatch.setattr(policy, "torch_gpu_name", lambda: GPU)
    monkeypatch.setattr(backends, "cuda_provider_works", lambda: False)
    calls = []

    def fake_torch(loaded, profile, **kw):
        calls.append(kw)
        return TorchBackend(loaded, device="cpu")  # no GPU here: the CPU stands in for the device chosen

    monkeypatch.setattr(backends, "_torch_backend", fake_torch)
    return calls


def _records(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "headseg"]


def test_make_backend_auto_serves_onnx_on_cpu_unmeasured_and_says_so(tiny_bert_dir, gpu_host, caplog, monkeypatch):
    from headseg.analysis import load_model
    from headseg.analysis.profile import fallback_profile

    monkeypatch.setattr(policy, "GPU_MEASUREMENT", None)
    loaded = load_model(str(tiny_bert_dir), weights=False)
    with caplog.at_level(logging.INFO, logger="headseg"):
        b = backends.make_backend(loaded, fallback_profile(loaded.info), backend="auto", device="auto")
    assert isinstance(b, OnnxBackend) and (b.device, b.precision) == ("cpu", "int8")
    assert not gpu_host
    said = [m for m in _records(caplog) if "not torch on the GPU" in m]
    assert len(said) == 1 and GPU in said[0]


def test_make_backend_auto_serves_torch_on_cuda_when_measured_faster(tiny_bert, gpu_host, caplog, monkeypatch):
    from headseg.analysis.profile import fallback_profile

    monkeypatch.setattr(policy, "GPU_MEASUREMENT", MEASURED)
    monkeypatch.setattr(policy, "host_cores", lambda: 2)
    with caplog.at_level(logging.INFO, logger="headseg"):
        b = backends.make_backend(tiny_bert, fallback_profile(tiny_bert.info), backend="auto")
    assert b.name == "torch" and [c["device"] for c in gpu_host] == ["cuda"]
    assert [m for m in _records(caplog) if m.startswith("serving with torch on CUDA")] == [
        policy.choose_engine("auto", GPU, 2, measured=MEASURED).reason]


def test_quiet_says_nothing(tiny_bert, gpu_host, caplog, monkeypatch):
    from headseg.analysis.profile import fallback_profile

    monkeypatch.setattr(policy, "GPU_MEASUREMENT", MEASURED)
    monkeypatch.setattr(policy, "host_cores", lambda: 2)
    with caplog.at_level(logging.INFO, logger="headseg"):
        backends.make_backend(tiny_bert, fallback_profile(tiny_bert.info), backend="auto", device="cuda",
                              quiet=True)
    assert gpu_host and not _records(caplog)


def test_explicit_cpu_or_artifact_is_never_probed(tiny_bert, monkeypatch, tmp_path):
    def probe():
        raise AssertionError("probed")

    monkeypatch.setattr(policy, "torch_gpu_name", probe)
    assert backends._gpu_host_choice("cpu", None) is None
    with pytest.raises(ArtifactError):  # the artifact's own error, not the probe's
        backends.make_backend(tiny_bert, None, backend="auto", artifact=tmp_path / "none")


def test_cli_says_one_line_which_engine_runs(tiny_bert_dir, gpu_host, tmp_path, capsys, monkeypatch):
    from headseg.cli import main

    monkeypatch.setattr(policy, "GPU_MEASUREMENT", None)
    doc = tmp_path / "doc.txt"
    doc.write_text("The committee met on Monday. It approved the budget.\n\nRain fell all night. The river rose.\n",
                   encoding="utf-8")
    assert main(["segment", str(doc), "--model", str(tiny_bert_dir)]) == 0
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if "torch on the GPU" in line]
    assert said == ["headseg: " + policy.choose_engine("auto", GPU, policy.host_cores()).reason]
    assert not gpu_host


def test_without_onnxruntime_the_gpu_host_choice_stands_aside(monkeypatch):
    """No onnxruntime at all: the choice is not made (it would answer ONNX on the CPU, which cannot run),
    so the fallback to torch keeps the device asked and ``auto`` still finds the GPU."""
    def no_onnxruntime():
        raise ImportError("No module named 'onnxruntime'")

    monkeypatch.setattr(backends, "cuda_provider_works", no_onnxruntime)
    monkeypatch.setattr(policy, "torch_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(policy, "GPU_MEASUREMENT", None)
    for device in (None, "auto", "cuda"):
        assert backends._gpu_host_choice(device, None) is None
