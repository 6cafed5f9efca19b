"""The ONNX serving engine: torch-free start, one-time export, --artifact, cache failures, parity with torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from headseg.analysis.errors import ArtifactError
from headseg.analysis.reading import read_text
from headseg.export.artifact import read_manifest
from headseg.export.onnx_backend import OnnxBackend
from headseg.export.policy import precision_preference

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample.txt"
DEV = Path(__file__).resolve().parents[1] / "fixtures" / "dev"


def _dev_texts() -> list[str]:
    """A few real dev documents (Choi 3-11, a lecture excerpt, a dialogue) with the markers removed."""
    out = []
    for p in sorted(DEV.iterdir()):
        lines = [l for l in read_text(p).splitlines(keepends=True) if not l.startswith("==========")]
        out.append("".join(lines))
    return out + [SAMPLE.read_text(encoding="utf-8")]


@pytest.fixture(scope="module")
def served():
    """The default Segmenter on the embedded model: exported into the session cache on first use."""
    from headseg import Segmenter

    seg = Segmenter(quiet=True)
    assert seg.backend.name == "onnx" and seg.backend.precision == "int8"
    return seg


@pytest.fixture(scope="module")
def served_fp32():
    """The fp32 serving engine on the embedded model (what reproduces the torch path)."""
    from headseg import Segmenter

    seg = Segmenter(precision="fp32", quiet=True)
    assert seg.backend.name == "onnx" and seg.backend.precision == "fp32"
    return seg


@pytest.fixture(scope="module")
def tiny_dir(tiny_bert_dir):
    return tiny_bert_dir


@pytest.mark.slow
def test_fp32_serving_gives_the_torch_boundaries(served_fp32):
    from headseg import Segmenter

    ref = Segmenter(backend="torch")
    texts = _dev_texts()
    got, want = served_fp32.segment_many(texts), ref.segment_many(texts)
    assert [g.boundaries for g in got] == [w.boundaries for w in want]
    # units (the lecture has no punctuation: the heads' detector) and a hard size limit
    for text in texts[2:4]:
        assert served_fp32.segment(text, level="unit").boundaries == ref.segment(text, level="unit").boundaries
        assert served_fp32.segment(text, max_chars=600).boundaries == ref.segment(text, max_chars=600).boundaries


@pytest.mark.slow
def test_int8_results_do_not_depend_on_the_batch(served):
    """Dynamic quantisation scales activations per input tensor: each window runs alone."""
    from headseg.analysis.text import tokenize

    texts = _dev_texts()
    items = []
    for t in texts:
        tok = tokenize(t, served.loaded.tokenizer)
        items.append((tok, served.units(t, doc=tok)))
    together = served.unit_vectors_many(items)
    for item, x in zip(items, together):
        np.testing.assert_array_equal(served.unit_vectors_many([item])[0], x)
    assert [s.boundaries for s in served.segment_many(texts)] == [served.segment(t).boundaries for t in texts]


@pytest.mark.slow
def test_artifact_carries_what_serving_needs(served):
    d = served.backend.artifact_dir
    m = read_manifest(d)
    assert m.model_fingerprint == served.loaded.info.fingerprint
    assert m.weights_digest == served.loaded.weights_digest
    assert m.profile_hash == served.profile.hash()
    for name in ("model.onnx", "tokenizer.json", "tokenizer_config.json", "profile.json"):
        assert (d / name).is_file(), name
    # The artifact's own tokenizer gives the same tokens as the model directory's.
    from headseg.analysis.tokenizer import Tokenizer

    text = SAMPLE.read_text(encoding="utf-8")
    a, b = Tokenizer.from_dir(d).encode(text), served.loaded.tokenizer.encode(text)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


PROBE = """
import json, sys
from headseg.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}),
      file=sys.stderr)
"""


def _run_cli(args, env=None, timeout=300):
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=timeout,
                       env=env or dict(os.environ))
    probe = json.loads(r.stderr.strip().splitlines()[-1])
    return r, probe


@pytest.mark.slow
def test_cli_serving_never_imports_torch(served):
    r, probe = _run_cli(["segment", str(SAMPLE), "--format", "json"])
    assert probe == {"rc": 0, "torch": False, "transformers": False}, r.stderr
    got = json.loads(r.stdout)
    assert [s["start"] for s in got["segments"]][1:] == served.segment(SAMPLE.read_text(encoding="utf-8")).boundaries


@pytest.mark.slow
def test_cli_artifact_option(served, tmp_path):
    art = served.backend.artifact_dir
    r, probe = _run_cli(["segment", str(SAMPLE), "--artifact", str(art), "--format", "json"])
    assert probe["rc"] == 0 and not probe["torch"], r.stderr
    # A corrupt artifact: one line, exit 5.
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(art, bad)
    (bad / "model.onnx").write_bytes(b"not a graph")
    r, probe = _run_cli(["segment", str(SAMPLE), "--artifact", str(bad)])
    assert probe["rc"] == ArtifactError.exit_code
    lines = r.stderr.strip().splitlines()[:-1]
    assert len(lines) == 1 and lines[0].startswith("headseg: error:") and "corrupt" in lines[0]
    # Not an artifact at all.
    r, probe = _run_cli(["segment", str(SAMPLE), "--artifact", str(tmp_path)])
    assert probe["rc"] == ArtifactError.exit_code and "manifest.json" in r.stderr


@pytest.mark.slow
def test_artifact_of_another_model_is_refused(served, tiny_dir):
    from headseg import Segmenter

    with pytest.raises(ArtifactError, match="weight files differ"):
        Segmenter(model=str(tiny_dir), artifact=served.backend.artifact_dir)


def test_first_use_exports_once_even_with_two_processes(tiny_dir, tmp_path):
    cache = tmp_path / "cache"
    # logging.basicConfig: the host shows headseg's warnings (the library itself prints nothing)
    code = ("import logging, sys; logging.basicConfig(); from headseg import Segmenter; s = Segmenter(model=sys.argv[1]); "
            "print(s.backend.name, s.backend.artifact_dir); print(s.segment('One two. Three four.').boundaries)")
    env = dict(os.environ, HEADSEG_CACHE=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tiny_dir)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    firsts = [o.splitlines()[0] for o, _ in outs]
    assert firsts[0] == firsts[1] and firsts[0].startswith("onnx ")
    # One of the two exported; the other waited for the lock and used that artifact.
    assert sum(e.count("exporting the ONNX serving graph") for _, e in outs) == 1
    art = Path(firsts[0].split(" ", 1)[1])
    m = read_manifest(art)
    assert m.precision == precision_preference("cpu")[0]
    # int8 measured against the builder's fp32 graph: the export loaded no torch
    assert m.parity["reference"] == "fp32 graph cpu" and m.parity["z_min_cosine"] > 0
    assert m.versions["exporter"] == "builder"
    assert not [p for p in art.parent.iterdir() if p.name.startswith(".") and p.is_dir()]
    # A third process finds it and exports nothing.
    r = subprocess.run([sys.executable, "-c", code, str(tiny_dir)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and "exporting" not in r.stderr and r.stdout.splitlines()[0] == firsts[0]


def test_unwritable_cache_falls_back_to_torch_with_a_message(tiny_dir, monkeypatch, caplog):
    from headseg import Segmenter

    # Even root cannot create folders under /proc.
    monkeypatch.setenv("HEADSEG_CACHE", "/proc/headseg-cache")
    with caplog.at_level("WARNING", logger="headseg"):
        seg = Segmenter(model=str(tiny_dir))
    assert seg.backend.name == "torch"
    assert any("cannot be written" in r.getMessage() for r in caplog.records)
    assert seg.segment("One two. Three four.").text == "One two. Three four."


def test_onnx_backend_refuses_unwritable_cache(tiny_dir, monkeypatch):
    from headseg import Segmenter

    monkeypatch.setenv("HEADSEG_CACHE", "/proc/headseg-cache")
    with pytest.raises(ArtifactError, match="cannot be written"):
        Segmenter(model=str(tiny_dir), backend="onnx")


def test_explicit_artifact_with_its_own_profile(tiny_bert, tiny_dir, tmp_path):
    from headseg import Segmenter
    from headseg.analysis.profile import HeadProfile
    from headseg.export.exporter import export_artifact

    info = tiny_bert.info
    prof = HeadProfile(model_fingerprint=info.fingerprint, heads=[(1, 0), (2, 2)], weights=[1.0, 1.0],
                       model_name=info.name, num_layers=info.num_layers, num_heads=info.num_heads,
                       topic_heads=[(2, 1), (2, 3)])
    loaded_dir = __import__("headseg").load_model(str(tiny_dir))
    out = tmp_path / "art"
    export_artifact(loaded_dir, prof.capture_heads, prof.hash(), out, profile=prof)
    seg = Segmenter(model=str(tiny_dir), artifact=out)
    assert isinstance(seg.backend, OnnxBackend) and seg.profile.hash() == prof.hash()
    ref = Segmenter(model=str(tiny_dir), profile=prof, backend="torch")
    text = "The cat sat. The dog ran! Markets fell today. Stocks rose later. Rain again."
    assert seg.segment(text).boundaries == ref.segment(text).boundaries


def _padded_cost(lengths, cuts, call_cost):
    return sum((e - s) * lengths[e - 1] + call_cost for s, e in cuts)


@pytest.mark.parametrize("seed", range(6))
def test_plan_chunks_is_optimal_and_tiles(seed):
    import itertools

    from headseg.export.onnx_backend import plan_chunks

    rng = np.random.default_rng(seed)
    lengths = sorted(int(x) for x in rng.integers(3, 90, size=int(rng.integers(1, 10))))
    max_batch, call_cost = int(rng.integers(1, 5)), float(rng.choice([0, 8, 32]))
    cuts = plan_chunks(lengths, max_batch, call_cost)
    # the runs tile the windows in order, none longer than max_batch
    assert cuts[0][0] == 0 and cuts[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))
    assert all(0 < e - s <= max_batch for s, e in cuts)
    # brute force over every way to cut: nothing is cheaper
    n, best = len(lengths), float("inf")
    for mask in itertools.product((0, 1), repeat=n - 1):
        bounds = [0] + [i + 1 for i, m in enumerate(mask) if m] + [n]
        runs = list(zip(bounds, bounds[1:]))
        if all(e - s <= max_batch for s, e in runs):
            best = min(best, _padded_cost(lengths, runs, call_cost))
    assert _padded_cost(lengths, cuts, call_cost) == best


def test_plan_chunks_refuses_unsorted_lengths():
    from headseg.analysis.errors import HeadsegError
    from headseg.export.onnx_backend import plan_chunks

    with pytest.raises(HeadsegError):
        plan_chunks([5, 3], 4, 0)
