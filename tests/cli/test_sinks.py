"""The sinks of `headseg segment`: one interface, and records written as rows equal records written as documents."""

from __future__ import annotations

import hashlib
import json

import pytest

from headseg.analysis.errors import HeadsegError
from headseg.analysis.segments import Segmentation
from headseg.cli.journal import JournalSink, read_journal
from headseg.cli.sinks import ParquetSink, StreamSink, batch_records

DOCS = [(0, "a", Segmentation.from_boundaries("One topic. Another topic.", [11])),
        (1, "b", Segmentation.from_boundaries("Just one.", []))]


def test_jsonl_rows_equal_documents(tmp_path):
    by_docs, by_rows = tmp_path / "docs.jsonl", tmp_path / "rows.jsonl"
    sink = StreamSink("jsonl", False, str(by_docs), direct=True)
    sink.write_batch(DOCS)
    sink.close()
    sink = StreamSink("jsonl", False, str(by_rows), direct=True)
    sink.write_records(batch_records(DOCS))
    sink.close()
    assert by_docs.read_bytes() == by_rows.read_bytes()
    assert [json.loads(x)["document"] for x in by_docs.read_text().splitlines()] == ["a", "a", "b"]


def test_parquet_rows_equal_documents(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    sink = ParquetSink(str(tmp_path / "docs.parquet"))
    sink.write_batch(DOCS)
    sink.close()
    sink = ParquetSink(str(tmp_path / "rows.parquet"))
    sink.write_records(batch_records(DOCS))
    sink.close()
    by_docs, by_rows = (pq.read_table(tmp_path / f"{name}.parquet").to_pylist() for name in ("docs", "rows"))
    assert by_docs == by_rows == batch_records(DOCS)


def test_journal_keeps_only_journaled_documents(tmp_path):
    out = tmp_path / "out.jsonl"
    sink = JournalSink(str(out), {"k": 1}, resume=False)
    sink.write_batch(DOCS[:1])
    size = out.stat().st_size
    # rows written without documents are durable but not journaled: --resume drops them
    sink.write_records(batch_records(DOCS[1:]))
    sink.close(ok=False)
    done, end, _ = read_journal(str(out) + ".journal", {"k": 1})
    # each journaled document keeps the digest of its text, so --resume can tell a changed input
    digest = hashlib.blake2b(DOCS[0][2].text.encode("utf-8"), digest_size=16).hexdigest()
    assert done == {0: ("a", digest)} and end == size < out.stat().st_size


def test_a_text_stream_holds_no_bare_records(tmp_path):
    sink = StreamSink("text", False, str(tmp_path / "out.txt"))
    with pytest.raises(HeadsegError, match="jsonl"):
        sink.write_records(batch_records(DOCS))
    sink.close(ok=False)
    assert list(tmp_path.iterdir()) == []


def test_the_journal_writes_the_formats_own_bytes(tmp_path):
    """Issue 47: the journaled output is the format's encoder's, not JSONL written a second time."""
    from headseg.formats import FORMATS, JsonlEncoder, dumps, register_format

    out = tmp_path / "out.jsonl"
    sink = JournalSink(str(out), {"k": 1}, resume=False)
    sink.write_batch(DOCS[:1])
    sink.write_batch(DOCS[1:])
    sink.close(ok=True)
    assert out.read_text(encoding="utf-8") == dumps("jsonl", [(d, s) for _, d, s in DOCS])
    with FORMATS.scoped():
        @register_format("spans", "'start end' lines", recognise=lambda path, head: False, appendable=True)
        class Spans(JsonlEncoder):
            def documents(self, docs):
                return "".join(f"{s.start} {s.end}\n" for _, seg in docs for s in seg)

        out = tmp_path / "out.spans"
        sink = JournalSink(str(out), {"k": 1}, resume=False, fmt="spans")
        sink.write_batch(DOCS)
        sink.close(ok=True)
        assert out.read_text(encoding="utf-8") == "".join(f"{s.start} {s.end}\n" for _, _, seg in DOCS for s in seg)
    with pytest.raises(HeadsegError, match="appendable format"):
        JournalSink(str(tmp_path / "out.json"), {"k": 1}, resume=False, fmt="json")
    assert not (tmp_path / "out.json.journal").exists()  # refused before any file is made
