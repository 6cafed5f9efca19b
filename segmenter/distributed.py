"""Segmentation and the study on a Ray cluster (the ``ray`` extra).

Segmentation: ``ray.data`` reads the JSONL or Parquet corpus in blocks, and
``map_batches`` sends batches of documents to a pool of actors, each holding
one :class:`~headseg.segmenter.api.Segmenter` built once from the model *path*
and the profile *path* (weights never travel through Ray: every worker loads
them from the installed package, the Hugging Face cache or a shared folder, and
picks up the ONNX artifact from its own cache when the serving backend is
ONNX).  A CPU actor runs with one intra-op thread, so ``N`` workers use ``N``
cores without oversubscription.  Records come back to the driver in input order
and are written by the same writers as the local engine, so the output equals
the local engine's record for record.

The study: the planned batches of windows are cut into contiguous shards; each
shard is one Ray task that returns the fixed-size accumulator of its windows,
and the driver merges them (:meth:`StudyAccumulator.merge`) into the same report
as a single-process run.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from typing import Any

from headseg.analysis.errors import InputError
from headseg.analysis.segments import RECORD_FIELDS



def init_ray(address: str | None, num_cpus: int | None = None):
    import ray

    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"cannot start or reach Ray{' at ' + address if address else ''}: {exc}") from None
    return ray


class SegmentActor:
    """One Ray actor: one Segmenter, loaded once, segmenting batches of documents into record rows."""

    def __init__(self, model: str | None, profile: str | None, backend: str, device: str | None, batch_size: int,
                 unit_mode: str, options: Any, text_field: str, id_field: str, threads: int | None):
        """``options``: the :class:`~headseg.segmenter.options.SegmentOptions` every batch is segmented
        with, or its fields as a mapping (validated here, on the worker)."""
        if threads and backend == "torch":
            import torch

            # the actor owns its process: one intra-op thread per CPU worker
            torch.set_num_threads(int(threads))
        from headseg.segmenter.api import Segmenter
        from headseg.segmenter.options import SegmentOptions

        self.options = SegmentOptions.of(options)
        self.segmenter = Segmenter(model=model, profile=profile, backend=backend, device=device,
                                   batch_size=batch_size, unit_mode=unit_mode, threads=threads, quiet=True)
        self.text_field, self.id_field = text_field, id_field

    def __call__(self, batch: dict) -> dict:
        """Segment one batch of records (columns ``text_field``, ``id_field``) into record columns plus ``error``."""
        from headseg.segmenter.api import DocumentError

        texts = list(batch[self.text_field])
        ids = list(batch[self.id_field]) if self.id_field in batch else [None] * len(texts)
        items = []
        for doc_id, text in zip(ids, texts):
            doc_id = None if doc_id is None else str(doc_id)
            if doc_id is None:
                items.append((None, InputError(f"the ray engine needs an id field '{self.id_field}' in every record")))
            elif not isinstance(text, str):
                what = "missing" if text is None else f"a {type(text).__name__}, not a string"
                items.append((doc_id, InputError(f"field '{self.text_field}' is {what}")))
            else:
                items.append((doc_id, text))
        cols: dict[str, list] = {k: [] for k in (*RECORD_FIELDS, "error")}
        results = self.segmenter.iter_segment([t for _, t in items], self.options, batch_docs=max(len(items), 1),
                                              errors="yield")
        for (doc_id, _), res in zip(items, results):
            if isinstance(res, DocumentError):
                for k, v in zip(cols, (doc_id or "?", -1, -1, -1, 0.0, "", None, res.reason)):
                    cols[k].append(v)
                continue
            for rec in res.to_records(doc_id):
                for k in RECORD_FIELDS:
                    cols[k].append(rec[k])
                cols["error"].append(None)
        from headseg.analysis.memory import release_memory

        release_memory()  # the actor owns its process, as the command line does
        return cols


# ------------------------------------------------------------------ study
def _study_shard(cfg_fields: dict, model: str | None, lo: int, hi: int, threads: int | None) -> dict:
    """One shard of the study on a worker: its accumulator's state."""
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    from headseg.analysis.model import load_model
    from headseg.analysis.study import Study, StudyConfig

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


def run_study_ray(cfg, model: str | None, loaded=None, shards: int | None = None, address: str | None = None,
                  num_cpus: int | None = None, threads: int | None = 1) -> dict:
    """The study with its batches sharded over Ray tasks, merged on the driver; returns the report.

    ``model`` is what each worker loads (a path, a cached hub id, or None for the
    embedded model); ``loaded`` the driver's copy (loaded from ``model`` if None).
    """
    from headseg.analysis.model import load_model
    from headseg.analysis.study import Study
    from headseg.analysis.study.stats import StudyAccumulator

    if cfg.resume:
        raise InputError("--resume is for a single-process study; a Ray study reruns its shards")
    study = Study(cfg, loaded if loaded is not None else load_model(model))
    ray = init_ray(address, num_cpus)
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
