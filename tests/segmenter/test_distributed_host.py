"""`headseg segment --engine ray` run inside a program: a Ray it starts is its own, and goes with it.

In a module of its own: the Ray of tests/segmenter/test_distributed.py must not be running.
"""

from __future__ import annotations

import json
import logging
import os

import pytest

ray = pytest.importorskip("ray")

from headseg.cli import main  # noqa: E402


@pytest.mark.slow
def test_the_ray_engine_leaves_the_host_program_as_it_found_it(tmp_path, tiny_bert_dir, capfd):
    """Before, ``main()`` left behind a running Ray, the environment variables Ray sets when it starts
    (RAY_USAGE_STATS_ENABLED, RAY_AUTH_MODE, PYTHONBREAKPOINT...), the "ray.data" logger's level and
    Ray Data's global context changed."""
    if ray.is_initialized():
        pytest.skip("a Ray is already running in this process")
    import ray.data as ray_data

    env = dict(os.environ)
    ctx = ray_data.DataContext.get_current()
    settings = (logging.getLogger("ray.data").level, ctx.execution_options.preserve_order, ctx.enable_progress_bars)
    ray_level = logging.getLogger("ray").level
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "The river rose. Farmers moved their cattle."}) + "\n",
                      encoding="utf-8")
    out = tmp_path / "o.jsonl"
    assert main(["segment", str(corpus), "--format", "jsonl", "--out", str(out), "--engine", "ray",
                 "--workers", "1", "--model", str(tiny_bert_dir), "--backend", "torch", "--quiet"]) == 0
    assert [json.loads(x)["text"] for x in out.read_text(encoding="utf-8").splitlines()] == \
        ["The river rose. Farmers moved their cattle."]
    assert not ray.is_initialized()
    assert {k: v for k, v in os.environ.items() if env.get(k) != v} == {}
    assert set(env) == set(os.environ)
    ctx = ray_data.DataContext.get_current()
    assert (logging.getLogger("ray.data").level, ctx.execution_options.preserve_order,
            ctx.enable_progress_bars) == settings
    assert logging.getLogger("ray").level == ray_level
    assert capfd.readouterr().out == ""


def test_a_ray_the_program_started_is_used_and_left_running(monkeypatch):
    """ray_session only undoes what it did: with Ray already up it neither shuts it down nor touches
    the environment (checked without starting a Ray: the module's is_initialized says it is up)."""
    from headseg.analysis import ray as hray

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setenv("HEADSEG_TEST_MARK", "1")
    with hray.ray_session(None) as got:
        assert got is ray
        os.environ["HEADSEG_TEST_MARK"] = "2"  # a change the program makes meanwhile is its own
    assert calls == [] and os.environ["HEADSEG_TEST_MARK"] == "2"


@pytest.mark.slow
def test_ray_engine_ids_and_missing_texts_read_as_the_local_engine_reads_them(tmp_path, tiny_bert_dir, capsys):
    """Numpy batches turned an integer id column with a null into floats (id 1 became "1.0", a missing
    id "nan", taken as an id) and a null text into NaN ("field 'text' is of type float"); the local
    engine writes "1" and says "is missing"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if ray.is_initialized():
        pytest.skip("a Ray is already running in this process")
    rows = [{"id": 1, "text": "The river rose. Farmers moved their cattle."}, {"id": 2, "text": None},
            {"id": None, "text": "No id here."}, {"id": 4, "text": "Prices of grain went up."}]
    corpus = tmp_path / "c.parquet"
    pq.write_table(pa.Table.from_pylist(rows), corpus)
    common = ["--format", "jsonl", "--model", str(tiny_bert_dir), "--backend", "torch", "--quiet"]
    assert main(["segment", str(corpus), "--out", str(tmp_path / "local.jsonl"), *common]) == 1
    local_err = capsys.readouterr().err
    assert main(["segment", str(corpus), "--out", str(tmp_path / "ray.jsonl"), "--engine", "ray",
                 "--workers", "1", *common]) == 1
    ray_err = capsys.readouterr().err
    local = [json.loads(x) for x in (tmp_path / "local.jsonl").read_text(encoding="utf-8").splitlines()]
    on_ray = [json.loads(x) for x in (tmp_path / "ray.jsonl").read_text(encoding="utf-8").splitlines()]
    # a null id is FILE:ROW with either engine (the Ray engine failed it: "needs an id field")
    assert list(dict.fromkeys(r["document"] for r in on_ray)) == ["1", f"{corpus}:2", "4"]
    assert on_ray == local
    assert "2: field 'text' is missing" in local_err and ray_err == local_err
