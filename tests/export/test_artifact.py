"""Artifacts: manifest contents, refusal of bad or mismatched artifacts, the cache, make_backend, the CLI."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from headseg.analysis import TorchBackend, load_model, windows_from_text
from headseg.analysis.cache import weights_digest
from headseg.analysis.errors import ArtifactError, DeviceError, HeadsegError, ProfileError
from headseg.analysis.profile import HeadProfile
from headseg.export.artifact import cache_dir, read_manifest
from headseg.export.backends import make_backend
from headseg.export.onnx_backend import OnnxBackend
from headseg.export.policy import precision_preference
from headseg.export.runtime import cuda_provider_works
from headseg.export.exporter import export_artifact

HEADS = [(1, 3), (2, 0)]


def _profile(loaded, heads=HEADS, weights=None):
    info = loaded.info
    return HeadProfile(model_fingerprint=info.fingerprint, heads=heads, weights=weights or [1.0] * len(heads),
                       model_name=info.name, num_layers=info.num_layers, num_heads=info.num_heads)


@pytest.fixture(scope="module")
def artifact(tiny_bert, tmp_path_factory):
    out = tmp_path_factory.mktemp("art") / "a"
    export_artifact(tiny_bert, HEADS, _profile(tiny_bert).hash(), out)
    return out


@pytest.fixture
def copy(artifact, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(artifact, dst)
    return dst


def test_manifest_records_what_it_was_made_from(tiny_bert, artifact):
    m = read_manifest(artifact)
    raw = json.loads((artifact / "manifest.json").read_text())
    assert m.model_fingerprint == tiny_bert.info.fingerprint == raw["model_fingerprint"]
    assert m.profile_hash == _profile(tiny_bert).hash()
    assert m.heads == HEADS and raw["heads"] == [[1, 3], [2, 0]]
    assert (m.precision, m.opset, m.outputs) == ("fp32", 18, ["head_z"])
    assert m.layers_exported == 3 and m.head_dim == 8
    # made by the builder: its toolchain, and no torch
    assert m.versions["exporter"] == "builder"
    for pkg in ("onnx", "numpy", "safetensors"):
        assert pkg in m.versions
    assert "torch" not in m.versions and "optimum-onnx" not in m.versions
    assert m.parity["z_max_abs_error"] <= 1e-4 and m.parity["windows"] >= 2
    assert m.graph_bytes == (artifact / "model.onnx").stat().st_size


def test_missing_graph(tiny_bert, copy):
    (copy / "model.onnx").unlink()
    with pytest.raises(ArtifactError, match="missing ONNX graph"):
        OnnxBackend(tiny_bert, copy)


def test_corrupt_graph_detected_by_checksum(tiny_bert, copy):
    g = copy / "model.onnx"
    data = bytearray(g.read_bytes())
    data[len(data) // 2] ^= 0xFF
    g.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="corrupt ONNX graph"):
        OnnxBackend(tiny_bert, copy)


def test_garbage_graph_with_matching_manifest_is_refused_by_onnxruntime(tiny_bert, copy):
    from headseg.analysis.cache import file_sha256

    g = copy / "model.onnx"
    g.write_bytes(b"this is not a protobuf" * 10)
    raw = json.loads((copy / "manifest.json").read_text())
    raw["graph_sha256"], raw["graph_bytes"] = file_sha256(g), g.stat().st_size
    (copy / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(ArtifactError, match="onnxruntime cannot load this graph") as exc:
        OnnxBackend(tiny_bert, copy)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("content,match", [(None, "no manifest.json"), ("{not json", "unreadable manifest"),
                                           ('{"model_name": "x"}', "not a valid artifact manifest")])
def test_bad_manifest(tiny_bert, copy, content, match):
    if content is None:
        (copy / "manifest.json").unlink()
    else:
        (copy / "manifest.json").write_text(content)
    with pytest.raises(ArtifactError, match=match):
        OnnxBackend(tiny_bert, copy)


def test_missing_directory(tiny_bert, tmp_path):
    with pytest.raises(ArtifactError, match="run `headseg export`"):
        OnnxBackend(tiny_bert, tmp_path / "nope")


def test_artifact_for_another_model_is_refused(tiny_roberta, artifact):
    with pytest.raises(ArtifactError, match="exported from model tiny-bert"):
        OnnxBackend(tiny_roberta, artifact)


def test_artifact_for_another_profile_is_refused(tiny_bert, artifact):
    other = _profile(tiny_bert, weights=[1.0, 2.0]).hash()
    with pytest.raises(ArtifactError, match="head profile"):
        OnnxBackend(tiny_bert, artifact, profile_hash=other)
    OnnxBackend(tiny_bert, artifact, profile_hash=_profile(tiny_bert).hash())


def test_attention_not_exported_is_a_clear_error(tiny_bert, artifact):
    ws = windows_from_text("One sentence. Two sentences.", tiny_bert.tokenizer)
    with pytest.raises(ArtifactError, match="--attention"):
        OnnxBackend(tiny_bert, artifact, device="cpu").capture(ws, attention=True)


@pytest.mark.skipif(cuda_provider_works(), reason="a CUDA GPU is present")
def test_device_cuda_without_gpu(tiny_bert, artifact):
    with pytest.raises(DeviceError, match="--device cuda") as exc:
        OnnxBackend(tiny_bert, artifact, device="cuda")
    assert "\n" not in str(exc.value)


def test_make_backend_cache(tiny_bert, monkeypatch, tmp_path):
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    prof = _profile(tiny_bert)
    assert isinstance(make_backend(tiny_bert, prof, backend="auto", device="cpu"), TorchBackend)
    assert isinstance(make_backend(tiny_bert, prof, backend="torch"), TorchBackend)
    with pytest.raises(ArtifactError, match="headseg export"):
        make_backend(tiny_bert, prof, backend="onnx", device="cpu", export=False)
    default = precision_preference("cpu")[0]
    where = cache_dir(tiny_bert.info.fingerprint, prof.hash(), default)
    assert where == tmp_path / "cache" / "onnx" / f"{tiny_bert.info.fingerprint}-{prof.hash()}-{default}"
    # backend="onnx" exports into the cache when nothing is there, with the profile and tokenizer inside.
    b = make_backend(tiny_bert, prof, backend="onnx", device="cpu", quiet=True)
    assert isinstance(b, OnnxBackend) and b.artifact_dir == where
    assert HeadProfile.load(where / "profile.json").hash() == prof.hash()
    assert (where / "tokenizer.json").is_file()
    for kind in ("auto", "onnx"):
        b = make_backend(tiny_bert, prof, backend=kind, device="cpu")
        assert isinstance(b, OnnxBackend) and b.precision == default
    # Another profile has no artifact: auto falls back to torch.
    other = _profile(tiny_bert, heads=[(0, 0)])
    assert isinstance(make_backend(tiny_bert, other, backend="auto", device="cpu"), TorchBackend)
    # A broken cached artifact: auto warns and uses torch, onnx refuses.
    (where / "model.onnx").write_bytes(b"broken")
    assert isinstance(make_backend(tiny_bert, prof, backend="auto", device="cpu"), TorchBackend)
    with pytest.raises(ArtifactError, match="corrupt"):
        make_backend(tiny_bert, prof, backend="onnx", device="cpu")
    with pytest.raises(HeadsegError, match="unknown backend"):
        make_backend(tiny_bert, prof, backend="tensorrt")


# --- the CLI ---------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    return tiny_bert_dir


def test_cli_export_out_and_use(tiny_bert, model_dir, tmp_path, capsys):
    from headseg.cli import main

    out = tmp_path / "cli"
    assert main(["export", "--model", str(model_dir), "--heads", "2:1,0:3", "--out", str(out), "--precision", "fp32",
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    # fp32 from the builder: measured against torch only where this process holds its weights already
    torch_loaded = load_model(model_dir, weights=False).has_weights
    assert str(out) in text
    assert ("parity vs torch fp32 cpu" in text) if torch_loaded else ("parity not measured" in text)
    m = read_manifest(out)
    assert m.heads == [(0, 3), (2, 1)] and m.model_fingerprint == tiny_bert.info.fingerprint
    ws = windows_from_text("A first sentence here. And a second one.", tiny_bert.tokenizer)
    ref = TorchBackend(tiny_bert).capture(ws, heads=m.heads, attention=False)
    got = OnnxBackend(tiny_bert, out, device="cpu").capture(ws)
    assert np.abs(ref.z - got.z).max() <= 1e-4


def test_cli_export_to_cache_with_profile(tiny_bert, model_dir, tmp_path, monkeypatch, capsys):
    from headseg.cli import main

    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "c"))
    prof = _profile(tiny_bert)
    prof.save(tmp_path / "heads.json")
    # no --precision: what `segment` serves on this device (int8 on CPU)
    rc = main(["export", "--model", str(model_dir), "--profile", str(tmp_path / "heads.json"),
               "--device", "cpu", "--json", "--quiet"])
    assert rc == 0 and precision_preference("cpu")[0] == "int8"
    printed = json.loads(capsys.readouterr().out)
    assert printed["artifact"] == str(cache_dir(tiny_bert.info.fingerprint, prof.hash(), "int8",
                                                weights_digest(model_dir)))
    torch_loaded = load_model(model_dir, weights=False).has_weights
    assert printed["parity"]["reference"] == ("torch fp32 cpu" if torch_loaded else "fp32 graph cpu")
    b = make_backend(tiny_bert, prof, backend="onnx", device="cpu", precision="int8")
    assert isinstance(b, OnnxBackend) and b.precision == "int8"
    # Unit heads and the (default, last-layer) topic heads: all the segmenter reads.
    assert list(b.heads) == prof.capture_heads and (2, 3) in b.heads and (1, 3) in b.heads


def test_make_backend_refuses_artifact_lacking_profile_heads(tiny_bert, monkeypatch, tmp_path):
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path))
    prof = _profile(tiny_bert)
    # Right hash, but only the unit heads were exported (not the topic heads).
    export_artifact(tiny_bert, prof.heads, prof.hash(),
                    cache_dir(tiny_bert.info.fingerprint, prof.hash(), precision_preference("cpu")[0]),
                    precision=precision_preference("cpu")[0])
    with pytest.raises(ArtifactError, match="lacks head"):
        make_backend(tiny_bert, prof, backend="onnx", device="cpu")
    assert isinstance(make_backend(tiny_bert, prof, backend="auto", device="cpu"), TorchBackend)


@pytest.mark.parametrize("argv,code,match", [
    # bad flags exit 2, before the model loads (issue 23)
    (["--heads", "2-1"], 2, "not LAYER:HEAD"),
    # heads typed on the command line are an argument: exit 2, not a profile file's 4 (issue 35 item 15)
    (["--heads", "7:0"], 2, "--heads: head profile names head L7H0"),
    (["--heads", "1:1", "--out", "X", "--cache"], 2, "either --out DIR or --cache"),
])
def test_cli_bad_input(model_dir, tmp_path, capsys, argv, code, match):
    from headseg.cli import main

    argv = [a.replace("X", str(tmp_path / "x")) for a in argv]
    assert main(["export", "--model", str(model_dir), *argv]) == code
    err = capsys.readouterr().err
    assert err.startswith("headseg: error:") and match in err and err.count("\n") == 1


def test_cli_no_profile_exports_the_segmenters_fallback(tiny_bert, model_dir, tmp_path):
    # The shipped profile belongs to the embedded model: for another model the one
    # profile policy gives every head of the last layer (units and topics) and of the
    # first layer (topics), and export exports exactly those.
    from headseg.cli import main

    assert main(["export", "--model", str(model_dir), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    last, H = tiny_bert.info.num_layers - 1, tiny_bert.info.num_heads
    assert read_manifest(tmp_path / "o").heads == [(0, h) for h in range(H)] + [(last, h) for h in range(H)]


def test_cli_profile_for_another_model(tiny_roberta, model_dir, tmp_path, capsys):
    from headseg.cli import main

    _profile(tiny_roberta).save(tmp_path / "rob.json")
    rc = main(["export", "--model", str(model_dir), "--profile", str(tmp_path / "rob.json"), "--out", str(tmp_path / "o")])
    assert rc == ProfileError.exit_code and "was made for model" in capsys.readouterr().err
