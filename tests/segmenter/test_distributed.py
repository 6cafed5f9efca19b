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
