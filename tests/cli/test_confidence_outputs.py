"""Each record's ``confidence`` (issue 48) through ``headseg segment``: null for the first segment, the
library's calibrated value (rounded to 6 decimals) for the others, in JSONL, JSON, Parquet and the text
format's headers; ``--min-confidence X`` keeps the boundaries at least that sure, and refuses X outside [0, 1]."""

from __future__ import annotations

import json

import pytest

from cli_helpers import one_line, run
from headseg.api import Segmenter
from sample_texts import UNRELATED_TEXT

TEXT = UNRELATED_TEXT  # three clearly unrelated paragraphs (tests/sample_texts.py)
QUIET = ["--quiet"]


@pytest.fixture(scope="module")
def library():
    """The library's segmentation of TEXT with the embedded model (what the command runs by default)."""
    seg = Segmenter(quiet=True).segment(TEXT)
    assert len(seg) >= 2, "the text must have at least one topic boundary"
    return seg


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


def _want(library) -> list:
    return [None if s.confidence is None else round(s.confidence, 6) for s in library]


def test_jsonl_records_carry_the_library_confidences(src, tmp_path, library, capsys):
    out = tmp_path / "out.jsonl"
    assert run(["segment", str(src), "--format", "jsonl", "--out", str(out), *QUIET], capsys)[0] == 0
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["start"] for r in rows] == [s.start for s in library]
    got = [r["confidence"] for r in rows]
    assert got[0] is None
    assert all(isinstance(c, float) and 0.0 <= c <= 1.0 for c in got[1:])
    assert got == _want(library)
    # the field sits right after score, as RECORD_SCHEMA lays it out
    keys = list(rows[1])
    assert keys[keys.index("score") + 1] == "confidence"


def test_min_confidence_one_leaves_one_record(src, tmp_path, library, capsys):
    out = tmp_path / "out.jsonl"
    assert run(["segment", str(src), "--format", "jsonl", "--min-confidence", "1.0", "--out", str(out), *QUIET],
               capsys)[0] == 0
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 1 and rows[0]["confidence"] is None and rows[0]["text"] == TEXT
    # a floor below every boundary's confidence keeps them all
    low = min(c for c in _want(library) if c is not None)
    out2 = tmp_path / "low.jsonl"
    assert run(["segment", str(src), "--format", "jsonl", "--min-confidence", str(low - 0.01), "--out", str(out2),
                *QUIET], capsys)[0] == 0
    assert [json.loads(x)["confidence"] for x in out2.read_text(encoding="utf-8").splitlines()] == _want(library)


@pytest.mark.parametrize("value", ["1.5", "-0.1"])
def test_min_confidence_out_of_range_is_a_one_line_refusal(src, capsys, value):
    rc, err = run(["segment", str(src), "--min-confidence", value, *QUIET], capsys)
    assert rc == 2 and one_line(err) and "min-confidence" in err, err


def test_min_confidence_not_a_number_is_refused(src, capsys):
    # argparse refuses a value its type cannot read by exiting 2 (SystemExit in-process), with one error line
    # naming the flag
    with pytest.raises(SystemExit) as refused:
        run(["segment", str(src), "--min-confidence", "abc", *QUIET], capsys)
    err = capsys.readouterr().err
    assert refused.value.code == 2 and one_line(err), err
    assert "argument --min-confidence" in err and "'abc'" in err, err


def test_json_and_parquet_carry_the_same_confidences(src, tmp_path, library, capsys):
    out = tmp_path / "out.json"
    assert run(["segment", str(src), "--format", "json", "--out", str(out), *QUIET], capsys)[0] == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert [s["confidence"] for s in record["segments"]] == _want(library)
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq_out = tmp_path / "out.parquet"
    assert run(["segment", str(src), "--format", "parquet", "--out", str(pq_out), *QUIET], capsys)[0] == 0
    table = pq.read_table(pq_out)
    assert "confidence" in table.column_names
    assert table.column("confidence").to_pylist() == _want(library)


def test_text_format_headers_show_the_confidence(src, tmp_path, library, capsys):
    out = tmp_path / "out.txt"
    assert run(["segment", str(src), "--out", str(out), *QUIET], capsys)[0] == 0
    text = out.read_text(encoding="utf-8")
    n = len(library)
    for i, s in enumerate(library):
        head = f"----- segment {i + 1}/{n}  chars {s.start}-{s.end}  score {s.score:.3f}"
        sure = "" if s.confidence is None else f"  confidence {s.confidence:.3f}"
        assert f"{head}{sure} -----\n" in text
    assert "confidence" not in text.split("\n", 1)[0]  # the first segment opens no boundary
