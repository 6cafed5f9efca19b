"""``headseg segment --resume``: a changed input, an output headseg did not write, a journal that is not
its own or a shortened output are refused, and a refused resume changes nothing.

``NO_MODEL`` shows that a check ran before any model load: reaching the load would exit 3.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.segments import Segmentation
from headseg.cli import main
from pathlib import Path

from cli_helpers import NO_MODEL, TEXT, interrupted_run, journaled_argv, one_line, run


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
    rc, err = run(argv + ["--resume"], capsys)
    assert rc == 2 and one_line(err) and "doc-1 changed since the interrupted run" in err, err
    assert out.read_bytes() == kept and (tmp_path / "out.jsonl.journal").exists()
    # the unchanged input resumes to the uninterrupted output
    lines[1] = json.dumps({**rec, "text": rec["text"].replace("Tuesday", "Monday")})
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(argv + ["--resume"]) == 0
    full = tmp_path / "full.jsonl"
    assert main(argv[:argv.index("--out") + 1] + [str(full)] + argv[argv.index("--out") + 2:]) == 0
    assert out.read_bytes() == full.read_bytes()


def test_item4_resume_refuses_a_file_headseg_did_not_write(tmp_path, corpus, capsys):
    out = tmp_path / "notes.jsonl"
    out.write_text('{"mine": 1}\n', encoding="utf-8")
    rc, err = run(["segment", str(corpus), "--format", "jsonl", "--out", str(out), "--resume"] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "not a headseg JSONL output" in err, err
    assert out.read_text(encoding="utf-8") == '{"mine": 1}\n'
    # a finished headseg output (no journal, records as first line) has nothing left to resume
    seg = Segmentation.from_boundaries("One topic. Another.", [11])
    out.write_text("".join(json.dumps(r) + "\n" for r in seg.to_records("doc-0")), encoding="utf-8")
    rc, err = run(["segment", str(corpus), "--format", "jsonl", "--out", str(out), "--resume"] + NO_MODEL, capsys)
    assert rc == 0 and "nothing to resume" in err


def _snapshot(*paths) -> list[tuple[bytes, int]]:
    return [(p.read_bytes(), p.stat().st_mtime_ns) for p in paths]


@pytest.mark.parametrize("change", [["--penalty", "0.5"], ["--level", "unit"], ["--encoding", "latin-1"],
                                    ["--max-chars", "90"], ["--model", "MODEL2"], ["EXTRA"]])
def test_issue35_item3_refused_resume_changes_nothing(tmp_path, corpus, model_dir, capsys, monkeypatch, change):
    import shutil

    out = tmp_path / "out.jsonl"
    argv = journaled_argv([str(corpus)], out, model_dir)
    interrupted_run(argv, monkeypatch)
    capsys.readouterr()
    jpath = tmp_path / "out.jsonl.journal"
    before = _snapshot(out, jpath)
    if change == ["--model", "MODEL2"]:
        other = tmp_path / "model2"
        shutil.copytree(model_dir, other)
        change = ["--model", str(other)]
    if change == ["EXTRA"]:
        extra = tmp_path / "extra.txt"
        extra.write_text(TEXT, encoding="utf-8")
        argv, change = argv[:2] + [str(extra)] + argv[2:], []
    rc, err = run(argv + change + ["--resume"], capsys)
    assert rc == 2 and one_line(err) and "--resume" in err, err
    assert _snapshot(out, jpath) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_issue35_item3_refused_resume_from_stdin_changes_nothing(tmp_path, corpus, model_dir, capsys, monkeypatch):
    """Standard input is read once, so its journaled documents are checked as they come: the output (with the
    tail a killed run left after its last journaled batch) and the journal stay as they were until they pass."""
    import io
    import sys

    out = tmp_path / "out.jsonl"
    argv = journaled_argv(["-", "--input-format", "jsonl"], out, model_dir)
    data = corpus.read_bytes()

    def stdin(raw: bytes):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))

    stdin(data)
    interrupted_run(argv, monkeypatch)
    capsys.readouterr()
    with out.open("ab") as fh:
        fh.write(b'{"document": "doc-2", "ind')  # torn by the kill
    jpath = tmp_path / "out.jsonl.journal"
    before = _snapshot(out, jpath)
    stdin(data.replace(b"Monday", b"Tuesday"))
    rc, err = run(argv + ["--resume"], capsys)
    assert rc == 2 and one_line(err) and "changed since the interrupted run" in err, err
    assert _snapshot(out, jpath) == before
    stdin(data)  # the same input resumes to the uninterrupted output
    assert main(argv + ["--resume"]) == 0
    full = tmp_path / "full.jsonl"
    stdin(data)
    assert main(argv[:argv.index("--out") + 1] + [str(full)] + argv[argv.index("--out") + 2:]) == 0
    assert out.read_bytes() == full.read_bytes() and not jpath.exists()


def test_issue35_item3_documents_before_the_last_journaled_wait_for_its_check():
    from headseg.analysis.errors import InputError
    from headseg.cli.segment import _pending, resume_skip
    from headseg.cli.journal import document_digest

    done = {0: ("a", document_digest("A")), 2: ("c", document_digest("C"))}  # "b" failed in the interrupted run
    docs = [(0, "a", "A"), (1, "b", "B"), (2, "c", "C changed"), (3, "d", "D")]
    got = []
    with pytest.raises(InputError, match="c changed since"):
        for doc in _pending(iter(docs), resume_skip(done), last=2):
            got.append(doc)
    assert got == []
    docs[2] = (2, "c", "C")
    assert list(_pending(iter(docs), resume_skip(done), last=2)) == [(1, "b", "B"), (3, "d", "D")]


def test_a_journal_path_headseg_did_not_write_is_kept(tmp_path, doc, model_dir, capsys):
    """`--format jsonl --out F` truncated and then deleted an existing F.journal of the user's."""
    out = tmp_path / "o.jsonl"
    journal = tmp_path / "o.jsonl.journal"
    journal.write_text("my notes\n", encoding="utf-8")
    rc, err = run(["segment", str(doc), "--format", "jsonl", "--out", str(out)] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "is not a headseg journal" in err, err
    assert journal.read_text(encoding="utf-8") == "my notes\n" and not out.exists()
    # --force replaces it, as it would --out itself
    rc, err = run(["segment", str(doc), "--format", "jsonl", "--out", str(out), "--force", "--model", model_dir,
                    "--quiet"], capsys)
    assert rc == 0 and out.stat().st_size > 0 and not journal.exists(), err


def test_a_linked_journal_is_never_written_through(tmp_path, doc, capsys):
    """A symlink at F.journal made headseg overwrite (then orphan) the file it points at."""
    victim = tmp_path / "victim.txt"
    victim.write_text("secret", encoding="utf-8")
    journal = tmp_path / "o.jsonl.journal"
    journal.symlink_to(victim)
    for extra in ([], ["--force"]):
        rc, err = run(["segment", str(doc), "--format", "jsonl", "--out", str(tmp_path / "o.jsonl")] + extra
                       + NO_MODEL, capsys)
        assert rc == 2 and one_line(err) and "journal" in err, err
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
    assert run(journaled_argv(_three_docs(tmp_path, doc), whole, model_dir), capsys)[0] == 0
    interrupted_run(argv, monkeypatch)  # killed after its first batch: the journal stays
    journal = Path(str(out) + ".journal")
    header = journal.read_text(encoding="utf-8").splitlines()[0]
    journal.write_text(header + "\n", encoding="utf-8")  # nothing finished yet
    out.unlink()
    rc, err = run(argv + ["--resume"], capsys)
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
    rc, err = run(argv + ["--resume"], capsys)
    assert rc == 2 and one_line(err) and "shorter than the" in err, err
