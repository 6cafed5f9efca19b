"""Streaming ``headseg segment``: inputs, journal and resume, output checks, argument errors (issues 13, 15)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headseg.analysis.errors import InputError
from headseg.cli import main
from headseg.api import DocumentError, Segmenter

SENTENCES = ["The committee met on Monday.", "It approved the budget after a long debate.",
             "Rain fell all night.", "The river rose quickly.", "Farmers moved their cattle.",
             "Prices of grain went up.", "The school opened a new library.", "Children read there every day."]


def doc_text(i: int) -> str:
    return " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(2 + i % 4))


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    return str(tiny_bert_dir)


@pytest.fixture(scope="module")
def segmenter(tiny_bert):
    return Segmenter(model=tiny_bert, backend="torch")


def write_corpus(path: Path, n: int) -> list[dict]:
    recs = [{"id": f"doc-{i}", "text": doc_text(i)} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return recs


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------ the API
def test_iter_segment_order_lookahead_and_errors(segmenter):
    texts = [doc_text(i) for i in range(7)]
    expected = segmenter.segment_many(texts)
    pulled = []

    def items():
        for i, t in enumerate(texts):
            pulled.append(i)
            yield {"id": f"d{i}", "text": t} if i % 2 else t

    it = segmenter.iter_segment(items(), batch_docs=3)
    first = next(it)
    # look-ahead is one batch: three items read before the first result
    assert len(pulled) == 3
    rest = list(it)
    got = [first] + rest
    assert [g.boundaries for g in got] == [e.boundaries for e in expected]
    assert [g.meta.get("document") for g in got] == [None if i % 2 == 0 else f"d{i}" for i in range(7)]
    assert all("".join(s.text for s in g) == t for g, t in zip(got, texts))

    mixed = ["A first text. It has two sentences.", 5, {"id": "r", "text": None}, ("p", "Pairs work too. Yes.")]
    out = list(segmenter.iter_segment(mixed, errors="yield", batch_docs=2))
    assert isinstance(out[1], DocumentError) and out[1].index == 1 and "int" in out[1].reason
    assert isinstance(out[2], DocumentError) and out[2].document == "r" and "'text' is missing" in out[2].reason
    assert out[3].meta["document"] == "p" and "".join(s.text for s in out[3]) == "Pairs work too. Yes."
    with pytest.raises(InputError):
        list(segmenter.iter_segment(mixed))
    # the documents before a failure are still yielded when errors raise
    seen = []
    with pytest.raises(InputError):
        for r in segmenter.iter_segment(mixed, batch_docs=10):
            seen.append(r)
    assert len(seen) == 1 and seen[0].text == mixed[0]


def test_iter_segment_isolates_a_failing_document(segmenter, monkeypatch):
    texts = [doc_text(i) for i in range(4)]
    real = Segmenter.segment_many

    def flaky(self, batch, **kw):
        if any("BOOM" in t for t in batch):
            raise RuntimeError("model exploded")
        return real(self, batch, **kw)

    monkeypatch.setattr(Segmenter, "segment_many", flaky)
    out = list(segmenter.iter_segment(texts[:2] + ["BOOM. Here."] + texts[2:], errors="yield", batch_docs=5))
    assert [type(r).__name__ for r in out] == ["Segmentation"] * 2 + ["DocumentError"] + ["Segmentation"] * 2
    assert out[2].reason == "RuntimeError: model exploded" and out[2].index == 2
    assert [r.text for r in out if not isinstance(r, DocumentError)] == texts


# ------------------------------------------------------------------ the CLI
def test_inputs_folders_jsonl_empty_and_whitespace(tmp_path, model_dir, capsys):
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "b.txt").write_text(doc_text(1), encoding="utf-8")
    (tmp_path / "in" / "sub" / "a.txt").write_text(doc_text(2), encoding="utf-8")
    (tmp_path / "in" / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "in" / "ws.txt").write_text(" \n\t", encoding="utf-8")
    (tmp_path / "in" / "skip.bin").write_bytes(b"\x00")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"key": 7, "body": doc_text(3)}) + "\n\n" + json.dumps({"body": doc_text(4)}) + "\n")
    rc = main(["segment", str(tmp_path / "in"), str(corpus), "--text-field", "body", "--id-field", "key",
               "--model", model_dir, "--format", "jsonl", "--quiet"])
    assert rc == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    docs = list(dict.fromkeys(r["document"] for r in recs))
    # a folder's files (sorted) before its subfolders; the empty file has no segments; ids from
    # --id-field, else FILE:LINE
    assert docs == [str(tmp_path / "in" / "b.txt"), str(tmp_path / "in" / "ws.txt"),
                    str(tmp_path / "in" / "sub" / "a.txt"), "7", f"{corpus}:3"]
    texts = {str(tmp_path / "in" / "b.txt"): doc_text(1), str(tmp_path / "in" / "sub" / "a.txt"): doc_text(2),
             str(tmp_path / "in" / "ws.txt"): " \n\t", "7": doc_text(3), f"{corpus}:3": doc_text(4)}
    for d in docs:
        mine = [r for r in recs if r["document"] == d]
        assert [r["index"] for r in mine] == list(range(len(mine)))
        assert "".join(r["text"] for r in mine) == texts[d]
        assert all(texts[d][r["start"]:r["end"]] == r["text"] for r in mine)
    assert [r["text"] for r in recs if r["document"].endswith("ws.txt")] == [" \n\t"]

    # an empty file alone: no segments, exit 0, in every format
    for fmt, want in (("jsonl", ""), ("json", None)):
        rc = main(["segment", str(tmp_path / "in" / "empty.txt"), "--model", model_dir, "--format", fmt, "--quiet"])
        out = capsys.readouterr().out
        assert rc == 0
        if want is None:
            assert json.loads(out)["segments"] == []
        else:
            assert out == want


def test_failing_documents_are_reported_and_the_rest_go_on(tmp_path, model_dir, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "good1", "text": doc_text(0)}) + "\n" + "{not json\n"
                      + json.dumps({"id": "num", "text": 3}) + "\n" + json.dumps({"id": "good2", "text": doc_text(1)})
                      + "\n", encoding="utf-8")
    # a text file whose bytes go bad past the first ones that are checked before the model loads
    late = tmp_path / "late.txt"
    late.write_bytes(b"Fine text. " * 7000 + b"\xff\xfe bad")
    out = tmp_path / "o.jsonl"
    rc = main(["segment", str(corpus), str(late), "--model", model_dir, "--format", "jsonl", "--out", str(out),
               "--quiet"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 1
    assert sorted({r["document"] for r in read_jsonl(out)}) == ["good1", "good2"]
    assert any(f"{corpus}:2: not valid JSON" in e for e in err)
    assert any("num: field 'text' is of type int, not a string" in e for e in err)
    assert any(f"{late}: not valid utf-8 at byte 77000" in e for e in err)
    assert all(e.startswith("headseg: error: ") for e in err) and len(err) == 3
    # failures keep the journal, so --resume retries exactly them
    assert (tmp_path / "o.jsonl.journal").is_file()


def test_out_that_is_an_input_is_refused_before_work(tmp_path, capsys):
    src = tmp_path / "a.txt"
    src.write_text("Keep me. Please.", encoding="utf-8")
    os.link(src, tmp_path / "hard.txt")
    os.symlink(src, tmp_path / "sym.txt")
    # a model that does not exist: reaching it would exit 3, so exit 2 shows the check came first
    nomodel = str(tmp_path / "no-model")
    for out in (src, tmp_path / "hard.txt", tmp_path / "sym.txt"):
        for fmt in ("text", "jsonl"):
            rc = main(["segment", str(src), "--out", str(out), "--format", fmt, "--model", nomodel])
            err = capsys.readouterr().err
            assert rc == 2 and "is the input" in err and err.count("\n") == 1
    folder_out = tmp_path / "in"
    folder_out.mkdir()
    (folder_out / "x.txt").write_text("Inside a folder input.", encoding="utf-8")
    rc = main(["segment", str(folder_out), "--out", str(folder_out / "x.txt"), "--model", nomodel])
    assert rc == 2 and "is the input" in capsys.readouterr().err
    assert src.read_text(encoding="utf-8") == "Keep me. Please."


def test_unwritable_out_is_one_line_before_work(tmp_path, capsys):
    src = tmp_path / "a.txt"
    src.write_text("Some text. More.", encoding="utf-8")
    nomodel = str(tmp_path / "no-model")
    for out in (str(tmp_path), "/proc/headseg-out.jsonl", str(src) + "/below-a-file.jsonl"):
        rc = main(["segment", str(src), "--out", out, "--format", "jsonl", "--model", nomodel])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("headseg: error: --out") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no temporary left behind


@pytest.mark.parametrize("argv, message", [
    (["--segments", "0"], "--segments must be a positive integer"),
    (["--min-chars", "50", "--max-chars", "10"], "--min-chars (50) is larger than --max-chars (10)"),
    (["--max-tokens", "-3"], "--max-tokens must be a positive integer"),
    (["--penalty", "-1"], "--penalty must be a number from 0 to 1e+06"),
    (["--penalty", "1e308"], "--penalty must be a number from 0 to 1e+06"),
    (["--penalty", "nan"], "--penalty must be a number from 0 to 1e+06"),
    (["--docs-per-batch", "0"], "--docs-per-batch must be at least 1"),
    (["--batch-size", "0"], "--batch-size must be at least 1"),
    (["--resume"], "--resume needs --format jsonl and --out FILE"),
    (["--format", "parquet"], "--format parquet needs --out FILE"),
    (["--workers", "2"], "go with --engine ray"),
])
def test_argument_errors_exit_2_before_the_model_loads(tmp_path, capsys, argv, message):
    src = tmp_path / "a.txt"
    src.write_text("Some text.", encoding="utf-8")
    rc = main(["segment", str(src), "--model", str(tmp_path / "no-model"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1


def test_out_dash_is_stdout(tmp_path, model_dir, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = doc_text(5)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    rc = main(["segment", "-", "--out", "-", "--format", "jsonl", "--model", model_dir, "--quiet"])
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rc == 0 and "".join(r["text"] for r in recs) == text and {r["document"] for r in recs} == {"<stdin>"}
    assert not (tmp_path / "-").exists()


def test_formats_agree_and_json_array_streams(tmp_path, model_dir, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(doc_text(0), encoding="utf-8")
    b.write_text(doc_text(6), encoding="utf-8")
    rc = main(["segment", str(a), str(b), "--model", model_dir, "--format", "json", "--out", str(tmp_path / "o.json"),
               "--quiet"])
    assert rc == 0
    payload = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    main(["segment", str(a), str(b), "--model", model_dir, "--format", "jsonl", "--quiet"])
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["document"] for d in payload] == [str(a), str(b)]
    flat = [dict(s, document=d["document"]) for d in payload for s in d["segments"]]
    assert flat == recs
    # the array is laid out as json.dumps(indent=2) of the whole list would
    assert (tmp_path / "o.json").read_text(encoding="utf-8") == json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------ resume
def _cmd(corpus: Path, out: Path, model_dir: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "headseg", "segment", str(corpus), "--model", model_dir, "--backend", "torch",
            "--format", "jsonl", "--out", str(out), "--docs-per-batch", "2", "--quiet", *extra]


@pytest.mark.slow
def test_killed_run_resumes_to_the_uninterrupted_output(tmp_path, model_dir):
    n_docs = 300
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, n_docs)
    full = tmp_path / "full.jsonl"
    cmd = _cmd(corpus, full, model_dir)
    assert main(cmd[3:]) == 0
    assert not (tmp_path / "full.jsonl.journal").exists()

    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.journal"
    proc = subprocess.Popen(_cmd(corpus, out, model_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_bytes().count(b"\n") >= 6:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.002)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_docs = len(journal.read_text().splitlines()) - 1
    assert 0 < done_docs < n_docs

    resume = _cmd(corpus, out, model_dir, "--resume")[3:]
    assert main(resume) == 0
    assert out.read_bytes() == full.read_bytes()
    assert not journal.exists()
    # a second --resume has nothing left to do and changes nothing
    assert main(resume) == 0 and out.read_bytes() == full.read_bytes()


def test_resume_drops_a_torn_tail_and_refuses_other_settings(tmp_path, model_dir, capsys, monkeypatch):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, 7)
    full = tmp_path / "full.jsonl"
    base = ["segment", str(corpus), "--model", model_dir, "--format", "jsonl", "--docs-per-batch", "2", "--quiet"]
    assert main([*base, "--out", str(full)]) == 0

    from headseg.cli import journal as seg_cli

    real = seg_cli.JournalSink.write_batch
    calls = []

    def interrupted(self, docs):
        if len(calls) == 2:
            # the third batch's records reach the file, torn, and the run dies before journaling them
            self._append(self.fd, '{"document": "doc-4", "ind')
            raise KeyboardInterrupt
        calls.append(len(docs))
        real(self, docs)

    monkeypatch.setattr(seg_cli.JournalSink, "write_batch", interrupted)
    out = tmp_path / "out.jsonl"
    assert main([*base, "--out", str(out)]) == 130
    monkeypatch.setattr(seg_cli.JournalSink, "write_batch", real)
    assert out.read_bytes().endswith(b'"ind') and len((tmp_path / "out.jsonl.journal").read_text().splitlines()) == 5

    rc = main([*base, "--out", str(out), "--resume", "--segments", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and "segments" in err and "--resume" in err
    assert main([*base, "--out", str(out), "--resume"]) == 0
    assert out.read_bytes() == full.read_bytes()
    assert not (tmp_path / "out.jsonl.journal").exists()
