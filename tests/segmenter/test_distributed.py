"""The Ray engine on a local Ray (2 CPUs) and the tiny model: same records as the local engine.

The study on Ray is tested in tests/analysis/test_study_ray.py.
"""

from __future__ import annotations

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
