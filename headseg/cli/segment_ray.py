"""``headseg segment --engine ray``: the corpus through a pool of Ray actors (:mod:`headseg.segmenter.distributed`)."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

from headseg.analysis.errors import HeadsegError, InputError, first_line
from headseg.analysis.segments import RECORD_FIELDS
from headseg.analysis.ray import init_ray
from headseg.segmenter.distributed import SegmentActor

from .segment import ParquetSink, StreamSink


def segment_corpus_ray(args, sources, failed: int = 0) -> int:
    """``headseg segment --engine ray``: returns the exit code (1 if any document failed)."""
    kinds = {s.kind for s in sources}
    if not sources:
        raise InputError("no input corpus")
    if any(s.path == "-" for s in sources) or not kinds <= {"jsonl", "parquet"} or len(kinds) != 1:
        raise InputError("--engine ray reads JSONL or Parquet corpora (all inputs of one kind), not text files or stdin")
    ray = init_ray(args.address)
    import ray.data

    # the command line owns this process: Ray Data's progress log is noise on stderr
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = not args.quiet
    paths = [s.path if "://" in s.path else os.path.abspath(s.path) for s in sources]
    # Reading is light; with 0 CPUs reserved it never waits behind the actors,
    # which hold one CPU each (N workers on N cores would otherwise deadlock).
    if kinds == {"parquet"}:
        ds = ray.data.read_parquet(paths, num_cpus=0)
    else:
        ds = ray.data.read_json(paths, lines=True, num_cpus=0)
    workers = args.workers or 1
    gpus = args.gpus_per_worker or 0
    options = dict(level=args.level, segments=args.segments, min_chars=args.min_chars, max_chars=args.max_chars,
                   max_tokens=args.max_tokens, penalty=args.penalty)
    model = None if args.model is None else os.path.abspath(args.model) if os.path.isdir(args.model) else args.model
    profile = None if args.profile is None else os.path.abspath(args.profile)
    ds = ds.map_batches(
        SegmentActor,
        fn_constructor_kwargs=dict(model=model, profile=profile, backend=args.backend,
                                   device="cuda" if gpus > 0 and args.device == "auto" else args.device,
                                   batch_size=args.batch_size, unit_mode=args.unit_mode, options=options,
                                   text_field=args.text_field, id_field=args.id_field,
                                   threads=None if gpus > 0 else 1),
        batch_size=args.docs_per_batch,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
        num_gpus=gpus,
    )
    sink: Any = ParquetSink(args.out) if args.format == "parquet" else StreamSink("jsonl", False, args.out, direct=True)
    ok = False
    try:
        for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
            rows = batch.to_pylist()
            good = []
            for r in rows:
                if r["error"] is not None:
                    print(f"headseg: error: {r['document']}: {r['error']}", file=sys.stderr)
                    failed += 1
                else:
                    good.append({k: r[k] for k in RECORD_FIELDS})
            _write_rows(sink, good)
        ok = True
    except Exception as exc:  # noqa: BLE001 - Ray wraps worker errors; report one line
        if isinstance(exc, HeadsegError):
            raise
        cause = getattr(exc, "cause", None)
        if isinstance(cause, HeadsegError):
            raise cause from None
        raise HeadsegError(f"the ray engine failed: {type(exc).__name__}: {first_line(exc)}") from None
    finally:
        sink.close(ok=ok)
    return 1 if failed else 0


def _write_rows(sink, rows: list[dict]) -> None:
    if hasattr(sink, "write_records"):
        sink.write_records(rows)
    else:
        sink.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
