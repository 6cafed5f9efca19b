"""The front door under a careless or hostile user: one regression test per defect the audit confirmed.

A model that cannot be loaded (``NO_MODEL``) shows that a refusal came before
any model load: reaching the load would exit 3.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.outputs import check_output_dir, lock_path
from headseg.cli import main

from cli_helpers import interrupted_run, journaled_argv, one_line as _one_line, run as _run

NO_MODEL = ["--model", "/nonexistent/model"]
TEXT = ("The committee met on Monday. It approved the budget after a long debate. "
        "Rain fell all night. The river rose quickly. Farmers moved their cattle.")
EVAL_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "docs.jsonl"








@pytest.fixture
def doc(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


# ------------------------------------------------------- outputs through symbolic links
@pytest.mark.parametrize("fmt", ["text", "json", "parquet"])
def test_segment_out_through_a_link_keeps_the_link(tmp_path, doc, model_dir, capsys, fmt):
    """An atomic output renamed over a symlink deleted the link and left its target stale."""
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / f"out.{fmt}"
    link = tmp_path / f"link.{fmt}"
    link.symlink_to(target)
    rc, err = _run(["segment", str(doc), "--format", fmt, "--out", str(link), "--model", model_dir, "--quiet"],
                   capsys)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.is_file() and target.stat().st_size > 0
    if fmt == "json":
        assert json.loads(target.read_text(encoding="utf-8"))["document"] == str(doc)
    # a second run replaces the target (a headseg output now), still through the link
    before = target.stat().st_ino
    rc, err = _run(["segment", str(doc), "--format", fmt, "--out", str(link), "--model", model_dir, "--quiet"],
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
    rc, err = _run(["segment", str(doc), "--out", str(link)] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and "whose folder does not exist" in err, err
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


# ------------------------------------------------------- the --resume journal
def test_a_journal_path_headseg_did_not_write_is_kept(tmp_path, doc, model_dir, capsys):
    """`--format jsonl --out F` truncated and then deleted an existing F.journal of the user's."""
    out = tmp_path / "o.jsonl"
    journal = tmp_path / "o.jsonl.journal"
    journal.write_text("my notes\n", encoding="utf-8")
    rc, err = _run(["segment", str(doc), "--format", "jsonl", "--out", str(out)] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and "is not a headseg journal" in err, err
    assert journal.read_text(encoding="utf-8") == "my notes\n" and not out.exists()
    # --force replaces it, as it would --out itself
    rc, err = _run(["segment", str(doc), "--format", "jsonl", "--out", str(out), "--force", "--model", model_dir,
                    "--quiet"], capsys)
    assert rc == 0 and out.stat().st_size > 0 and not journal.exists(), err


def test_a_linked_journal_is_never_written_through(tmp_path, doc, capsys):
    """A symlink at F.journal made headseg overwrite (then orphan) the file it points at."""
    victim = tmp_path / "victim.txt"
    victim.write_text("secret", encoding="utf-8")
    journal = tmp_path / "o.jsonl.journal"
    journal.symlink_to(victim)
    for extra in ([], ["--force"]):
        rc, err = _run(["segment", str(doc), "--format", "jsonl", "--out", str(tmp_path / "o.jsonl")] + extra
                       + NO_MODEL, capsys)
        assert rc == 2 and _one_line(err) and "journal" in err, err
        assert victim.read_text(encoding="utf-8") == "secret" and journal.is_symlink()


def _three_docs(tmp_path, doc) -> list[str]:
    """Three inputs, so that a journaled run of two documents a batch can die after its first batch."""
    paths = []
    for name in ("a.txt", "b.txt", "c.txt"):
        p = tmp_path / name
        p.write_text(doc.read_text(encoding="utf-8").replace("Monday", name[0]), encoding="utf-8")
        paths.append(str(p))
    return paths


def test_resume_with_a_journal_and_no_output(tmp_path, doc, model_dir, capsys, monkeypatch):
    """A journal without its output (killed before the first batch, or the output removed) was a traceback."""
    out = tmp_path / "o.jsonl"
    argv = journaled_argv(_three_docs(tmp_path, doc), out, model_dir)
    whole = tmp_path / "whole.jsonl"
    assert _run(journaled_argv(_three_docs(tmp_path, doc), whole, model_dir), capsys)[0] == 0
    interrupted_run(argv, monkeypatch)  # killed after its first batch: the journal stays
    journal = Path(str(out) + ".journal")
    header = journal.read_text(encoding="utf-8").splitlines()[0]
    journal.write_text(header + "\n", encoding="utf-8")  # nothing finished yet
    out.unlink()
    rc, err = _run(argv + ["--resume"], capsys)
    assert rc == 0 and "Traceback" not in err and out.read_bytes() == whole.read_bytes(), err


def test_resume_refuses_a_shortened_output_before_the_model(tmp_path, doc, model_dir, capsys, monkeypatch):
    out = tmp_path / "o.jsonl"
    argv = journaled_argv(_three_docs(tmp_path, doc), out, model_dir)
    interrupted_run(argv, monkeypatch)
    capsys.readouterr()  # the interrupted run's own line
    out.write_bytes(out.read_bytes()[:10])

    def no_model(args):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr("headseg.cli.segment.load_segmenter", no_model)
    rc, err = _run(argv + ["--resume"], capsys)
    assert rc == 2 and _one_line(err) and "shorter than the" in err, err


# ------------------------------------------------------- export arguments
@pytest.mark.parametrize("argv, message", [
    (["--opset", "0"], "--opset: opset 0 has no LayerNormalization"),
    (["--opset", "9999"], "--opset: opset 9999 is newer than the installed onnx"),
    (["--out", ""], "--out: empty path"),
])
def test_export_argument_errors_before_the_model(capsys, argv, message):
    """--opset was refused by the builder or onnxruntime after the export began (exit 5); --out '' exported
    into the cache."""
    rc, err = _run(["export", "--heads", "0:0"] + argv + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and message in err, err


def test_export_opset_bounds_are_the_builders():
    import onnx

    from headseg.export.builder import MIN_OPSET, check_opset

    check_opset(MIN_OPSET)
    check_opset(onnx.defs.onnx_opset_version())
    for bad in (MIN_OPSET - 1, onnx.defs.onnx_opset_version() + 1):
        with pytest.raises(Exception, match=f"opset {bad} "):
            check_opset(bad)


# ------------------------------------------------------- serve arguments
@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "--threads must be a positive integer (got 0)"),
    (["--threads", "-2"], "--threads must be a positive integer (got -2)"),
    (["--api-key", ""], "--api-key must not be empty"),
])
def test_serve_argument_errors(argv, message):
    """--threads 0 started a server (segment refuses it); an empty key said '--the API key must not be empty'."""
    pytest.importorskip("fastapi")
    from headseg.cli import build_parser
    from headseg.cli.serve import config_of

    args = build_parser().parse_args(["serve"] + argv)
    with pytest.raises(InputError) as info:
        config_of(args)
    assert str(info.value) == message


def test_evaluate_redo_goes_with_out(capsys):
    """--redo without --out was accepted and meant nothing (--force without --out is refused)."""
    rc, err = _run(["evaluate", str(EVAL_DATA), "--method", "random", "--redo"], capsys)
    assert rc == 2 and _one_line(err) and "--redo goes with --out" in err, err


def test_notes_on_stderr_carry_the_prefix(tmp_path, capsys):
    """Every line headseg writes on stderr starts with 'headseg: ' ('results written to ...' did not)."""
    rc, err = _run(["evaluate", str(EVAL_DATA), "--method", "random", "--out", str(tmp_path / "r.json")], capsys)
    assert rc == 0 and err and all(line.startswith("headseg: ") for line in err.splitlines()), err


# ------------------------------------------------------- the host process
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


# ------------------------------------------------------- devices
def test_cuda_without_a_gpu_is_refused_before_the_export(tmp_path, doc, model_dir, capsys, monkeypatch):
    """`segment --device cuda` without a usable GPU exported an fp16 graph into the cache, then exited 6."""
    import headseg.export.runtime as runtime

    monkeypatch.setattr(runtime, "cuda_provider_works", lambda: False)
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    rc, err = _run(["segment", str(doc), "--device", "cuda", "--model", model_dir], capsys)
    assert rc == 6 and _one_line(err) and "no usable CUDA GPU" in err, err
    assert not (tmp_path / "cache" / "onnx").exists() or not any((tmp_path / "cache" / "onnx").iterdir())
