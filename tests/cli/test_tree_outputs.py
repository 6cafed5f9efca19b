"""A segment tree (``--level tree``) in every output format: JSON nests the nodes, JSONL and Parquet give
one row per node with ``id``/``parent``/``depth``, the text format names each leaf's place in the tree;
and the command line takes ``--level tree --depth N``."""

from __future__ import annotations

import json

import pytest

from headseg.analysis.segments import Node, Segmentation
from headseg.cli import main
from headseg.cli.sinks import ParquetSink, StreamSink, batch_records

TEXT = "Alpha one. Alpha two. Beta one. Beta two. Gamma."
#        0          11         22        32        42
NODES = [Node(0, None, 1, 0, 42, 0.0), Node(1, 0, 2, 0, 22, 0.0), Node(2, 1, 3, 0, 11, 0.0),
         Node(3, 1, 3, 11, 22, 0.2), Node(4, 0, 2, 22, 42, 0.5), Node(5, None, 1, 42, len(TEXT), 0.9)]
LEAVES = [(0, 11), (11, 22), (22, 42), (42, len(TEXT))]
TREE = Segmentation(text=TEXT, level="tree", nodes=NODES,
                    segments=Segmentation.from_boundaries(TEXT, [11, 22, 42], [0.2, 0.5, 0.9]).segments)
DOCS = [(0, "t", TREE)]


def test_json_nests_the_nodes_and_keeps_the_leaves_as_segments(tmp_path):
    out = tmp_path / "t.json"
    sink = StreamSink("json", True, str(out))
    sink.write_batch(DOCS)
    sink.close()
    record = json.loads(out.read_text())
    assert [(s["start"], s["end"]) for s in record["segments"]] == LEAVES
    top = record["tree"]
    assert [(n["start"], n["end"], n["depth"]) for n in top] == [(0, 42, 1), (42, len(TEXT), 1)]
    assert [(n["start"], n["end"]) for n in top[0]["children"]] == [(0, 22), (22, 42)]
    assert [(n["start"], n["end"]) for n in top[0]["children"][0]["children"]] == [(0, 11), (11, 22)]
    assert top[1]["children"] == [] and top[0]["children"][1]["children"] == []
    assert Segmentation.from_dict(record).nodes == [Node(n.id, n.parent, n.depth, n.start, n.end, n.score)
                                                    for n in NODES]


def test_jsonl_and_parquet_give_one_row_per_node(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    rows = batch_records(DOCS)
    assert [(r["id"], r["parent"], r["depth"], r["index"]) for r in rows] == [
        (0, None, 1, None), (1, 0, 2, None), (2, 1, 3, 0), (3, 1, 3, 1), (4, 0, 2, 2), (5, None, 1, 3)]
    assert all(r["text"] == TEXT[r["start"]:r["end"]] for r in rows)
    sink = StreamSink("jsonl", False, str(tmp_path / "t.jsonl"), direct=True)
    sink.write_batch(DOCS)
    sink.close()
    assert [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()] == rows
    sink = ParquetSink(str(tmp_path / "t.parquet"))
    sink.write_batch(DOCS)
    sink.close()
    assert pq.read_table(tmp_path / "t.parquet").to_pylist() == rows


def test_text_names_each_leaf_place_in_the_tree(tmp_path):
    out = tmp_path / "t.txt"
    sink = StreamSink("text", True, str(out))
    sink.write_batch(DOCS)
    sink.close()
    heads = [line for line in out.read_text().splitlines() if line.startswith("----- segment")]
    assert [h.split("  ")[1] for h in heads] == ["node 1.1.1", "node 1.1.2", "node 1.2", "node 2"]


def test_the_command_line_segments_a_tree(model_dir, tmp_path, capsys):
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(["The river rose over its banks. Farmers moved the cattle."] * 4
                            + ["The orchestra tuned. The violins began a slow melody."] * 4), encoding="utf-8")
    args = ["segment", str(doc), "--model", model_dir, "--backend", "torch", "--level", "tree", "--depth", "2",
            "--max-tokens", "20", "--quiet"]
    assert main([*args, "--format", "jsonl"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert main([*args, "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["level"] == "tree" and "tree" in record
    assert [(r["start"], r["end"]) for r in rows if r["index"] is not None] == \
        [(s["start"], s["end"]) for s in record["segments"]]
    assert "".join(s["text"] for s in record["segments"]) == doc.read_text(encoding="utf-8")
    assert all(r["depth"] <= 2 and (r["parent"] is None) == (r["depth"] == 1) for r in rows)
    assert all(s["token_count"] <= 20 for s in record["segments"])
    assert main(["segment", str(doc), "--model", model_dir, "--depth", "2", "--quiet"]) == 2
    assert "depth goes with" in capsys.readouterr().err
