"""inspect --save, study --out and evaluate --out: refused before any work when they cannot or must not be written (issue 15)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from headseg.cli import main

from cli_helpers import one_line as _one_line, run as _run

FIX = Path(__file__).resolve().parents[1] / "fixtures"
#: a model that does not exist: a check that runs before the model load answers exit 2, not 3
NO_MODEL = ["--model", "/nonexistent/model"]






@pytest.fixture
def text_file(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text("The cat sat on the mat. The dog ran off.\n")
    return p


def test_inspect_save_onto_its_input_is_refused_before_loading(text_file, tmp_path, capsys):
    before = text_file.read_bytes()
    os.link(text_file, tmp_path / "hard.txt")
    (tmp_path / "sym.txt").symlink_to(text_file)
    for save in (text_file, tmp_path / "hard.txt", tmp_path / "sym.txt"):
        rc, err = _run(["inspect", str(text_file), "--save", str(save)] + NO_MODEL, capsys)
        assert rc == 2 and _one_line(err) and "same file" in err, err
    assert text_file.read_bytes() == before


@pytest.mark.parametrize("save, message", [
    ("{tmp}", "is a directory"),
    ("/proc/self/headseg.npz", "not a place for output"),
    ("{tmp}/doc.txt/x.npz", "is not a directory"),
])
def test_inspect_unwritable_save(text_file, tmp_path, capsys, save, message):
    rc, err = _run(["inspect", str(text_file), "--save", save.format(tmp=tmp_path)] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and message in err, err


@pytest.mark.parametrize("args, message", [
    (["--top", "-3"], "--top must be at least 1"),
    (["--top", "0"], "--top must be at least 1"),
    (["--window", "-1"], "--window must be at least 0"),
])
def test_inspect_bad_arguments_exit_2_before_loading(capsys, args, message):
    rc, err = _run(["inspect", "some text here"] + args + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and message in err, err


def test_inspect_top_is_honoured(capsys, tiny_bert, monkeypatch):
    # a valid --top still lists that many pairs (the check does not break the command)
    import headseg.cli.inspect as cli_inspect

    monkeypatch.setattr(cli_inspect, "load_model", lambda spec=None: tiny_bert)
    rc = main(["inspect", "The cat sat. The dog ran, fast.", "--layer", "1", "--top", "3"])
    out = capsys.readouterr().out
    assert rc == 0
    listing = out.split("top 3 similar token pairs:\n")[1].strip().splitlines()
    assert len(listing) == 3


@pytest.mark.parametrize("out, message", [
    ("{tmp}/file.txt", "exists and is not a directory"),
    ("/proc/self/study", "not a place for output"),
    ("{corpus}/study", "inside the input folder"),
    ("{tmp}/file.txt/study", "is not a directory"),
])
def test_study_out_refused_before_loading(tmp_path, capsys, out, message):
    corpus = tmp_path / "corpus"
    shutil.copytree(FIX / "study" / "docs", corpus)
    (tmp_path / "file.txt").write_text("x")
    rc, err = _run(["study", str(corpus), "--out", out.format(tmp=tmp_path, corpus=corpus)] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and message in err, err
    assert sorted(p.name for p in corpus.iterdir()) == ["a.txt", "b.ref"]


def test_study_non_empty_out_refused_before_loading(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "other").write_text("x")
    rc, err = _run(["study", str(FIX / "study" / "docs"), "--out", str(tmp_path / "out")] + NO_MODEL, capsys)
    assert rc == 2 and _one_line(err) and "--resume" in err


@pytest.mark.parametrize("out, message", [
    ("{data}", "same file"),
    ("{tmp}", "is a directory"),
    ("/proc/self/results.json", "not a place for output"),
    ("{datadir}/results.json", "inside the input folder"),
])
def test_evaluate_out_refused_before_work(tmp_path, capsys, out, message):
    data = tmp_path / "docs.jsonl"
    shutil.copy(FIX / "eval" / "docs.jsonl", data)
    datadir = tmp_path / "choi"
    shutil.copytree(FIX / "eval" / "choi_dir", datadir)
    before = data.read_bytes()
    rc, err = _run(["evaluate", str(data), str(datadir), "--method", "even", "--quiet",
                    "--out", out.format(tmp=tmp_path, data=data, datadir=datadir)], capsys)
    assert rc == 2 and _one_line(err) and message in err, err
    assert data.read_bytes() == before
    assert sorted(p.name for p in datadir.iterdir()) == ["1.ref", "2.ref", "3.ref"]


def test_evaluate_limit_is_an_input_error(capsys):
    rc, err = _run(["evaluate", str(FIX / "eval" / "docs.jsonl"), "--method", "even", "--limit", "0"], capsys)
    assert rc == 2 and "--limit" in err
