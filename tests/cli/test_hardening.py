"""Issue 23 (hardening, second round), the command-line side: one regression test per item of the probe.

A model that cannot be loaded (``NO_MODEL``, or ``config_only``: a folder with
the embedded model's ``config.json`` and nothing else) shows that a check ran
before any model load: reaching the load would exit 3.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import socket
import subprocess
import sys

import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.outputs import lock_path, output_lock
from headseg.analysis.segments import Segmentation
from headseg.cli import main

from cli_helpers import SENTENCES, interrupted_run, journaled_argv, one_line as _one_line, run as _run

NO_MODEL = ["--model", "/nonexistent/model"]








@pytest.fixture
def config_only(tmp_path):
    """The embedded model's config.json alone: its shape is known, but loading it would fail (exit 3)."""
    from headseg.analysis.model import embedded_model_path

    d = tmp_path / "config-only"
    d.mkdir()
    shutil.copy(embedded_model_path() / "config.json", d / "config.json")
    return str(d)


# ------------------------------------------------------------------ item 2
def test_item2_two_writers_one_output(tmp_path, corpus, capsys):
    out = tmp_path / "same.jsonl"
    argv = ["segment", str(corpus), "--format", "jsonl", "--docs-per-batch", "4", "--out", str(out)] + NO_MODEL
    # another run holds the output (flock: a second open file is refused even within one process)
    with output_lock(out):
        rc, err = _run(argv, capsys)
        assert rc == 2 and _one_line(err) and "another headseg run is writing it" in err, err
        # --resume while the interrupted run is still alive: refused the same way, before the model
        rc, err = _run(argv + ["--resume"], capsys)
        assert rc == 2 and _one_line(err) and "another headseg run" in err, err
    assert not out.exists() and not lock_path(out).exists()
    # once released, the next run gets past the lock (and fails only at the model: exit 3)
    rc, err = _run(argv, capsys)
    assert rc == 3, err
    assert not lock_path(out).exists()


@pytest.mark.parametrize("argv", [
    ["segment", "{text}", "--out", "{out}"],
    ["segment", "{text}", "--format", "json", "--out", "{out}"],
    ["segment", "{text}", "--format", "parquet", "--out", "{out}"],
    ["inspect", "{text}", "--save", "{out}"],
    ["evaluate", "{text}", "--out", "{out}", "--method", "random"],
    ["study", "{text}", "--out", "{out}"],
])
def test_item2_every_output_is_locked(tmp_path, config_only, capsys, argv):
    text = tmp_path / "doc.txt"
    text.write_text("The cat sat on the mat. The dog ran off.\n", encoding="utf-8")
    out = tmp_path / "out"
    with output_lock(out):
        rc, err = _run([a.format(text=text, out=out) for a in argv] + ["--model", config_only], capsys)
    assert rc == 2 and _one_line(err) and "another headseg run is writing it" in err, err


def test_item2_lock_survives_a_removed_lock_file(tmp_path):
    out = tmp_path / "o.jsonl"
    with output_lock(out):
        assert lock_path(out).exists()
        with pytest.raises(InputError, match="another headseg run"):
            with output_lock(out):
                pass
    assert not lock_path(out).exists()
    with output_lock(out):  # taken again after release
        pass


def test_item2_two_processes_one_output(tmp_path, corpus, model_dir):
    """Two real runs at once: exactly one writes the output, the other exits 2 with one line."""
    out = tmp_path / "same.jsonl"
    cmd = [sys.executable, "-m", "headseg", "segment", str(corpus), "--format", "jsonl", "--docs-per-batch", "4",
           "--out", str(out), "--model", model_dir, "--backend", "torch", "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, env=env) for _ in range(2)]
    results = sorted((p.wait(timeout=300), p.stderr.read().decode()) for p in procs)
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    # the two may also run one after the other (each then writes the whole output once)
    assert results[1][0] in (0, 2) and results[0][0] == 0, results
    if results[1][0] == 2:
        assert _one_line(results[1][1]) and "another headseg run" in results[1][1]
    assert sorted({r["document"] for r in records}) == [f"doc-{i}" for i in range(6)]
    assert len(records) == len({(r["document"], r["index"]) for r in records})  # no record twice


# ------------------------------------------------------------------ item 3
def test_item3_resume_refuses_a_changed_input(tmp_path, corpus, model_dir, capsys, monkeypatch):
    out = tmp_path / "out.jsonl"
    argv = journaled_argv([str(corpus)], out, model_dir)
    interrupted_run(argv, monkeypatch)
    capsys.readouterr()
    kept = out.read_bytes()
    assert {json.loads(x)["document"] for x in kept.splitlines()} == {"doc-0", "doc-1"}
    # one journaled document is edited: its old text and offsets must not survive a resume
    lines = corpus.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[1])
    rec["text"] = rec["text"].replace("Monday", "Tuesday")
    lines[1] = json.dumps(rec)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc, err = _run(argv + ["--resume"], capsys)
    assert rc == 2 and _one_line(err) and "doc-1 changed since the interrupted run" in err, err
    assert out.read_bytes() == kept and (tmp_path / "out.jsonl.journal").exists()
    # the unchanged input resumes to the uninterrupted output
    lines[1] = json.dumps({**rec, "text": rec["text"].replace("Tuesday", "Monday")})
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(argv + ["--resume"]) == 0
    full = tmp_path / "full.jsonl"
    assert main(argv[:argv.index("--out") + 1] + [str(full)] + argv[argv.index("--out") + 2:]) == 0
    assert out.read_bytes() == full.read_bytes()


# ------------------------------------------------------------------ item 4
def test_item4_resume_refuses_a_file_headseg_did_not_write(tmp_path, corpus, capsys):
    out = tmp_path / "notes.jsonl"
    out.write_text('{"mine": 1}\n', encoding="utf-8")
    rc, err = _run(["segment", str(corpus), "--format", "jsonl", "--out", str(out), "--resume"] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and "not a headseg JSONL output" in err, err
    assert out.read_text(encoding="utf-8") == '{"mine": 1}\n'
    # a finished headseg output (no journal, records as first line) has nothing left to resume
    seg = Segmentation.from_boundaries("One topic. Another.", [11])
    out.write_text("".join(json.dumps(r) + "\n" for r in seg.to_records("doc-0")), encoding="utf-8")
    rc, err = _run(["segment", str(corpus), "--format", "jsonl", "--out", str(out), "--resume"] + NO_MODEL, capsys)
    assert rc == 0 and "nothing to resume" in err


def test_item4_force_for_a_file_headseg_did_not_write(tmp_path, corpus, capsys):
    """The rule behind item 4: --out never replaces what headseg did not write, unless --force."""
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes\n", encoding="utf-8")
    for argv in (["segment", str(corpus), "--out", str(mine)],
                 ["segment", str(corpus), "--format", "jsonl", "--out", str(mine)],
                 ["inspect", "Some text here.", "--save", str(mine)]):
        rc, err = _run(argv + NO_MODEL, capsys)
        assert rc == 2 and _one_line(err) and "not an output of headseg" in err and "--force" in err, err
        rc, err = _run(argv + NO_MODEL + ["--force"], capsys)
        assert rc == 3, err  # past the check: the missing model stops it
    assert mine.read_text(encoding="utf-8") == "my notes\n"
    data = tmp_path / "data.ref"
    data.write_text("==========\nOne a. Two b.\n==========\nThree c. Four d.\n==========\n", encoding="utf-8")
    argv = ["evaluate", str(data), "--method", "random", "--out", str(mine), "--quiet"]
    rc, err = _run(argv, capsys)
    assert rc == 2 and _one_line(err) and "not an output of headseg" in err, err
    assert mine.read_text(encoding="utf-8") == "my notes\n"
    assert main(argv + ["--force"]) == 0
    assert json.loads(mine.read_text(encoding="utf-8"))["format"] == "headseg-eval-results"
    assert main(argv) == 0  # now headseg's own results file: taken up again without --force


def test_item4_segment_outputs_are_recognised(tmp_path):
    from headseg.cli.formats import is_segment_output
    from headseg.cli.sinks import StreamSink

    docs = [(0, "a", Segmentation.from_boundaries("One topic. Another topic.", [11])),
            (1, "b", Segmentation.from_boundaries("Just one.", []))]
    for fmt in ("text", "json", "jsonl"):
        for single in (True, False):
            p = tmp_path / f"{fmt}-{single}.out"
            sink = StreamSink(fmt, single, str(p))
            sink.write_batch(docs[:1] if single else docs)
            sink.close()
            assert is_segment_output(p) and is_segment_output(p, fmt), (fmt, single)
    (tmp_path / "x.json").write_text('{"documents": []}')
    (tmp_path / "x.txt").write_text("----- not a segment\n")
    assert not is_segment_output(tmp_path / "x.json") and not is_segment_output(tmp_path / "x.txt")


# ------------------------------------------------------------------ item 8
def test_item8_notes_have_one_prefix(capsys):
    from headseg.cli import _configure_process

    undo = _configure_process()
    try:
        handler = next(h for h in logging.getLogger("headseg").handlers if getattr(h, "_headseg_cli", False))
        for msg in ("headseg: note: stored results of random were made with different settings",
                    "note: stored results of random were made with different settings"):
            record = logging.LogRecord("headseg", logging.WARNING, __file__, 1, msg, None, None)
            assert handler.format(record) == \
                "headseg: note: stored results of random were made with different settings"
    finally:
        undo()


def test_item8_segments_go_with_level_topic(tmp_path, capsys):
    from headseg.segmenter.options import SegmentOptions

    (tmp_path / "a.txt").write_text("One. Two. Three.", encoding="utf-8")
    rc, err = _run(["segment", str(tmp_path / "a.txt"), "--level", "unit", "--segments", "3"] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and "--segments goes with --level topic" in err, err
    with pytest.raises(InputError, match="segments goes with level topic"):
        SegmentOptions(level="unit", segments=3)
    assert SegmentOptions(level="topic", segments=3).segments == 3


def test_item8_negative_layer_is_named_as_given(tmp_path, config_only, capsys):
    rc, err = _run(["inspect", "Some text here.", "--layer", "-7", "--model", config_only], capsys)
    assert rc == 2 and _one_line(err) and "--layer -7 is out of range" in err and "0..5" in err, err


@pytest.mark.parametrize("spans", [[(0.0, 4.0), (5, 9)], [(0, 4), (5, 9.0)], [(0, 4.5), (5, 9)],
                                   [(True, 4), (5, 9)]])
def test_item8_splitter_float_spans_are_refused(spans):
    from headseg.analysis.text import tile_spans

    with pytest.raises(InputError, match="pairs of integers"):
        tile_spans("One. Two.", spans)
    import numpy as np

    assert tile_spans("One. Two.", [(np.int64(0), 4), (5, np.int32(9))]) == [(0, 5), (5, 9)]


def test_item8_unreadable_folder_is_permission_denied(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "a.txt").write_text("Text.", encoding="utf-8")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(folder):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # as root, chmod 000 would still be readable
    rc, err = _run(["segment", str(folder)] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and f"{folder}: permission denied" in err, err


def test_item8_unreadable_file_is_found_before_the_model(tmp_path, capsys, monkeypatch):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("Text.", encoding="utf-8")
    bad.write_text("Secret.", encoding="utf-8")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if os.fspath(p) == str(bad) else real(p, mode, **k))
    rc, err = _run(["segment", str(bad)] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and f"{bad}: permission denied" in err, err
    # with other inputs too (issue 35 item 23: every input is checked before the model loads)
    rc, err = _run(["segment", str(good), str(bad)] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and f"{bad}: permission denied" in err, err


# ------------------------------------------------------------------ item 9
@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet"])
def test_item9_out_under_a_missing_folder(tmp_path, model_dir, capsys, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    (tmp_path / "a.txt").write_text(" ".join(SENTENCES), encoding="utf-8")
    out = tmp_path / "new" / "deeper" / f"o.{fmt}"
    rc, err = _run(["segment", str(tmp_path / "a.txt"), "--format", fmt, "--out", str(out), "--model", model_dir,
                    "--backend", "torch", "--quiet"], capsys)
    assert rc == 0, err
    ref = tmp_path / f"ref.{fmt}"
    assert main(["segment", str(tmp_path / "a.txt"), "--format", fmt, "--out", str(ref), "--model", model_dir,
                 "--backend", "torch", "--quiet"]) == 0
    assert out.read_bytes() == ref.read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # no lock or temporary left


# ------------------------------------------------------------------ item 10
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [
    ["segment", "{text}", "--model", "{model}", "--backend", "torch", "--quiet"],
    ["segment", "{text}", "--format", "jsonl", "--model", "{model}", "--backend", "torch", "--quiet"],
    ["inspect", "{text}", "--model", "{model}", "--max-tokens", "32"],
    ["evaluate", "{text}", "--method", "random,even", "--quiet"],
])
def test_item10_full_device_is_one_line(tmp_path, model_dir, capsys, monkeypatch, argv):
    text = tmp_path / "doc.ref"
    text.write_text("==========\n" + "\n".join(SENTENCES[:3]) + "\n==========\n" + "\n".join(SENTENCES[3:]) + "\n",
                    encoding="utf-8")
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)  # here, not in a fixture: capsys sets stdout for the test body
        rc = main([a.format(text=text, model=model_dir) for a in argv])
        monkeypatch.undo()
    err = capsys.readouterr().err
    assert rc == 1 and _one_line(err) and "No space left on device" in err, err


@pytest.mark.parametrize("argv", [["segment", "{text}", "--out", "/dev/full"],
                                  ["evaluate", "{text}", "--out", "/dev/full"],
                                  ["inspect", "{text}", "--save", "/dev/full"]])
def test_item10_out_dev_full_is_refused(tmp_path, capsys, argv):
    text = tmp_path / "doc.txt"
    text.write_text("One. Two.\n", encoding="utf-8")
    rc, err = _run([a.format(text=text) for a in argv] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and "not a place for output" in err, err


def _headseg(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-m", "headseg", *args], env=env, stderr=subprocess.PIPE, **kw)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_item10_full_device_in_a_process(tmp_path, model_dir):
    """In a process of its own: nothing printed at exit by the interpreter's last flush either."""
    text = tmp_path / "doc.txt"
    text.write_text(" ".join(SENTENCES), encoding="utf-8")
    with open("/dev/full", "w") as full:
        p = _headseg("segment", str(text), "--model", model_dir, "--backend", "torch", "--quiet", stdout=full)
        err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 1 and _one_line(err) and "No space left on device" in err, err


def test_item10_broken_pipe_is_quiet(tmp_path, model_dir):
    text = tmp_path / "big.txt"
    text.write_text("\n\n".join(" ".join(SENTENCES) for _ in range(400)), encoding="utf-8")
    p = _headseg("segment", str(text), "--level", "unit", "--model", model_dir, "--backend", "torch", "--quiet",
                 stdout=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()  # `| head -1`
    err = p.stderr.read().decode()
    assert first.startswith(b"----- segment 1/")
    assert p.wait(timeout=300) == 0 and err == "", err


# ------------------------------------------------------------------ item 11
def test_item11_max_tokens_over_the_model_limit(config_only, capsys):
    rc, err = _run(["inspect", "Some text here.", "--max-tokens", "100000", "--model", config_only], capsys)
    assert rc == 2 and _one_line(err) and "over the model's limit of 512 tokens" in err, err


def test_item11_api_checks_max_tokens_before_the_weights(embedded):
    from headseg.analysis.inspect import inspect_text

    with pytest.raises(InputError, match="outside 3..512"):
        inspect_text("Some text here.", max_tokens=100000, loaded=embedded)


# ------------------------------------------------------------------ item 12
def test_item12_lone_surrogate(tiny_bert, tmp_path, model_dir, capsys):
    from headseg.api import Segmenter

    seg = Segmenter(model=tiny_bert, backend="torch")
    with pytest.raises(InputError, match=r"lone surrogate U\+D800 at character 1"):
        seg.segment("a\ud800b")
    assert seg.segment("a\u00e9b").text == "a\u00e9b"
    # on the command line (an argument of undecodable bytes arrives with surrogates): exit 2, one line
    rc, err = _run(["inspect", "caf\udce9 au lait", "--model", model_dir, "--max-tokens", "32"], capsys)
    assert rc == 2 and _one_line(err) and "lone surrogate U+DCE9" in err, err


# ------------------------------------------------------------------ item 13
def test_item13_unreachable_ray_address_study(tmp_path, corpus, config_only, capsys):
    rc, err = _run(["study", str(corpus), "--out", str(tmp_path / "s"), "--engine", "ray", "--address", "127.0.0.1:1",
                    "--model", config_only], capsys)
    assert rc == 2 and _one_line(err) and "--address 127.0.0.1:1: cannot reach a Ray cluster" in err, err


def test_item13_unreachable_ray_address(tmp_path, corpus, capsys):
    from headseg.analysis.ray import probe_address

    with socket.socket() as s:  # a loopback port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match="cannot reach a Ray cluster"):
        probe_address(f"127.0.0.1:{port}")
    with pytest.raises(InputError, match="cannot reach a Ray cluster"):
        probe_address(f"ray://127.0.0.1:{port}")
    probe_address("auto")  # left to Ray (a listener that answers is tests/cli/test_hardening3.py's, item 6)
    pytest.importorskip("ray")
    rc, err = _run(["segment", str(corpus), "--engine", "ray", "--address", "127.0.0.1:1", "--format", "jsonl",
                    "--out", str(tmp_path / "r.jsonl")] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and "--address 127.0.0.1:1: cannot reach a Ray cluster" in err, err


# ------------------------------------------------------------------ item 15
@pytest.mark.parametrize("argv, message", [
    (["inspect", "Some text.", "--layer", "99", "--model", "{cfg}"], "--layer 99 is out of range"),
    (["inspect", "Some text.", "--head", "-3", "--model", "{cfg}"], "--head -3 is out of range"),
    (["study", "{text}", "--out", "{tmp}/s", "--attention-threshold", "nan", "--model", "{cfg}"],
     "--attention-threshold must be a finite number"),
    (["study", "{text}", "--out", "{tmp}/s", "--seq-len", "4096", "--model", "{cfg}"],
     "over the model's limit of 512"),
    (["export", "--heads", "abc", "--model", "{cfg}"], "'abc' is not LAYER:HEAD"),
    (["export", "--heads", "3:2", "--profile", "P", "--model", "{cfg}"], "either --profile or --heads"),
    (["export", "--out", "{tmp}/D", "--cache", "--model", "{cfg}"], "either --out DIR or --cache"),
    (["segment", "{text}", "--artifact", "{tmp}/D", "--backend", "torch", "--model", "{cfg}"],
     "does not go with --backend torch"),
    (["evaluate", "{text}", "--method", "nonsense", "--model", "{cfg}"], "unknown method 'nonsense'"),
    (["segment", "{text}", "--encoding", "nonsense", "--model", "{cfg}"], "unknown text encoding 'nonsense'"),
    (["inspect", "{text}", "--encoding", "rot13", "--model", "{cfg}"], "unknown text encoding 'rot13'"),
    (["evaluate", "{text}", "--encoding", "nonsense", "--model", "{cfg}"], "unknown text encoding"),
    (["study", "{text}", "--out", "{tmp}/s", "--encoding", "nonsense", "--model", "{cfg}"], "unknown text encoding"),
])
def test_item15_flag_conflicts_exit_2_before_the_model(tmp_path, config_only, capsys, argv, message):
    text = tmp_path / "doc.txt"
    text.write_text("One. Two.\n", encoding="utf-8")
    rc, err = _run([a.format(cfg=config_only, text=text, tmp=tmp_path) for a in argv], capsys)
    assert rc == 2 and _one_line(err) and message in err, err
