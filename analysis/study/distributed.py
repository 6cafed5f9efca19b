"""The study on a Ray cluster (the ``ray`` extra): batches sharded over Ray tasks, accumulators merged.

The planned batches of windows are cut into contiguous shards; each shard is
one Ray task that returns the fixed-size accumulator of its windows, and the
driver merges them (:meth:`StudyAccumulator.merge`) into the same report as a
single-process run.  Model weights never travel through Ray: every worker loads
the model from the same path or hub id.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time

from ..errors import InputError
from ..model import load_model
from ..ray import ray_session
from .corpus import CorpusDocument
from .runner import Study, StudyConfig
from .stats import StudyAccumulator


def _study_shard(cfg_fields: dict, model: str | None, lo: int, hi: int, threads: int | None) -> dict:
    """One shard of the study on a worker: its accumulator's state."""
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    with tempfile.TemporaryDirectory() as tmp:
        # the worker writes nothing: a fresh, never-created out dir passes the driver's checks
        cfg = StudyConfig(**dict(cfg_fields, out=os.path.join(tmp, "unused"), resume=False, force=False,
                                 quiet=True, figures=False))
        study = Study(cfg, load_model(model))
        return study.accumulate_shard(lo, hi).state()


def shard_ranges(n: int, shards: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges cutting ``n`` batches into ``shards`` contiguous, near-equal shards (none empty)."""
    shards = max(1, min(shards, n))
    step, extra = divmod(n, shards)
    out, lo = [], 0
    for i in range(shards):
        hi = lo + step + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def run_study_ray(cfg: StudyConfig, model: str | None, loaded=None, shards: int | None = None,
                  address: str | None = None, num_cpus: int | None = None, threads: int | None = 1,
                  docs: list[CorpusDocument] | None = None) -> dict:
    """The study with its batches sharded over Ray tasks, merged on the driver; returns the report.

    ``model`` is what each worker loads (a path, a cached hub id, or None for the
    embedded model); ``loaded`` the driver's copy (loaded from ``model`` if None).
    ``shards`` defaults to the cluster's CPUs; ``address``/``num_cpus`` go to
    :func:`~headseg.analysis.ray.ray_session` (a Ray started there is shut down
    after); ``threads`` is each worker's torch intra-op thread count; ``docs``
    the corpus already read on the driver (None: read here; each worker reads
    its own).
    """
    if cfg.resume:
        raise InputError("--resume is for a single-process study; a Ray study reruns its shards")
    study = Study(cfg, loaded if loaded is not None else load_model(model), docs)
    with ray_session(address, num_cpus, quiet=cfg.quiet) as ray:
        return _run_shards(ray, study, cfg, model, shards, threads)


def _run_shards(ray, study: Study, cfg: StudyConfig, model: str | None, shards: int | None,
                threads: int | None) -> dict:
    """:func:`run_study_ray`'s work on ``ray``: the shards run as tasks, their accumulators merged."""
    if shards is None:
        shards = max(1, int(ray.cluster_resources().get("CPU", 1)))
    if shards < 1:
        raise InputError("--workers must be at least 1")
    model_ref = os.path.abspath(model) if model is not None and os.path.isdir(model) else model
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    fields["corpus"] = [os.path.abspath(p) for p in cfg.corpus]
    remote = ray.remote(num_cpus=1)(_study_shard)
    ranges = shard_ranges(len(study.batches), shards)
    t0 = time.monotonic()
    refs = [remote.remote(fields, model_ref, lo, hi, threads) for lo, hi in ranges]
    merged = StudyAccumulator(**study.acc.settings())
    for state in ray.get(refs):
        part = StudyAccumulator(**study.acc.settings())
        part.load_state(state)
        merged.merge(part)
    study.acc = merged
    return study.finish(0, len(study.batches), time.monotonic() - t0, f"ray ({len(ranges)} shards)",
                        shards=len(ranges))
