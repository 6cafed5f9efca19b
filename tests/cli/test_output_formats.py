"""The output formats as a library: each written and read back gives the segmentation again, the command
line's sinks write the library's bytes, and the command line, the service and the Ray engine's actors build
the same records for the same text."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.segments import RECORD_FIELDS, Node, Segment, Segmentation
from headseg.cli import main
from headseg.cli.sinks import ParquetSink, StreamSink
from headseg.formats import FORMATS, blank_record, document_records, dumps, get_format, read_records, write

FLAT = Segmentation.from_boundaries("Café au lait. 東京は大きい。\nThe cat sat. Dogs bark", [14, 23, 36],
                                    [0.25, 0.123456789, 1.5])
PLAIN = Segmentation.from_boundaries("Just one segment, no newline at the end", [])


def _tree() -> Segmentation:
    """A segment tree by hand: two depth-1 nodes, the first split in two (leaves 1, 2, 3)."""
    text = "Alpha one. Alpha two. Beta only.\n"
    segs = [Segment(0, 11, text[0:11], 0.0, 3, ("A",)), Segment(11, 22, text[11:22], 0.3333333333, 4, ("A", "x")),
            Segment(22, len(text), text[22:], 0.9, 5, ())]
    nodes = [Node(0, None, 1, 0, 22, 0.0, 7, ("A",)), Node(1, 0, 2, 0, 11, 0.0, 3, ("A",)),
             Node(2, 0, 2, 11, 22, 0.3333333333, 4, ("A", "x")), Node(3, None, 1, 22, len(text), 0.9, 5, ())]
    return Segmentation(text, segs, level="tree", nodes=nodes)


TREE = _tree()
DOCS = [("flat", FLAT), ("tree", TREE), ("plain", PLAIN)]


def _rounded(seg: Segmentation) -> Segmentation:
    """``seg`` as its records hold it: scores to 6 decimals, no meta."""
    return Segmentation(seg.text, [replace(s, score=round(s.score, 6)) for s in seg], level=seg.level,
                        nodes=[replace(n, score=round(n.score, 6)) for n in seg.nodes])


def _by_document(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["document"], []).append(r)
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_records_written_and_read_back_are_the_segmentations(tmp_path, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    path = tmp_path / f"out.{fmt}"
    write(fmt, DOCS, path)
    rows = read_records(path)
    assert [tuple(r) for r in rows] == [RECORD_FIELDS] * len(rows)
    back = _by_document(rows)
    assert list(back) == ["flat", "tree", "plain"]
    for doc_id, seg in DOCS:
        assert Segmentation.from_records(back[doc_id], level=seg.level) == _rounded(seg)
    # the tree keeps its inner node: 4 records for 3 segments
    assert len(back["tree"]) == 4 and [r["index"] for r in back["tree"]] == [None, 0, 1, 2]


@pytest.mark.parametrize("single", [True, False])
def test_json_written_and_read_back_is_the_segmentations(single):
    docs = DOCS[1:2] if single else DOCS
    data = json.loads(dumps("json", docs, single=single))
    records = [data] if single else data
    assert [r["document"] for r in records] == [d for d, _ in docs]
    for record, (_, seg) in zip(records, docs):
        assert Segmentation.from_dict(record) == _rounded(seg)


_HEADER = re.compile(r"----- segment (\d+)/(\d+)(?:  node ([\d.]+))?  chars (\d+)-(\d+)  score (-?[\d.]+)"
                     r"(?:  confidence [\d.]+)? -----\n")


def _read_text(out: str) -> dict[str, list[tuple]]:
    """The text format read back: per document, (start, end, score, node path, text) of each segment."""
    docs: dict[str, list[tuple]] = {}
    for block in out.split("##### ")[1:]:
        doc_id, body = block.split("\n", 1)
        heads = list(_HEADER.finditer(body))
        segs = []
        for h, nxt in zip(heads, heads[1:] + [None]):
            start, end = int(h[4]), int(h[5])
            chunk = body[h.end(): nxt.start() if nxt else len(body)]
            segs.append((start, end, float(h[6]), h[3], chunk[: end - start]))
            # a segment that does not end a line gets one newline, nothing else
            assert chunk[end - start:] in ("", "\n")
        docs[doc_id] = segs
    return docs


def test_text_written_and_read_back_is_the_segmentations():
    back = _read_text(dumps("text", DOCS))
    assert list(back) == ["flat", "tree", "plain"]
    for doc_id, seg in DOCS:
        segs = back[doc_id]
        assert [(a, b, t) for a, b, _, _, t in segs] == [(s.start, s.end, s.text) for s in seg]
        assert [sc for _, _, sc, _, _ in segs] == [round(s.score, 3) for s in seg]
        assert "".join(t for *_, t in segs) == seg.text
    assert [p for *_, p, _ in back["tree"]] == ["1.1", "1.2", "2"]
    assert [p for *_, p, _ in back["flat"]] == [None] * 4


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl"])
@pytest.mark.parametrize("single", [True, False])
def test_the_cli_stream_sink_writes_the_librarys_bytes(tmp_path, fmt, single):
    docs = DOCS[:1] if single else DOCS
    out = tmp_path / "out"
    sink = StreamSink(fmt, single, str(out))
    # in two batches, as the local engine writes them: the framing is the same as in one
    sink.write_batch([(i, d, s) for i, (d, s) in enumerate(docs[:1])])
    sink.write_batch([(i + 1, d, s) for i, (d, s) in enumerate(docs[1:])])
    sink.close()
    assert out.read_bytes() == dumps(fmt, docs, single=single).encode("utf-8")
    assert FORMATS.get(fmt).recognise(out, out.read_bytes())


def test_the_cli_parquet_sink_writes_the_librarys_records(tmp_path):
    pytest.importorskip("pyarrow")
    sink = ParquetSink(str(tmp_path / "cli.parquet"))
    sink.write_batch([(i, d, s) for i, (d, s) in enumerate(DOCS)])
    sink.close()
    write("parquet", DOCS, tmp_path / "lib.parquet")
    assert read_records(tmp_path / "cli.parquet") == read_records(tmp_path / "lib.parquet") == document_records(DOCS)


def test_an_empty_json_array_and_the_refusals():
    assert json.loads(dumps("json", [])) == []
    with pytest.raises(InputError, match=r"unknown output format 'csv' \(use text, jsonl, json, parquet\)"):
        get_format("csv")
    with pytest.raises(InputError, match="written to a file"):
        dumps("parquet", DOCS)
    with pytest.raises(HeadsegError, match="records are written as jsonl, not json"):
        get_format("json").encoder(False).records(document_records(DOCS))


def test_a_blank_record_has_the_schemas_columns_and_types():
    pa = pytest.importorskip("pyarrow")
    from headseg.formats import arrow_schema

    blank = blank_record("d")
    assert tuple(blank) == RECORD_FIELDS and blank["document"] == "d"
    # one Arrow table holds a failed document's row among good ones: the columns keep their types
    table = pa.Table.from_pylist([blank, *document_records(DOCS)], schema=arrow_schema())
    assert table.num_rows == 1 + len(document_records(DOCS))


# ------------------------------------------------------------------ one record for the same text everywhere

TEXT = ("The committee met on Monday. It approved the budget after a long debate. The chair thanked the members.\n\n"
        "Rain fell all night and the river rose quickly. Farmers moved their cattle to higher ground. "
        "« Boats » were tied up — again. 東京 😀\n")


@pytest.mark.parametrize("level", ["topic", "tree"])
def test_the_cli_the_service_and_the_ray_actor_build_the_same_records(model_dir, tmp_path, level):
    pytest.importorskip("fastapi")
    pytest.importorskip("prometheus_client")
    from fastapi.testclient import TestClient

    from headseg.config import SegmenterConfig
    from headseg.distributed import SegmentActor
    from headseg.segmenter.options import SegmentOptions
    from headseg.serve.app import create_app
    from headseg.serve.host import Host, ServeConfig

    src = tmp_path / "doc.txt"
    src.write_text(TEXT, encoding="utf-8")
    # a size limit cuts the text whatever the tiny model's evidence (issue 48), so the records are several
    common = ["--model", str(model_dir), "--backend", "torch", "--device", "cpu", "--quiet", "--level", level,
              "--max-chars", "120"]
    assert main(["segment", str(src), "--format", "json", "--out", str(tmp_path / "o.json"), *common]) == 0
    assert main(["segment", str(src), "--format", "jsonl", "--out", str(tmp_path / "o.jsonl"), *common]) == 0
    cli_record = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    cli_rows = read_records(tmp_path / "o.jsonl")

    config = SegmenterConfig(model=str(model_dir), backend="torch", device="cpu")
    host = Host(ServeConfig(segmenter=config, max_queue=8, doc_threads=1)).start()
    try:
        with TestClient(create_app(host=host)) as client:
            one = client.post("/v1/segment", json={"text": TEXT, "level": level, "max_chars": 120})
            many = client.post("/v1/segment", json={"documents": [{"id": str(src), "text": TEXT}], "level": level,
                                                    "max_chars": 120})
    finally:
        host.close()
    assert one.status_code == 200 and many.status_code == 200, (one.text, many.text)
    assert one.json() == {**cli_record, "document": None}
    assert [json.loads(line) for line in many.text.splitlines()] == [cli_record]

    actor = SegmentActor(config, SegmentOptions(level=level, max_chars=120), "text", "id")
    cols = actor({"document": [str(src)], "text": [TEXT], "error": [None]})
    ray_rows = [{k: cols[k][i] for k in RECORD_FIELDS} for i in range(len(cols["document"]))]
    assert cols["error"] == [None] * len(ray_rows)
    assert ray_rows == cli_rows
    assert Segmentation.from_records(cli_rows, level=level) == Segmentation.from_dict(cli_record)
    assert len(cli_rows) > 1
