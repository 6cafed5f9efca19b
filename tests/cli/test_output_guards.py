"""What ``headseg`` writes, guarded before any work: one writer per output (locks), files headseg did
not write kept unless ``--force``, missing folders, full devices, closed or broken pipes, symbolic links,
outputs inside the cache, names too long for the file system.

A model that cannot be loaded (``NO_MODEL``, or ``config_only``: a folder with the embedded model's
``config.json`` and nothing else) shows that a check ran before any model load: reaching the load would
exit 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.outputs import check_output_dir, lock_path, output_lock
from headseg.analysis.segments import Segmentation
from headseg.cli import main

from cli_helpers import EVAL_DATA, NO_MODEL, SENTENCES, one_line, run


def test_item2_two_writers_one_output(tmp_path, corpus, capsys):
    out = tmp_path / "same.jsonl"
    argv = ["segment", str(corpus), "--format", "jsonl", "--docs-per-batch", "4", "--out", str(out)] + NO_MODEL
    # another run holds the output (flock: a second open file is refused even within one process)
    with output_lock(out):
        rc, err = run(argv, capsys)
        assert rc == 2 and one_line(err) and "another headseg run is writing it" in err, err
        # --resume while the interrupted run is still alive: refused the same way, before the model
        rc, err = run(argv + ["--resume"], capsys)
        assert rc == 2 and one_line(err) and "another headseg run" in err, err
    assert not out.exists() and not lock_path(out).exists()
    # once released, the next run gets past the lock (and fails only at the model: exit 3)
    rc, err = run(argv, capsys)
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
        rc, err = run([a.format(text=text, out=out) for a in argv] + ["--model", config_only], capsys)
    assert rc == 2 and one_line(err) and "another headseg run is writing it" in err, err


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
        assert one_line(results[1][1]) and "another headseg run" in results[1][1]
    assert sorted({r["document"] for r in records}) == [f"doc-{i}" for i in range(6)]
    assert len(records) == len({(r["document"], r["index"]) for r in records})  # no record twice


def test_item4_force_for_a_file_headseg_did_not_write(tmp_path, corpus, capsys):
    """The rule behind item 4: --out never replaces what headseg did not write, unless --force."""
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes\n", encoding="utf-8")
    for argv in (["segment", str(corpus), "--out", str(mine)],
                 ["segment", str(corpus), "--format", "jsonl", "--out", str(mine)],
                 ["inspect", "Some text here.", "--save", str(mine)]):
        rc, err = run(argv + NO_MODEL, capsys)
        assert rc == 2 and one_line(err) and "not an output of headseg" in err and "--force" in err, err
        rc, err = run(argv + NO_MODEL + ["--force"], capsys)
        assert rc == 3, err  # past the check: the missing model stops it
    assert mine.read_text(encoding="utf-8") == "my notes\n"
    data = tmp_path / "data.ref"
    data.write_text("==========\nOne a. Two b.\n==========\nThree c. Four d.\n==========\n", encoding="utf-8")
    argv = ["evaluate", str(data), "--method", "random", "--out", str(mine), "--quiet"]
    rc, err = run(argv, capsys)
    assert rc == 2 and one_line(err) and "not an output of headseg" in err, err
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


@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet"])
def test_item9_out_under_a_missing_folder(tmp_path, model_dir, capsys, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    (tmp_path / "a.txt").write_text(" ".join(SENTENCES), encoding="utf-8")
    out = tmp_path / "new" / "deeper" / f"o.{fmt}"
    rc, err = run(["segment", str(tmp_path / "a.txt"), "--format", fmt, "--out", str(out), "--model", model_dir,
                    "--backend", "torch", "--quiet"], capsys)
    assert rc == 0, err
    ref = tmp_path / f"ref.{fmt}"
    assert main(["segment", str(tmp_path / "a.txt"), "--format", fmt, "--out", str(ref), "--model", model_dir,
                 "--backend", "torch", "--quiet"]) == 0
    assert out.read_bytes() == ref.read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # no lock or temporary left


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
    assert rc == 1 and one_line(err) and "No space left on device" in err, err


@pytest.mark.parametrize("argv", [["segment", "{text}", "--out", "/dev/full"],
                                  ["evaluate", "{text}", "--out", "/dev/full"],
                                  ["inspect", "{text}", "--save", "/dev/full"]])
def test_item10_out_dev_full_is_refused(tmp_path, capsys, argv):
    text = tmp_path / "doc.txt"
    text.write_text("One. Two.\n", encoding="utf-8")
    rc, err = run([a.format(text=text) for a in argv] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "not a place for output" in err, err


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
    assert p.wait(timeout=300) == 1 and one_line(err) and "No space left on device" in err, err


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


@pytest.fixture
def cache_slot(tmp_path, monkeypatch):
    """A cached artifact's folder in a cache of this test's own, with a graph in it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HEADSEG_CACHE", str(cache))
    slot = cache / "onnx" / "bert-6x12-0123456789abcdef-0123456789ab-0123456789abcdef-int8"
    slot.mkdir(parents=True, mode=0o700)
    (slot / "model.onnx").write_bytes(b"the cached graph")
    return slot


@pytest.mark.parametrize("name", ["model.onnx", "new.txt", "../../out.txt"])
@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_issue35_item2_out_inside_the_cache_is_refused(doc, cache_slot, capsys, name, fmt):
    out = cache_slot / name
    rc, err = run(["segment", str(doc), "--format", fmt, "--out", str(out), "--force", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err, err
    assert (cache_slot / "model.onnx").read_bytes() == b"the cached graph"
    assert sorted(p.name for p in cache_slot.parent.parent.rglob("*")) == ["bert-6x12-0123456789abcdef-0123456789ab-"
                                                                           "0123456789abcdef-int8", "model.onnx",
                                                                           "onnx"]


def test_issue35_item2_a_link_into_the_cache_is_refused(doc, cache_slot, tmp_path, capsys):
    link = tmp_path / "innocent.txt"
    link.symlink_to(cache_slot / "model.onnx")
    rc, err = run(["segment", str(doc), "--out", str(link), "--force", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err, err
    assert (cache_slot / "model.onnx").read_bytes() == b"the cached graph"


def test_issue35_item2_export_out_inside_the_cache_is_refused(cache_slot, capsys):
    """An artifact written by name into a cache slot would be served as the cache's: only --cache writes there."""
    slot = cache_slot.parent / "bert-6x12-fedcba9876543210-ba9876543210-fedcba9876543210-fp32"
    rc, err = run(["export", *NO_MODEL, "--out", str(slot), "--force"], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err and "--cache" in err, err
    assert not slot.exists()


def _name_max(folder) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet"])
@pytest.mark.parametrize("extra", [1, -5])  # over the limit; under it, but too long for the lock beside it
def test_issue35_item12_out_name_too_long(doc, tmp_path, capsys, fmt, extra):
    out = tmp_path / ("a" * (_name_max(tmp_path) + extra))
    rc, err = run(["segment", str(doc), "--format", fmt, "--out", str(out), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "too long" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.txt"]


def test_issue35_item12_out_path_too_long(doc, tmp_path, capsys):
    out = tmp_path.joinpath(*["d"] * 2100, "x.txt")  # longer than PATH_MAX, each name short
    rc, err = run(["segment", str(doc), "--out", str(out), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "too long" in err and len(err) < 400, err


@pytest.mark.parametrize("command", [["export", "--out", "{long}"], ["evaluate", "{doc}", "--out", "{long}"],
                                     ["inspect", "{doc}", "--save", "{long}"]])
def test_issue35_item12_other_outputs_name_too_long(doc, tmp_path, capsys, command):
    long = str(tmp_path / ("a" * (_name_max(tmp_path) + 1)))
    rc, err = run([a.format(long=long, doc=doc) for a in command] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "too long" in err, err


def test_issue35_item12_closed_stdout(doc, tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "headseg", "segment", str(doc), *NO_MODEL], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert r.returncode == 2 and one_line(r.stderr) and "standard output is closed" in r.stderr, r.stderr


def test_issue35_item12_closed_stdout_any_command(monkeypatch, capsys):
    """A command that finds out only when it writes: the output cannot be written (exit 1), in one line."""
    import argparse
    import sys

    from headseg.cli import _run

    monkeypatch.setattr(sys, "stdout", None)
    rc = _run(argparse.Namespace(command="inspect", func=lambda args: print("a table")))
    assert sys.stdout is None
    err = capsys.readouterr().err
    assert rc == 1 and one_line(err) and "standard output is closed" in err, err


@pytest.mark.parametrize("fmt", ["text", "json", "parquet"])
def test_segment_out_through_a_link_keeps_the_link(tmp_path, doc, model_dir, capsys, fmt):
    """An atomic output renamed over a symlink deleted the link and left its target stale."""
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / f"out.{fmt}"
    link = tmp_path / f"link.{fmt}"
    link.symlink_to(target)
    rc, err = run(["segment", str(doc), "--format", fmt, "--out", str(link), "--model", model_dir, "--quiet"],
                   capsys)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.is_file() and target.stat().st_size > 0
    if fmt == "json":
        assert json.loads(target.read_text(encoding="utf-8"))["document"] == str(doc)
    # a second run replaces the target (a headseg output now), still through the link
    before = target.stat().st_ino
    rc, err = run(["segment", str(doc), "--format", fmt, "--out", str(link), "--model", model_dir, "--quiet"],
                   capsys)
    assert rc == 0 and link.is_symlink() and target.stat().st_ino != before, err


def test_evaluate_out_through_a_link_keeps_the_link(tmp_path, capsys):
    (tmp_path / "real").mkdir()
    target, link = tmp_path / "real" / "results.json", tmp_path / "link.json"
    link.symlink_to(target)
    rc = main([str(a) for a in ("evaluate", EVAL_DATA, "--method", "random", "--out", link, "--quiet")])
    capsys.readouterr()
    assert rc == 0 and link.is_symlink()
    assert json.loads(target.read_text(encoding="utf-8"))["format"] == "headseg-eval-results"


def test_a_link_into_a_missing_folder_is_refused(tmp_path, doc, capsys):
    link = tmp_path / "dangling.txt"
    link.symlink_to(tmp_path / "missing" / "out.txt")
    rc, err = run(["segment", str(doc), "--out", str(link)] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "whose folder does not exist" in err, err
    assert link.is_symlink() and not (tmp_path / "missing").exists()


def test_the_lock_follows_the_link(tmp_path):
    """Two runs writing one file through two names must take one lock."""
    target, link = tmp_path / "out.txt", tmp_path / "sub" / "link.txt"
    link.parent.mkdir()
    link.symlink_to(target)
    assert lock_path(link) == lock_path(target) == tmp_path / ".out.txt.headseg-lock"


def test_an_output_folder_with_a_linked_output_file_is_refused(tmp_path):
    """`study --force` would write its report through the link, over a file outside the folder."""
    out, elsewhere = tmp_path / "study", tmp_path / "mine.md"
    out.mkdir()
    elsewhere.write_text("my notes", encoding="utf-8")
    (out / "report.md").symlink_to(elsewhere)
    with pytest.raises(InputError, match="report.md in it is a symbolic link"):
        check_output_dir(out, files=("report.json", "report.md"))
    assert elsewhere.read_text(encoding="utf-8") == "my notes"


def test_atomic_writes_do_not_set_the_umask(tmp_path, monkeypatch):
    """Reading the umask by setting it to 0 left a window in which the host's other threads made 0666 files."""
    from headseg.analysis.writing import atomic_write_text

    old = os.umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", lambda mask: pytest.fail("os.umask was called"))
        atomic_write_text(tmp_path / "out.txt", "text")
    finally:
        monkeypatch.undo()
        os.umask(old)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o640
