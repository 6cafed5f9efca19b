"""``headseg segment --engine ray``: the corpus through a pool of Ray actors (:mod:`headseg.distributed`).

A reading task per file streams the documents of a Parquet file (read with the
local engine's own :func:`~.inputs.parquet_documents`: the same ids, texts and
errors), or the lines of a JSONL file (parsed in the actors by the local
engine's own :func:`~headseg.segmenter.stream.jsonl_document`); each actor segments its batches
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
from headseg.distributed import SegmentActor
from headseg.config import SegmenterConfig
from headseg.segmenter.options import SegmentOptions

from .inputs import Source, jsonl_lines, parquet_documents
from .formats import SinkTarget, sink_for
from .sinks import Sink, report_failed

#: a reading task hands on the lines of a JSONL file (the documents of a Parquet file) in pieces of at most
#: this many lines (documents) ...
LINES_PER_PIECE = 1024
#: ... or about this many bytes (a longer one is a piece of its own): memory stays bounded by the piece
BYTES_PER_PIECE = 8 << 20


def segment_corpus_ray(args, options: SegmentOptions, sources: list[Source], failed: int = 0) -> int:
    """``headseg segment --engine ray`` with ``options`` (validated by the command); returns the exit code
    (1 if any document failed, counting the ``failed`` inputs already reported)."""
    check_corpus(sources)
    with ray_session(args.address, quiet=args.quiet), _ray_data_settings(args.quiet):
        return _run(args, options, sources, failed)


def _run(args, options: SegmentOptions, sources: list[Source], failed: int) -> int:
    ds = _segmented(_read_corpus(sources, args), args, options, jsonl=sources[0].kind == "jsonl")
    # no settings: the Ray engine rewrites --out (no journal, no --resume)
    sink: Sink = sink_for(args.format, SinkTarget(args.out))
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
    if any(s.stream for s in sources) or not kinds <= {"jsonl", "parquet"} or len(kinds) != 1:
        # a stream (stdin, a pipe, a FIFO) can be read once, by one process; Ray's readers open files by path
        raise InputError("--engine ray reads JSONL or Parquet corpus files (all inputs of one kind), not text files, "
                         "stdin or pipes")


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
    """The corpus as a Ray dataset, blocks kept in input order (:func:`_ray_data_settings`): the non-blank
    lines of the JSONL files (columns ``where``, ``FILE:LINE``, and ``line``, its bytes), or the documents of
    the Parquet files (columns ``document``, ``text`` and ``error``: :func:`_read_parquet`)."""
    import ray.data

    paths = [_located(s.path) for s in sources]
    # One reading task per file streams it as the local engine reads it.  Not ray.data.read_json: it reads
    # through Arrow, which turns an integer id column with a null into floats (id 1 became "1.0") and
    # refuses a column of mixed ids; nor read_text: it reads a file whole, splits lines at U+2028 and the
    # like, fails a file on one undecodable line and numbers no lines.  Not ray.data.read_parquet: it
    # numbers no rows, so a record without an id could not be FILE:ROW, and it cannot merge an int id
    # column with another file's string one.
    files = ray.data.from_items([{"path": p, "name": s.path} for p, s in zip(paths, sources)],
                                override_num_blocks=len(sources))
    read, kwargs = ((_read_parquet, dict(text_field=args.text_field, id_field=args.id_field))
                    if sources[0].kind == "parquet" else (_read_lines, dict(max_bytes=args.max_bytes)))
    # Reading is light; with 0 CPUs reserved it never waits behind the actors,
    # which hold one CPU each (N workers on N cores would otherwise deadlock).
    return files.map_batches(read, fn_kwargs=kwargs, batch_size=1, batch_format="pyarrow", num_cpus=0)


def _located(path: str) -> str:
    """Where a Ray worker finds ``path``: a URI as it is, a local path made absolute."""
    return path if "://" in path else os.path.abspath(path)


def _read_lines(files, max_bytes: int) -> Iterator:
    """The non-blank lines of each JSONL file of ``files`` (a pyarrow table of ``path``, ``name``) as pyarrow
    tables of ``where`` (``NAME:LINE``, the local engine's place and id) and ``line`` (bytes; None when over
    ``max_bytes``), a piece at a time."""
    import pyarrow as pa

    for path, name in _files(files):
        with _open_binary(path, name) as fh:
            rows = ((f"{name}:{line_no}", raw) for line_no, raw in jsonl_lines(fh, max_bytes))
            yield from _pieces(rows, {"where": pa.string(), "line": pa.binary()})


def _read_parquet(files, text_field: str, id_field: str) -> Iterator:
    """The documents of each Parquet file of ``files`` (a pyarrow table of ``path``, ``name``), read batch by
    batch by the local engine's :func:`~.inputs.parquet_documents`, as pyarrow tables of ``document`` (its
    id: the record's, or ``NAME:ROW``), ``text`` and ``error`` (the reason a record is unusable, else None),
    a piece at a time.  Every column is a string whatever the files' column types, so the pieces of files
    with int ids, string ids or no id column go into one batch."""
    import pyarrow as pa

    for path, name in _files(files):
        rows = ((doc_id, text, None) if isinstance(text, str) else (doc_id, None, str(text))
                for doc_id, text in parquet_documents(path, text_field, id_field, name=name))
        yield from _pieces(rows, {"document": pa.string(), "text": pa.string(), "error": pa.string()})


def _files(files) -> Iterator[tuple[str, str]]:
    """``(path, name)`` of each file of a reading task's batch ``files``."""
    return zip(files.column("path").to_pylist(), files.column("name").to_pylist())


def _pieces(rows: Iterator[tuple], schema: dict) -> Iterator:
    """``rows`` (tuples of the ``schema``'s columns, in its order) as pyarrow tables of at most
    :data:`LINES_PER_PIECE` rows or about :data:`BYTES_PER_PIECE` bytes."""
    import pyarrow as pa

    def piece(columns: list[list]):
        return pa.table({k: pa.array(col, t) for (k, t), col in zip(schema.items(), columns)})

    columns: list[list] = [[] for _ in schema]
    size = 0
    for row in rows:
        for col, value in zip(columns, row):
            col.append(value)
        size += sum(len(v) for v in row if isinstance(v, (str, bytes)))
        if len(columns[0]) >= LINES_PER_PIECE or size >= BYTES_PER_PIECE:
            yield piece(columns)
            columns, size = [[] for _ in schema], 0
    if columns[0]:
        yield piece(columns)


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
    """``ds`` (``jsonl``: lines of JSONL files, else documents of Parquet files) mapped through a pool of :class:`SegmentActor`: record rows,
    with an ``error`` column."""
    import ray.data

    workers = args.workers or 1
    gpus = args.gpus_per_worker or 0
    # paths, not weights, travel to the workers: each resolves them itself
    model = None if args.model is None else os.path.abspath(args.model) if os.path.isdir(args.model) else args.model
    profile = None if args.profile is None else os.path.abspath(args.profile)
    config = SegmenterConfig.from_args(args, model=model, profile=profile, quiet=True,
                                       device="cuda" if gpus > 0 and args.device == "auto" else args.device,
                                       threads=None if gpus > 0 else 1)
    return ds.map_batches(
        SegmentActor,
        fn_constructor_kwargs=dict(config=config, options=options, text_field=args.text_field,
                                   id_field=args.id_field,
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
