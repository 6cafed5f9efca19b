"""``headseg segment --overlap N`` (issue 49, item 18): the records are the overlapped chunks, each saying
what it repeats (``overlap_chars``), in JSONL, JSON, Parquet and the text format, equal to the library's."""

from __future__ import annotations

import json

import pytest

from cli_helpers import one_line, run
from headseg.analysis.segments import Segmentation
from headseg.api import Segmenter

TEXT = "\n\n".join(" ".join([t] * 2) for t in [
    "The committee met on Monday. It approved the budget after a long debate.",
    "Rain fell all night. The river rose quickly over its banks.",
    "The orchestra tuned its instruments. The violins began a slow melody.",
] * 2)
OPTIONS = ["--max-tokens", "48", "--target-tokens", "24", "--overlap", "1"]


@pytest.fixture(scope="module")
def library(model_dir):
    return Segmenter(model=model_dir, backend="torch", device="cpu").segment(
        TEXT, max_tokens=48, target_tokens=24, overlap=1)


def _common(model_dir):
    return ["--model", model_dir, "--backend", "torch", "--device", "cpu", "--quiet"]


def test_jsonl_records_are_the_overlapped_chunks(model_dir, tmp_path, library, capsys):
    src = tmp_path / "doc.txt"
    src.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert run(["segment", str(src), "--format", "jsonl", "--out", str(out), *OPTIONS, *_common(model_dir)],
               capsys)[0] == 0
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert rows == library.to_records(str(src))
    assert [[r["start"], r["end"]] for r in rows] == library.meta["chunks"]
    assert any(r["overlap_chars"] > 0 for r in rows) and rows[0]["overlap_chars"] == 0
    for r, s in zip(rows, library):
        assert r["text"] == TEXT[r["start"]:r["end"]]
        assert r["start"] + r["overlap_chars"] == s.start and r["text"][r["overlap_chars"]:] == s.text
    assert Segmentation.from_records(rows).text == TEXT


def test_json_parquet_and_text(model_dir, tmp_path, library, capsys):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    src = tmp_path / "doc.txt"
    src.write_text(TEXT, encoding="utf-8")
    common = _common(model_dir)
    out = tmp_path / "out.json"
    assert run(["segment", str(src), "--format", "json", "--out", str(out), *OPTIONS, *common], capsys)[0] == 0
    assert json.loads(out.read_text(encoding="utf-8")) == library.to_dict(str(src))
    pq_out = tmp_path / "out.parquet"
    assert run(["segment", str(src), "--format", "parquet", "--out", str(pq_out), *OPTIONS, *common], capsys)[0] == 0
    rows = pq.read_table(pq_out).to_pylist()
    assert [r["overlap_chars"] for r in rows] == [r["overlap_chars"] for r in library.to_records()]
    assert Segmentation.from_records(rows).text == TEXT
    txt = tmp_path / "out.txt"
    assert run(["segment", str(src), "--out", str(txt), *OPTIONS, *common], capsys)[0] == 0
    k = library[1].start - library.chunks[1].start
    assert f"chars {library.chunks[1].start}-{library.chunks[1].end}  score" in txt.read_text(encoding="utf-8")
    assert f"overlap {k} chars -----" in txt.read_text(encoding="utf-8")


@pytest.mark.parametrize("flags, message", [
    (["--overlap", "1", "--level", "unit"], "--overlap goes with --level topic, not unit"),
    (["--overlap", "-1"], "overlap"),
])
def test_overlap_refusals_are_one_line(model_dir, doc, capsys, flags, message):
    rc, err = run(["segment", str(doc), *flags, *_common(model_dir)], capsys)
    assert rc == 2 and one_line(err) and message in err
