"""The GPU pack (benchmarks/gpu_pack.py): under 64 MiB, its model restored faithfully, and gpu.sh --dry-run
run from the folder alone on a stand-in host.

The stand-in host is what the lent GPU machine promises and nothing more: a
fresh venv whose only packages are torch, transformers, onnxruntime and pip with
everything they require (symbolic links to this environment's copies, found
from their metadata).  headseg, platformdirs, markdown-it-py (and onnx, which
they do not require) are not importable there until the pack brings them.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GPU_PACK = REPO / "benchmarks" / "gpu_pack.py"
#: the stand-in host's packages (gpu_pack.HOST_PROVIDES, and the pip that installs the pack's wheels)
HOST = ("torch", "transformers", "onnxruntime", "pip")


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", HEADSEG_CACHE=str(tmp / "cache"))
    return env


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu-pack")
    out = tmp / "gpu-pack"
    subprocess.run([sys.executable, str(GPU_PACK), "make", str(out), "--data", str(REPO / "tests" / "fixtures"),
                    "--families", "dev", "--per-family", "2", "--chars", "30000"],
                   check=True, env=_env(tmp), cwd=tmp, capture_output=True, text=True)
    return out


def test_the_pack_is_under_64_mib_and_holds_what_the_host_lacks(pack):
    size = sum(p.stat().st_size for p in pack.rglob("*") if p.is_file())
    assert 0 < size < 64 * 2**20
    man = json.loads((pack / "manifest.json").read_text())
    wheels = {w.split("-", 1)[0].lower() for w in man["wheels"]}
    # the pure-Python core dependencies that torch, transformers and onnxruntime do not bring
    assert {"headseg", "platformdirs", "markdown_it_py", "mdurl"} <= wheels
    assert not wheels & {"numpy", "tokenizers", "torch", "transformers"}
    assert any(n.startswith("onnx ") for n in man["not_brought"])  # compiled: the host's, or --with-onnx
    for name in ("gpu.sh", "gpu_pack.py", "gpu_measure.py", "profile.json", "data/dev.jsonl.gz",
                 "model/config.json", "model/tokenizer.json", "model/packed.safetensors"):
        assert (pack / name).is_file(), name


@pytest.fixture(scope="module")
def restored(pack, tmp_path_factory):
    d = tmp_path_factory.mktemp("restored") / "model"
    subprocess.run([sys.executable, str(pack / "gpu_pack.py"), "restore", str(pack), str(d)], check=True,
                   env=_env(d.parent), capture_output=True, text=True)
    return d


def test_restored_weights_are_within_the_quantisation_error(restored):
    from safetensors.numpy import load_file

    from headseg.analysis.model import embedded_model_path

    orig = load_file(str(embedded_model_path() / "model.safetensors"))
    back = load_file(str(restored / "model.safetensors"))
    assert set(orig) == set(back)
    for name, a in orig.items():
        b = back[name]
        assert b.dtype == a.dtype and b.shape == a.shape, name
        if name == "embeddings.word_embeddings.weight":
            # int8 per row: off by at most half a step, a step being the row's largest |w| / 127
            step = np.abs(a).max(axis=1, keepdims=True) / 127
            assert (np.abs(a - b) <= step / 2 * (1 + 1e-5) + 1e-12).all()
            assert np.abs(a - b).max() > 0  # really quantised
        elif a.dtype == np.float32 and a.ndim >= 2:
            np.testing.assert_array_equal(b, a.astype(np.float16).astype(np.float32))  # fp16 round trip
        else:
            np.testing.assert_array_equal(a, b)


def test_restored_profile_is_the_shipped_one_keyed_to_the_restored_weights(pack, restored):
    from headseg.analysis import load_model
    from headseg.analysis.profile import HeadProfile, default_profile_path, resolve_profile

    info = load_model(str(restored), weights=False).info
    prof = resolve_profile(info, pack / "profile.json")  # refused if keyed to another model
    shipped = HeadProfile.load(default_profile_path())
    assert prof.model_fingerprint == info.fingerprint != shipped.model_fingerprint
    assert (prof.heads, prof.weights, prof.topic_selection(6, 12), prof.topic_output_weight) == (
        shipped.heads, shipped.weights, shipped.topic_selection(6, 12), shipped.topic_output_weight)


def test_restored_model_segments_as_the_original_does(restored, pack):
    """The squeezed model, served by torch in fp32, against the original on the fixture documents."""
    from headseg import Segmenter
    from headseg.segmenter.evaluation.loaders import iter_documents

    texts = sorted((d.text for d in iter_documents(str(REPO / "tests" / "fixtures" / "dev"))), key=len)[:3]
    orig = Segmenter(backend="torch", device="cpu", quiet=True).segment_many(texts)
    back = Segmenter(model=str(restored), profile=str(pack / "profile.json"), backend="torch", device="cpu",
                     quiet=True).segment_many(texts)
    same = [a.boundaries == b.boundaries for a, b in zip(orig, back)]
    # measured: equal on all 4 dev fixtures (the 3 shortest here); the GPU comparison itself is on the same
    # restored weights on both sides
    assert all(same), [(a.boundaries, b.boundaries) for a, b in zip(orig, back)]


def _gpu_pack():
    """benchmarks/gpu_pack.py as a module (a script, not a package member)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_pack", GPU_PACK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stand_in_host(tmp: Path) -> Path:
    """A venv whose importable packages are exactly :data:`HOST` and what they require; returns its python."""
    site = tmp / "host-site"
    site.mkdir()
    for name in sorted(_gpu_pack().closure(HOST)):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        root = Path(dist.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            link = site / top
            if not link.exists() and (root / top).exists() and top != "__pycache__":
                link.symlink_to(root / top)
    venv = tmp / "host"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (next((venv / "lib").glob("python3*")) / "site-packages" / "host.pth").write_text(str(site) + "\n")
    return venv / "bin" / "python"


def test_dry_run_from_the_folder_alone_on_a_stand_in_host(pack, tmp_path):
    py = _stand_in_host(tmp_path)
    env = _env(tmp_path)
    for mod in ("headseg", "platformdirs", "markdown_it", "onnx"):  # the stand-in has none of these
        assert subprocess.run([str(py), "-c", f"import {mod}"], env=env, capture_output=True).returncode != 0, mod
    subprocess.run([str(py), "-c", "import torch, transformers, onnxruntime"], env=env, check=True)
    out = tmp_path / "out"
    p = subprocess.run(["bash", str(pack / "gpu.sh"), "--dry-run", str(out)], env={**env, "PY": str(py)},
                       cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    summary = (out / "summary.md").read_text()
    steps = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in summary.splitlines()
             if line.startswith("| ") and line.count("|") == 5}
    for step in ("environment", "load", "cli", "parity", "throughput", "forward", "profile"):
        assert steps.get(step) == "ok", (step, steps)
    assert steps["ort_cuda"] == "skipped" and "FAILED" not in steps.values()
    assert results["cli"]["equal"] and results["environment"]["device"] == "cpu"
    # every dry-run parity document equal (the CPU against itself): the comparison ran, on each batch size
    assert all(n == results["parity"]["documents"] for n in results["parity"]["equal_by_batch"].values())
    assert {r["config"] for r in results["throughput"]} == {"torch cpu"}  # no onnx on the stand-in host
    assert "onnx" in results["environment"]["onnx_export"]
    assert set(results["forward"]) >= {"fp32", "fp16"} and results["forward"]["fp16"]["rel_error_vs_fp32"] < 1e-2
    assert results["profile"]["stages"]["capture"] > 0
    setup = (out / "setup.txt").read_text()
    assert "installing headseg" in setup and "platformdirs" in setup
    for name in ("summary.md", "results.json", "log.txt", "profile.txt", "setup.txt"):
        assert (out / name).is_file()
    assert len(list(out.iterdir())) <= 8  # what a lent device machine sends back
    assert p.stdout.rstrip().splitlines()[-1].startswith("| auto")  # the summary table printed last
