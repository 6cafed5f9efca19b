"""A corrupt study checkpoint is reported with the 'use --force' advice, not a zipfile traceback (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.study import StudyConfig, run_study

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "study"


def cfg(out, **kw) -> StudyConfig:
    base = dict(corpus=[str(FIX / "docs")], out=str(out), samples=8, seq_len=32, batch_size=4, top_fraction=0.1,
                min_heads=3, max_heads=5, figures=False, quiet=True, checkpoint_every=1)
    base.update(kw)
    return StudyConfig(**base)


def _truncate(p: Path):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _garbage(p: Path):
    p.write_bytes(b"not a zip file at all")


def _bad_meta(p: Path):
    with np.load(p) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["meta"] = np.asarray(json.dumps(["a", "list"]))
    np.savez(p, **arrays)


@pytest.mark.parametrize("damage", [_truncate, _garbage, _bad_meta])
def test_corrupt_checkpoint_says_use_force(tmp_path, tiny_bert, damage):
    out = tmp_path / "study"
    assert run_study(cfg(out), tiny_bert, stop_after_batches=1) is None
    ck = out / "checkpoint.npz"
    damage(ck)
    with pytest.raises(InputError, match="not a readable study checkpoint.*use --force to start over"):
        run_study(cfg(out, resume=True), tiny_bert)
    # and --force does start over
    report = run_study(cfg(out, force=True), tiny_bert)
    assert report["windows"] == 8
