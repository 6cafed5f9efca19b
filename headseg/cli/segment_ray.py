"""``headseg segment --engine ray``: the corpus through a pool of Ray actors (:mod:`headseg.segmenter.distributed`).

Ray Data reads the Parquet corpus, or the lines of the JSONL corpus (read
here, parsed in the actors by the local engine's own
:func:`~headseg.segmenter.stream.jsonl_document`); each actor segments its batches
with the command's :class:`SegmentOptions` and sends back record rows, which
come to this process in input order and go to the same :class:`~.sinks.Sink`
as the local engine's (so the outputs are equal record for record).
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

from headseg.analysis.errors import HeadsegError, InputError, first_line
from headseg.analysis.segments import RECORD_FIELDS
from headseg.analysis.ray import ray_session
from headseg.segmenter.distributed import SegmentActor
from headseg.segmenter.options import SegmentOptions

from .inputs import Source, jsonl_lines
from .sinks import ParquetSink, Sink, StreamSink, report_failed

#: a reading task hands on the lines of a JSONL file in pieces of at most this many lines ...
LINES_PER_PIECE = 1024
#: ... or about this many bytes (a longer line is a piece of its own): memory stays bounded by the piece
BYTES_PER_PIECE = 8 << 20


def segment_corpus_ray(args, options: SegmentOptions, sources: list[Source], failed: int = 0) -> int:
    """``headseg segment --engine ray`` with ``options`` (validated by the command); returns the exit code
    (1 if any document failed, counting the ``failed`` inputs already reported)."""
    check_corpus(sources)
    with ray_session(args.address, quiet=args.quiet), _ray_data_settings(args.quiet):
        return _run(args, options, sources, failed)


def _run(args, options: SegmentOptions, sources: list[Source], failed: int) -> int:
    ds = _segmented(_read_corpus(sources, args), args, options, jsonl=sources[0].kind == "jsonl")
    sink: Sink = (ParquetSink(args.out) if args.format == "parquet"
                  else StreamSink("jsonl", False, args.out, direct=True))
    ok = False
    try:
        failed += _write_rows(ds, sink)
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


def check_corpus(sources: list[Source]) -> None:
    """Refuse inputs the Ray engine cannot read: it takes JSONL or Parquet corpora, all of one kind."""
    kinds = {s.kind for s in sources}
    if not sources:
        raise InputError("no input corpus")
    if any(s.path == "-" for s in sources) or not kinds <= {"jsonl", "parquet"} or len(kinds) != 1:
        raise InputError("--engine ray reads JSONL or Parquet corpora (all inputs of one kind), not text files or stdin")


@contextlib.contextmanager
def _ray_data_settings(quiet: bool) -> Iterator[None]:
    """Ray Data set for the command (blocks in input order, progress bars unless ``quiet``, its progress
    log quiet), and set back afterwards: ``headseg.cli.main`` inside a program leaves it as it was."""
    import ray.data

    log = logging.getLogger("ray.data")
    ctx = ray.data.DataContext.get_current()
    saved = (log.level, ctx.execution_options.preserve_order, ctx.enable_progress_bars)
    # Ray Data's progress log is noise on stderr; under --quiet so is its "Progress bars disabled" warning
    log.setLevel(logging.ERROR if quiet else logging.WARNING)
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = not quiet
    try:
        yield
    finally:
        log.setLevel(saved[0])
        ctx.execution_options.preserve_order, ctx.enable_progress_bars = saved[1:]


def _read_corpus(sources: list[Source], args):
    """The corpus as a Ray dataset, blocks kept in input order (:func:`_ray_data_settings`): Parquet records,
    or the non-blank lines of the JSONL files (columns ``where``, ``FILE:LINE``, and ``line``, its bytes)."""
    import ray.data

    paths = [_located(s.path) for s in sources]
    # Reading is light; with 0 CPUs reserved it never waits behind the actors,
    # which hold one CPU each (N workers on N cores would otherwise deadlock).
    if sources[0].kind == "parquet":
        return ray.data.read_parquet(paths, num_cpus=0)
    # Not ray.data.read_json: it reads through Arrow, which turns an integer id column with a null into
    # floats (id 1 became "1.0") and refuses a column of mixed ids; nor read_text: it reads a file whole,
    # splits lines at U+2028 and the like, fails a file on one undecodable line and numbers no lines.
    # One reading task per file streams its lines as the local engine does (jsonl_lines).
    files = ray.data.from_items([{"path": p, "name": s.path} for p, s in zip(paths, sources)],
                                override_num_blocks=len(sources))
    return files.map_batches(_read_lines, fn_kwargs=dict(max_bytes=args.max_bytes), batch_size=1,
                             batch_format="pyarrow", num_cpus=0)


def _located(path: str) -> str:
    """Where a Ray worker finds ``path``: a URI as it is, a local path made absolute."""
    return path if "://" in path else os.path.abspath(path)


def _read_lines(files, max_bytes: int) -> Iterator:
    """The non-blank lines of each JSONL file of ``files`` (a pyarrow table of ``path``, ``name``) as pyarrow
    tables of ``where`` (``NAME:LINE``, the local engine's place and id) and ``line`` (bytes; None when over
    ``max_bytes``), a piece at a time."""
    import pyarrow as pa

    def piece(where: list, lines: list):
        return pa.table({"where": pa.array(where, pa.string()), "line": pa.array(lines, pa.binary())})

    for path, name in zip(files.column("path").to_pylist(), files.column("name").to_pylist()):
        where: list[str] = []
        lines: list[bytes | None] = []
        size = 0
        with _open_binary(path, name) as fh:
            for line_no, raw in jsonl_lines(fh, max_bytes):
                where.append(f"{name}:{line_no}")
                lines.append(raw)
                size += len(raw or b"")
                if len(lines) >= LINES_PER_PIECE or size >= BYTES_PER_PIECE:
                    yield piece(where, lines)
                    where, lines, size = [], [], 0
        if lines:
            yield piece(where, lines)


def _open_binary(path: str, name: str):
    """``path`` (local, or a URI that pyarrow's file systems open) as a buffered binary stream."""
    import io

    try:
        if "://" not in path:
            return open(path, "rb")
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(path)
        return io.BufferedReader(filesystem.open_input_stream(inner))
    except (OSError, ValueError) as exc:  # pyarrow: ArrowInvalid (a ValueError) for a URI it cannot open
        raise InputError(f"{name}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None


def _segmented(ds, args, options: SegmentOptions, jsonl: bool):
    """``ds`` (``jsonl``: lines of JSONL files) mapped through a pool of :class:`SegmentActor`: record rows,
    with an ``error`` column."""
    import ray.data

    workers = args.workers or 1
    gpus = args.gpus_per_worker or 0
    # paths, not weights, travel to the workers: each resolves them itself
    model = None if args.model is None else os.path.abspath(args.model) if os.path.isdir(args.model) else args.model
    profile = None if args.profile is None else os.path.abspath(args.profile)
    return ds.map_batches(
        SegmentActor,
        fn_constructor_kwargs=dict(model=model, profile=profile, backend=args.backend,
                                   device="cuda" if gpus > 0 and args.device == "auto" else args.device,
                                   batch_size=args.batch_size, unit_mode=args.unit_mode, options=options,
                                   text_field=args.text_field, id_field=args.id_field,
                                   threads=None if gpus > 0 else 1,
                                   jsonl=dict(encoding=args.encoding, max_bytes=args.max_bytes) if jsonl else None),
        batch_size=args.docs_per_batch,
        batch_format="pyarrow",  # Python values, as the local engine reads them (SegmentActor)
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
        num_gpus=gpus,
    )


def _write_rows(ds, sink: Sink) -> int:
    """Write the good rows of ``ds`` to ``sink`` batch by batch, reporting the failed documents; returns their count."""
    failed = 0
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        good = []
        for r in batch.to_pylist():
            if r["error"] is not None:
                report_failed(r["document"], r["error"])
                failed += 1
            else:
                good.append({k: r[k] for k in RECORD_FIELDS})
        sink.write_records(good)
    return failed
