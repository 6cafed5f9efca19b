"""What ``headseg export`` and the artifact cache guard: --out safety, the cache key, a private cache, offline, devices."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from headseg.analysis import load_model
from headseg.analysis.cache import cache_unsafe, weights_digest
from headseg.analysis.errors import ArtifactError
from headseg.analysis.profile import HeadProfile
from headseg.cli import main
from headseg.export.artifact import MANIFEST_NAME, read_manifest
from headseg.export.runtime import cuda_provider_works
from headseg.export.provision import export_to_cache, find_cached

HEADS = "0:1,2:3"


def _export(model_dir, out, *extra):
    return main(["export", "--model", str(model_dir), "--heads", HEADS, "--out", str(out), "--precision", "fp32",
                 "--device", "cpu", "--quiet", *extra])


def test_issue23_item1_out_refuses_a_folder_headseg_did_not_write(tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "tokenizer.json").write_text("the user's own tokenizer")
    (out / "manifest.json").write_text('{"not": "headseg"}')
    assert _export(tiny_bert_dir, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "headseg did not write" in err
    # --force never replaces a file headseg did not write
    assert _export(tiny_bert_dir, out, "--force") == 2
    assert (out / "tokenizer.json").read_text() == "the user's own tokenizer"
    assert (out / "manifest.json").read_text() == '{"not": "headseg"}'
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "tokenizer.json"]


def test_issue23_item1_force_adds_the_artifact_beside_other_files(tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "README.md").write_text("notes")
    assert _export(tiny_bert_dir, out) == 2
    assert "--force" in capsys.readouterr().err
    assert not (out / "model.onnx").exists()
    assert _export(tiny_bert_dir, out, "--force") == 0
    assert (out / "README.md").read_text() == "notes" and read_manifest(out).heads == [(0, 1), (2, 3)]
    # a folder holding its own artifact is written again without --force
    assert _export(tiny_bert_dir, out) == 0


def test_issue23_item1_reexport_drops_the_old_profile(tiny_bert_dir, tmp_path):
    from headseg.export.exporter import export_artifact

    out = tmp_path / "art"
    assert _export(tiny_bert_dir, out) == 0
    assert (out / "profile.json").is_file()
    loaded = load_model(tiny_bert_dir, weights=False)
    export_artifact(loaded, [(1, 1)], "0" * 16, out)  # no profile this time
    assert not (out / "profile.json").exists() and read_manifest(out).heads == [(1, 1)]


def _profile(loaded):
    info = loaded.info
    heads = [(0, 1), (2, 3)]
    return HeadProfile(model_fingerprint=info.fingerprint, heads=heads, weights=[1.0, 1.0], model_name=info.name,
                       num_layers=info.num_layers, num_heads=info.num_heads, topic_heads=heads)


def _copy(src, dst, bin_too=False):
    shutil.copytree(src, dst)
    if bin_too:  # an extra weight file transformers does not load when model.safetensors is there
        (dst / "pytorch_model.bin").write_bytes(b"\x80\x02not loaded")
    return dst


def test_issue23_item5_equal_weights_share_one_artifact_and_others_never_evict(tiny_bert_dir, tmp_path):
    a = load_model(_copy(tiny_bert_dir, tmp_path / "a"), weights=False)
    b = load_model(_copy(tiny_bert_dir, tmp_path / "b", bin_too=True), weights=False)
    assert a.weights_digest == b.weights_digest and a.info.fingerprint == b.info.fingerprint
    prof = _profile(a)
    art = export_to_cache(a, prof, "fp32", quiet=True)
    assert find_cached(b.info.fingerprint, prof.hash(), ["fp32"], b.weights_digest) == art
    # Same weights, another config (activation): another graph, so another key; both stay.
    c_dir = _copy(tiny_bert_dir, tmp_path / "c")
    cfg = json.loads((c_dir / "config.json").read_text())
    (c_dir / "config.json").write_text(json.dumps({**cfg, "hidden_act": "relu"}))
    c = load_model(c_dir, weights=False)
    assert c.info.fingerprint == a.info.fingerprint and c.weights_digest != a.weights_digest
    art_c = export_to_cache(c, prof, "fp32", quiet=True)
    assert art_c != art and (art / MANIFEST_NAME).is_file() and (art_c / MANIFEST_NAME).is_file()
    assert read_manifest(art_c).weights_digest == weights_digest(c_dir)
    assert read_manifest(art).weights_digest == weights_digest(tiny_bert_dir)


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="mode bits are POSIX")
def test_issue23_item6_a_cache_others_can_write_is_refused(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    loaded = load_model(tiny_bert_dir, weights=False)
    prof = _profile(loaded)
    art = export_to_cache(loaded, prof, "fp32", quiet=True)
    # what headseg made is private: no group/other write bit anywhere
    assert cache_unsafe(art, files=True) is None
    assert all(not (p.stat().st_mode & 0o022) for p in [art, art.parent, *art.iterdir()])
    # a graph file others could have replaced is not run
    (art / "model.onnx").chmod(0o666)
    with pytest.raises(ArtifactError, match="writable by group/others") as e:
        find_cached(loaded.info.fingerprint, prof.hash(), ["fp32"], loaded.weights_digest)
    assert "\n" not in str(e.value)
    (art / "model.onnx").chmod(0o644)
    assert find_cached(loaded.info.fingerprint, prof.hash(), ["fp32"], loaded.weights_digest) == art
    # a cache folder open to everyone: no read, no export, and the CLI says so in one line
    (tmp_path / "cache").chmod(0o777)
    with pytest.raises(ArtifactError, match="writable by group/others"):
        find_cached(loaded.info.fingerprint, prof.hash(), ["fp32"], loaded.weights_digest)
    with pytest.raises(ArtifactError, match="refusing to export into the cache"):
        export_to_cache(loaded, prof, "int8", quiet=True)
    assert main(["export", "--model", str(tiny_bert_dir), "--heads", HEADS, "--precision", "fp32", "--device", "cpu",
                 "--quiet"]) == ArtifactError.exit_code
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    (tmp_path / "cache").chmod(0o700)


ROOT_LOGGER = """
import json, logging, sys
from pathlib import Path
from headseg.analysis import load_model
from headseg.export.builder import write_graph
from headseg.export.exporter import convert_precision
root = logging.getLogger()
before = (len(root.handlers), root.level)
loaded = load_model(sys.argv[1], weights=False)
write_graph(loaded, [(0, 1)], Path(sys.argv[2]) / "fp32.onnx")
convert_precision(Path(sys.argv[2]) / "fp32.onnx", Path(sys.argv[2]) / "int8.onnx", "int8")
print(json.dumps({"before": before, "after": (len(root.handlers), root.level)}))
"""


def test_issue23_item7_quantisation_leaves_the_root_logger_alone(tiny_bert_dir, tmp_path):
    r = subprocess.run([sys.executable, "-c", ROOT_LOGGER, str(tiny_bert_dir), str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["before"] == got["after"] == [0, logging.WARNING]
    assert (tmp_path / "int8.onnx").is_file() and r.stderr == ""


def test_issue23_item7_onnxruntime_telemetry_is_switched_off(monkeypatch):
    import onnxruntime

    from headseg.export import runtime

    calls = []
    monkeypatch.setattr(runtime, "_telemetry_off", False)
    monkeypatch.setattr(onnxruntime, "disable_telemetry_events", lambda: calls.append(1))
    assert runtime._ort() is onnxruntime and calls == [1]
    runtime._ort()
    assert calls == [1]  # once per process


@pytest.mark.skipif(cuda_provider_works(), reason="needs a machine without a usable GPU")
def test_issue23_item15_cuda_without_gpu_is_refused_before_export(tmp_path, capsys):
    # The model does not even exist: the device is refused first (exit 6, not 3).
    rc = main(["export", "--model", str(tmp_path / "no-such-model"), "--device", "cuda", "--out", str(tmp_path / "o")])
    assert rc == 6 and "no usable CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_issue23_item15_fp16_on_cpu_is_refused_before_export(tmp_path, capsys):
    rc = main(["export", "--model", str(tmp_path / "no-such-model"), "--device", "cpu", "--precision", "fp16",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "fp16" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------- audit 2: the cache and export --out
@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="mode bits are POSIX")
def test_audit2_records_written_under_umask_002_are_trusted_again(tmp_path, monkeypatch):
    # umask 002 (per-user groups) gave each record mode 0664, which the reader then refused as writable by the
    # group: every run hashed the weights and the graph again and recomputed the fingerprint.
    from headseg.analysis import cache

    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "big.bin"
    f.write_bytes(b"x" * 1000)
    old = os.umask(0o002)
    try:
        assert cache.remember_fingerprint("d" * 32, "fp-1")
        digest = cache.cached_digest(f)
    finally:
        os.umask(old)
    assert cache.known_fingerprint("d" * 32) == "fp-1"
    records = [p for k in ("digests", "fingerprints") for p in (tmp_path / "cache" / k).iterdir()]
    assert len(records) == 2 and all(not (p.stat().st_mode & 0o022) for p in records)
    calls = []
    monkeypatch.setattr(cache, "file_sha256", lambda p: calls.append(p) or "rehashed")
    assert cache.cached_digest(f) == digest and calls == []


def test_audit2_concurrent_exports_to_one_out_folder_are_refused_not_torn(tiny_bert_dir, tmp_path, capsys):
    # Two `headseg export --out DIR` at once moved their files in turn: one's manifest over the other's graph
    # (a corrupt artifact, both exit 0), or a false "holds model.onnx, which headseg did not write".
    from headseg.analysis.outputs import output_lock

    out = tmp_path / "art"
    with output_lock(out):  # another export of the same folder is running
        assert _export(tiny_bert_dir, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another headseg run is writing it" in err
    assert not out.exists()
    assert _export(tiny_bert_dir, out) == 0 and read_manifest(out).heads == [(0, 1), (2, 3)]


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="symbolic links and mode bits are POSIX")
def test_audit2_a_link_planted_in_the_cache_never_redirects_an_export(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    from headseg.export.artifact import cache_dir

    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    loaded = load_model(tiny_bert_dir, weights=False)
    prof = _profile(loaded)
    target = cache_dir(loaded.info.fingerprint, prof.hash(), "fp32", loaded.weights_digest)
    target.parent.mkdir(parents=True, mode=0o700)
    (tmp_path / "cache").chmod(0o700)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "tokenizer.json").write_text("not headseg's")
    target.symlink_to(victim)  # the artifact's folder is a link out of the cache
    with pytest.raises(ArtifactError, match="symbolic link"):
        export_to_cache(loaded, prof, "fp32", quiet=True)
    assert main(["export", "--model", str(tiny_bert_dir), "--heads", HEADS, "--precision", "fp32", "--device", "cpu",
                 "--quiet"]) == ArtifactError.exit_code
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert sorted(p.name for p in victim.iterdir()) == ["tokenizer.json"]
    assert (victim / "tokenizer.json").read_text() == "not headseg's"
    # the lock file beside it, linked to a file outside the cache: nothing is created there
    target.unlink()
    lock = target.parent / f".{target.name}.lock"
    lock.symlink_to(tmp_path / "created-by-the-lock")
    with pytest.raises(ArtifactError, match="symbolic link"):
        export_to_cache(loaded, prof, "fp32", quiet=True)
    assert not (tmp_path / "created-by-the-lock").exists() and not target.exists()


def test_audit2_a_file_where_the_cached_artifact_goes_is_one_line(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    # `headseg export` (to the cache) died with a FileExistsError traceback.
    from headseg.export.artifact import cache_dir

    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    loaded = load_model(tiny_bert_dir, weights=False)
    prof = _profile(loaded)
    target = cache_dir(loaded.info.fingerprint, prof.hash(), "fp32", loaded.weights_digest)
    target.parent.mkdir(parents=True)
    for d in (tmp_path / "cache", target.parent):
        d.chmod(0o700)
    target.write_text("a stray file")
    assert main(["export", "--model", str(tiny_bert_dir), "--heads", HEADS, "--precision", "fp32", "--device", "cpu",
                 "--quiet"]) == ArtifactError.exit_code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a directory" in err
    with pytest.raises(ArtifactError, match="not a directory"):
        export_to_cache(loaded, prof, "fp32", quiet=True)
    assert target.read_text() == "a stray file"


def test_audit2_a_cache_lock_held_too_long_is_an_artifact_error(tmp_path):
    # The wait for another exporter's lock ended in a ModelError (exit 3, "model"), which also kept
    # `--backend auto` from falling back to torch; it is the cache's artifact that could not be had (exit 5).
    import fcntl

    from headseg.analysis.cache import file_lock

    lock = tmp_path / ".art.lock"
    with open(lock, "a+") as other:  # another process's hold (flock locks open files, not processes)
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        with pytest.raises(ArtifactError, match="held this lock") as e:
            with file_lock(lock, timeout=0.3):
                pass
        assert "\n" not in str(e.value)
    with file_lock(lock, timeout=0.3):  # released: taken at once
        pass


def test_audit2_export_out_dash_is_refused_not_a_folder_named_dash(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    # `--out -` (standard output elsewhere) made a folder named "-", and without the output lock ("-" takes none).
    monkeypatch.chdir(tmp_path)
    assert _export(tiny_bert_dir, "-") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a directory" in err
    assert list(tmp_path.iterdir()) == []
