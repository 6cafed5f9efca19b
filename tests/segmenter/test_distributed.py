"""The Ray engine on a local Ray (2 CPUs) and the tiny model: same records as the local engine.

The study on Ray is tested in tests/analysis/test_study_ray.py.
"""

from __future__ import annotations

import itertools
import json

import pytest

ray = pytest.importorskip("ray")

from headseg.cli import main  # noqa: E402

SENTENCES = ["The committee met on Monday.", "It approved the budget after a long debate.", "Rain fell all night.",
             "The river rose quickly.", "Farmers moved their cattle.", "Prices of grain went up."]


@pytest.fixture(scope="module")
def local_ray():
    # one Ray for the module: starting it is the slow part
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    return str(tiny_bert_dir)


@pytest.mark.slow
def test_ray_engine_records_equal_the_local_engine(tmp_path, model_dir, local_ray, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = [{"id": i if i % 3 else f"doc-{i}", "text": " ".join(SENTENCES[(i + k) % 6] for k in range(1 + i % 4))}
            for i in range(24)]
    docs[5]["text"] = ""  # an empty document: no records from either engine
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    common = ["--model", model_dir, "--backend", "torch", "--docs-per-batch", "5", "--quiet"]
    local = tmp_path / "local.jsonl"
    assert main(["segment", str(corpus), "--format", "jsonl", "--out", str(local), *common]) == 0
    on_ray = tmp_path / "ray.jsonl"
    assert main(["segment", str(corpus), "--format", "jsonl", "--out", str(on_ray), "--engine", "ray",
                 "--workers", "2", *common]) == 0
    assert on_ray.read_bytes() == local.read_bytes()
    records = [json.loads(x) for x in local.read_text(encoding="utf-8").splitlines()]
    assert len({r["document"] for r in records}) == 23

    # Parquet in, Parquet out, one worker: the same rows
    pq.write_table(pa.Table.from_pylist([{"id": str(d["id"]), "text": d["text"]} for d in docs]),
                   tmp_path / "c.parquet")
    out = tmp_path / "ray.parquet"
    assert main(["segment", str(tmp_path / "c.parquet"), "--format", "parquet", "--out", str(out),
                 "--engine", "ray", "--workers", "1", *common]) == 0
    assert pq.read_table(out).to_pylist() == records


@pytest.mark.slow
def test_ray_engine_reads_jsonl_lines_as_the_local_engine(tmp_path, model_dir, local_ray, capsys, monkeypatch):
    """Ray's read_json read ids through Arrow: an integer id column with a null became floats ("1.0" for the
    local engine's "1"), ints then strings could not be read at all, and bad lines were not the local
    engine's error lines.  Now both engines parse each line with one function: same bytes, same errors."""
    monkeypatch.chdir(tmp_path)  # inputs named relatively: FILE:LINE says them as given
    lines = [json.dumps({"id": 1, "text": SENTENCES[0] + " " + SENTENCES[1]}),
             json.dumps({"id": None, "text": SENTENCES[2]}),  # a null id: FILE:LINE
             "",  # blank lines are no documents
             json.dumps({"id": 3, "text": "Zürich — naïve café 東京 \U0001F600. " + SENTENCES[3]}, ensure_ascii=False),
             json.dumps({"text": "Line\u2028separator inside. " + SENTENCES[4]}, ensure_ascii=False),  # no id
             "   \t",
             "{not json",
             "[1, 2]",  # not an object
             json.dumps({"id": "doc-a", "body": "no text field"}),
             json.dumps({"id": "doc-b", "text": 42}),
             json.dumps({"id": 2.5, "text": SENTENCES[5]}),
             json.dumps({"id": True, "text": SENTENCES[1]}),
             json.dumps({"id": 7, "text": "x" * 3000}),  # over --max-bytes
             json.dumps({"id": 8, "text": ""}),
             json.dumps({"id": "doc-c", "text": SENTENCES[0] + " " + SENTENCES[5]})]
    (tmp_path / "a.jsonl").write_bytes(("\n".join(lines) + "\n").encode("utf-8") + b'{"id": 9, "text": "caf\xe9"}\n')
    (tmp_path / "b.jsonl").write_text(json.dumps({"id": "x", "text": SENTENCES[2]}) + "\n" +
                                      json.dumps({"id": 10, "text": SENTENCES[3]}), encoding="utf-8")  # no final newline
    common = ["a.jsonl", "b.jsonl", "--format", "jsonl", "--model", model_dir, "--backend", "torch",
              "--docs-per-batch", "3", "--max-bytes", "2000", "--quiet"]
    assert main(["segment", *common, "--out", "local.jsonl"]) == 1
    local_err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("headseg:")]
    assert main(["segment", *common, "--out", "ray.jsonl", "--engine", "ray", "--workers", "2"]) == 1
    ray_err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("headseg:")]
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert ray_err == local_err
    # split at newlines only: str.splitlines would split the U+2028 inside a record's text too
    records = [json.loads(x) for x in (tmp_path / "local.jsonl").read_text(encoding="utf-8").split("\n") if x]
    assert list(dict.fromkeys(r["document"] for r in records)) == \
        ["1", "a.jsonl:2", "3", "a.jsonl:5", "2.5", "True", "doc-c", "x", "10"]
    assert "".join(r["text"] for r in records if r["document"] == "a.jsonl:5").startswith("Line\u2028separator")
    assert local_err == [
        "headseg: error: a.jsonl:7: not valid JSON (Expecting property name enclosed in double quotes)",
        "headseg: error: a.jsonl:8: a JSONL record must be a JSON object",
        "headseg: error: doc-a: field 'text' is missing",
        "headseg: error: doc-b: field 'text' is of type int, not a string",
        "headseg: error: a.jsonl:13: line is over the limit of 2,000 bytes (raise it with --max-bytes)",
        "headseg: error: a.jsonl:16: not valid utf-8 at byte 22; pass --encoding (e.g. latin-1) if it is text"]


def test_ray_jsonl_reader_gives_the_local_engines_lines_in_pieces(tmp_path, monkeypatch):
    """The reading task (no Ray needed to call it): a local path and its file:// URI give the lines the local
    engine reads, numbered as it numbers them, in pieces of at most LINES_PER_PIECE; a missing file is one line."""
    import io

    import pyarrow as pa

    from headseg.analysis.errors import InputError
    from headseg.cli import segment_ray
    from headseg.cli.inputs import jsonl_lines

    data = b'{"id": 1}\n\n  \n' + b'{"text": "x"}\n' * 4 + b'"' + b"y" * 50 + b'"\n{"last": 1}'
    (tmp_path / "c.jsonl").write_bytes(data)
    monkeypatch.setattr(segment_ray, "LINES_PER_PIECE", 2)
    expected = [(f"c.jsonl:{n}", raw) for n, raw in jsonl_lines(io.BytesIO(data), 20)]
    assert [w for w, _ in expected] == ["c.jsonl:1", "c.jsonl:4", "c.jsonl:5", "c.jsonl:6", "c.jsonl:7",
                                        "c.jsonl:8", "c.jsonl:9"]
    assert expected[5][1] is None  # over max_bytes: skipped unread
    for path in (str(tmp_path / "c.jsonl"), (tmp_path / "c.jsonl").as_uri()):
        files = pa.table({"path": [path], "name": ["c.jsonl"]})
        pieces = list(segment_ray._read_lines(files, max_bytes=20))
        assert [p.num_rows for p in pieces] == [2, 2, 2, 1]
        assert [(r["where"], r["line"]) for p in pieces for r in p.to_pylist()] == expected
    with pytest.raises(InputError, match=r"^gone.jsonl: cannot read \(No such file"):
        list(segment_ray._read_lines(pa.table({"path": [str(tmp_path / "gone.jsonl")], "name": ["gone.jsonl"]}), 20))


def _parquet_corpus(folder):
    """Parquet files with every kind of id and text the readers meet; returns their names, in input order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # int ids with nulls, several row groups of 2 rows: a null id is FILE:ROW, rows counted across groups
    pq.write_table(pa.table({
        "id": pa.array([1, None, 3, 4, None, 6, 7], pa.int64()),
        "text": [SENTENCES[0] + " " + SENTENCES[1], SENTENCES[2], None,
                 "Zürich — naïve café 東京 \U0001F600. " + SENTENCES[3], "Line\u2028separator inside. " + SENTENCES[4],
                 "", SENTENCES[5] + " " + SENTENCES[0]]}), folder / "a.parquet", row_group_size=2)
    # no id column at all: every record is FILE:ROW
    pq.write_table(pa.table({"text": [SENTENCES[1], None, SENTENCES[3] + " " + SENTENCES[4]]}),
                   folder / "b.parquet", row_group_size=2)
    # string ids (one null), and an id that looks like another file's row
    pq.write_table(pa.table({"id": ["doc-a", None, "b.parquet:0", "doc-d"],
                             "text": [SENTENCES[2], SENTENCES[5], SENTENCES[0], SENTENCES[4]]}),
                   folder / "c.parquet", row_group_size=3)
    # texts that are not strings, float ids
    pq.write_table(pa.table({"id": [2.5, None], "text": [42, 7]}), folder / "d.parquet")
    pq.write_table(pa.table({"id": [1], "body": ["no text column"]}), folder / "e.parquet")
    (folder / "f.parquet").write_bytes(b"not parquet")
    return ["a.parquet", "b.parquet", "c.parquet", "d.parquet", "e.parquet", "f.parquet"]


@pytest.mark.slow
def test_ray_engine_reads_parquet_as_the_local_engine(tmp_path, model_dir, local_ray, capsys, monkeypatch):
    """ray.data.read_parquet numbers no rows: a record without an id failed ("the ray engine needs an id
    field") where the local engine names it FILE:ROW, and files whose columns differ could not be read
    together.  Now a reading task per file reads it with the local engine's reader: same bytes, same errors."""
    import pyarrow.parquet as pq

    monkeypatch.chdir(tmp_path)  # inputs named relatively: FILE:ROW says them as given
    names = _parquet_corpus(tmp_path)
    common = [*names, "--model", model_dir, "--backend", "torch", "--docs-per-batch", "2", "--quiet"]
    for fmt in ("jsonl", "parquet"):
        assert main(["segment", *common, "--format", fmt, "--out", f"local.{fmt}"]) == 1
        local_err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("headseg:")]
        assert main(["segment", *common, "--format", fmt, "--out", f"ray.{fmt}", "--engine", "ray",
                     "--workers", "2"]) == 1
        ray_err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("headseg:")]
        assert ray_err == local_err
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert pq.read_table("ray.parquet").equals(pq.read_table("local.parquet"))
    records = [json.loads(x) for x in (tmp_path / "local.jsonl").read_text(encoding="utf-8").split("\n") if x]
    assert pq.read_table("ray.parquet").to_pylist() == records
    assert [doc for doc, _ in itertools.groupby(r["document"] for r in records)] == \
        ["1", "a.parquet:1", "4", "a.parquet:4", "7", "b.parquet:0", "b.parquet:2", "doc-a", "c.parquet:1",
         "b.parquet:0", "doc-d"]
    assert "".join(r["text"] for r in records if r["document"] == "4").startswith("Zürich — naïve café 東京 \U0001F600.")
    assert local_err == [
        "headseg: error: 3: field 'text' is missing",
        "headseg: error: b.parquet:1: field 'text' is missing",
        "headseg: error: 2.5: field 'text' is of type int, not a string",
        "headseg: error: d.parquet:1: field 'text' is of type int, not a string",
        "headseg: error: e.parquet: Parquet file has no column 'text'",
        "headseg: error: f.parquet: not a readable Parquet file "
        "(Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file.)"]


def test_ray_parquet_reader_gives_the_local_engines_documents_in_pieces(tmp_path, monkeypatch):
    """The Parquet reading task (no Ray needed to call it): a local path and its file:// URI give the local
    engine's documents (ids, texts, errors as strings), in pieces of at most LINES_PER_PIECE rows."""
    import pyarrow as pa

    from headseg.cli import segment_ray
    from headseg.cli.inputs import parquet_documents

    names = _parquet_corpus(tmp_path)
    monkeypatch.setattr(segment_ray, "LINES_PER_PIECE", 2)
    read = {name: list(parquet_documents(str(tmp_path / name), "text", "id", name=name)) for name in names}
    assert [d for d, _ in read["a.parquet"]] == ["1", "a.parquet:1", "3", "4", "a.parquet:4", "6", "7"]
    assert [d for d, _ in read["b.parquet"]] == ["b.parquet:0", "b.parquet:1", "b.parquet:2"]
    # batch by batch: smaller batches than row groups give the same documents
    assert [(d, str(t)) for d, t in parquet_documents(str(tmp_path / "a.parquet"), "text", "id", name="a.parquet",
                                                      batch_rows=1)] == [(d, str(t)) for d, t in read["a.parquet"]]
    for name in names:
        expected = [(d, t, None) if isinstance(t, str) else (d, None, str(t)) for d, t in read[name]]
        for located in (str(tmp_path / name), (tmp_path / name).as_uri()):
            pieces = list(segment_ray._read_parquet(pa.table({"path": [located], "name": [name]}), "text", "id"))
            assert [p.num_rows for p in pieces] == [2] * (len(expected) // 2) + [1] * (len(expected) % 2)
            assert all(p.schema.types == [pa.string()] * 3 for p in pieces)
            assert [tuple(r.values()) for p in pieces for r in p.to_pylist()] == expected
