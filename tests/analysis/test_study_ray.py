"""The study on a local Ray (2 CPUs) and the tiny model: sharded, it writes the same report as one process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from headseg.analysis.study import StudyConfig, run_study  # noqa: E402
from headseg.analysis.study.distributed import run_study_ray, shard_ranges  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "study"


@pytest.fixture(scope="module")
def local_ray():
    # one Ray for the module: starting it is the slow part
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_shard_ranges_cover_every_batch_once():
    assert shard_ranges(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert shard_ranges(2, 5) == [(0, 1), (1, 2)]
    assert shard_ranges(0, 2) == [(0, 0)]


@pytest.mark.slow
def test_two_shard_study_on_ray_equals_the_single_process_study(tmp_path, tiny_bert_dir, tiny_bert, local_ray):
    def cfg(out):
        return StudyConfig(corpus=[str(FIX / "docs"), str(FIX / "corpus.jsonl")], out=str(out), samples=12, seq_len=32,
                           batch_size=4, top_fraction=0.1, min_heads=3, max_heads=5, figures=False, quiet=True)

    one = run_study(cfg(tmp_path / "one"), tiny_bert)
    two = run_study_ray(cfg(tmp_path / "two"), model=str(tiny_bert_dir), loaded=tiny_bert, shards=2)
    assert json.loads((tmp_path / "two" / "run.json").read_text())["shards"] == 2
    assert two["windows"] == one["windows"] == 12

    def leaves(x, path=""):
        if isinstance(x, dict):
            for k in sorted(x):
                yield from leaves(x[k], f"{path}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                yield from leaves(v, f"{path}[{i}]")
        else:
            yield path, x

    for name in ("report.json", "heads.json"):
        a = dict(leaves(json.loads((tmp_path / "one" / name).read_text())))
        b = dict(leaves(json.loads((tmp_path / "two" / name).read_text())))
        assert a.keys() == b.keys()
        for k in a:
            if k.startswith(".corpus.paths") or "created" in k:
                continue
            if isinstance(a[k], float):
                assert b[k] == pytest.approx(a[k], rel=1e-9, abs=1e-12), k
            else:
                assert a[k] == b[k], k
    with np.load(tmp_path / "one" / "checkpoint.npz") as f1, np.load(tmp_path / "two" / "checkpoint.npz") as f2:
        np.testing.assert_array_equal(f1["high_all"], f2["high_all"])
        np.testing.assert_array_equal(f1["focus_counts"], f2["focus_counts"])
