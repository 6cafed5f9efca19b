"""``headseg segment``: topic segments or units of documents, corpora of any size.

Inputs are text files, folders (walked recursively), ``-`` (stdin) and JSONL
(or Parquet) corpora whose records carry a text and an id field.  Documents
stream through :meth:`Segmenter.iter_segment_batches` and each batch's records
are written as soon as they are ready, so memory is bounded by the batch, not
by the corpus.

``--format jsonl --out FILE`` appends to FILE directly, one ``write`` per batch
followed by ``fsync``, and keeps a journal ``FILE.journal``: its first line
records the settings, then one line per finished document (its position in the
input, its id, a digest of its text, and FILE's size after it), written and
synced only after the batch's records are durable.  ``--resume`` checks every
journaled document against the input (same id, same text digest: a changed
input is refused, exit 2, before the model loads), truncates FILE to the
journal's last size (dropping whatever a killed run left after it), skips the
journaled documents and appends the rest, so an interrupted run loses at most
the batch in flight.  A refused ``--resume`` changes neither FILE nor its
journal: nothing is truncated or written before every journaled document has
been checked (standard input's as they are read).  The journal is removed when every document is done;
documents that failed keep it, and ``--resume`` retries them.  ``--resume`` of
a FILE without a journal is a finished run (nothing to do) only when FILE is
a headseg JSONL output (:func:`.formats.is_segment_output`: its first line is a
record with exactly the record fields); any other file is refused (exit 2).
Other formats with ``--out`` are written to a temporary file beside the target
and renamed at the end.

Every ``--out`` is held under an exclusive lock for the run
(:func:`headseg.analysis.outputs.output_lock`): a second run writing the same file
is refused (exit 2) before it loads the model.  An existing ``--out`` that is
not a headseg output (of any format) is not overwritten unless ``--force``.

The inputs are read by :mod:`.inputs`, the outputs written by :mod:`.sinks`,
and ``--engine ray`` runs in :mod:`.segment_ray`; this module is the command.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Callable, Iterator

from headseg.analysis.errors import InputError
from headseg.analysis.outputs import output_lock
from headseg.analysis.ray import probe_address
from headseg.analysis.memory import release_memory
from headseg.analysis.progress import progress_bar

from headseg.config import SegmenterConfig, add_config_flags
from headseg.segmenter.options import SegmentOptions, add_option_flags
from headseg.segmenter.stream import DEFAULT_BATCH_DOCS, DocumentError
from headseg.segmenter.structure import text_of

from . import options
from .inputs import Source, check_text_sources, expand_inputs, iter_documents
from .formats import SinkTarget, check_output, format_help, format_names, get_format, is_segment_output, sink_for
from .journal import JournalSink, check_journal, check_journal_end, document_digest, journal_path, read_journal
from .sinks import Sink, report_failed

#: how the inputs are read: what a resumed run must share besides the segmentation options and the
#: segmenter's configuration (:meth:`SegmenterConfig.resume_settings`)
READING_KEYS = ("input_format", "text_field", "id_field", "encoding")


def run(args) -> int:
    """``headseg segment``: returns the exit code (1 if any document failed)."""
    args.files = named_or_stdin(args.files)
    opts = check_args(args)
    if args.backend == "torch":
        options.require(*options.TORCH_MODULES)
    sources = find_inputs(args)
    with output_lock(args.out if writes_file(args) else None):
        return _run_locked(args, opts, sources)


def _run_locked(args, opts: SegmentOptions, sources: list[Source]) -> int:
    """:func:`run` once ``--out`` is locked: the resume checks, the model, the documents."""
    if args.engine == "ray":
        from .segment_ray import segment_corpus_ray

        return segment_corpus_ray(args, opts, sources)
    settings = settings_of(args, opts, sources)
    if args.resume and not check_resume(args, settings, sources):
        return 0
    announce_stdin(args, sources)
    segmenter = load_segmenter(args)
    sink = open_sink(args, settings, single=len(sources) == 1 and sources[0].kind == "text")
    failed = 0
    done = sink.done if isinstance(sink, JournalSink) else {}
    skip = resume_skip(done)
    ok = False
    try:
        failed += segment_into(sink, segmenter, opts, _pending(iter_documents(sources, args), skip,
                                                               max(done, default=-1)), args,
                               total=len(sources) if all(s.kind == "text" for s in sources) else None,
                               resumed=len(done))
        ok = True
    finally:
        # a journaled output keeps its journal while documents failed, so --resume retries them
        sink.close(ok=ok and (failed == 0 or not journaled(args)))
    return 1 if failed else 0


def writes_file(args) -> bool:
    """Whether the output goes to ``--out FILE`` (not stdout)."""
    return args.out not in (None, "-")


def journaled(args) -> bool:
    """Whether the output is JSONL appended to ``--out`` with a journal (``--resume`` works on it)."""
    return writes_file(args) and get_format(args.format).appendable


def check_args(args) -> SegmentOptions:
    """The segmentation options, and every argument error, found before anything is loaded (exit 2)."""
    opts = SegmentOptions.from_args(args)
    options.check_positive(args, "batch_size", "docs_per_batch", "workers", "threads")
    options.check_input(args)
    if args.gpus_per_worker is not None and not (math.isfinite(args.gpus_per_worker) and args.gpus_per_worker >= 0):
        raise InputError(f"--gpus-per-worker must be at least 0 (got {args.gpus_per_worker})")
    if args.artifact is not None and args.backend == "torch":
        raise InputError("--artifact is served by the ONNX engine: it does not go with --backend torch")
    if args.force and not writes_file(args):
        raise InputError("--force goes with --out FILE")
    if not writes_file(args) and options.stdout_closed():
        raise InputError("standard output is closed: the segments have nowhere to go (give --out FILE)")
    fmt = get_format(args.format)
    if args.resume and not journaled(args):
        journals = " or ".join(n for n in format_names() if get_format(n).appendable)
        raise InputError(f"--resume needs --format {journals} and --out FILE")
    if fmt.needs_file and not writes_file(args):
        raise InputError(f"--format {fmt.name} needs --out FILE")
    if args.engine == "ray":
        if not writes_file(args) or not fmt.records:
            rows = " or ".join(n for n in format_names() if get_format(n).records)
            raise InputError(f"--engine ray needs --format {rows} and --out FILE")
        if args.resume:
            raise InputError("--resume is for the local engine; the ray engine rewrites --out")
        if args.address:
            probe_address(args.address)  # an unreachable cluster: one line now, not Ray retrying for minutes
    elif args.address or args.workers or args.gpus_per_worker:
        raise InputError("--address, --workers and --gpus-per-worker go with --engine ray")
    return opts


def named_or_stdin(files: list[str]) -> list[str]:
    """The inputs named, or ``-`` when none is and text is piped in (``cat f | headseg segment``); none named
    with stdin a terminal (or closed) is refused in one line, not answered with the usage."""
    if files:
        return files
    if sys.stdin is not None and not sys.stdin.closed and not sys.stdin.isatty():
        return ["-"]
    raise InputError("no input: name files or folders, '-' for standard input, or pipe text in "
                     "(cat FILE | headseg segment)")


def find_inputs(args) -> list[Source]:
    """The sources to read, every one checked before anything loads: an input that is missing, unreadable, or a
    text file that its first bytes show cannot be read (a PDF, binary, the wrong encoding) refuses the run
    (exit 2, one line naming the first and counting the others); so does an output that is an input."""
    sources, bad = expand_inputs(args.files, args.input_format)
    bad += check_text_sources(sources, args.encoding, args.max_bytes)
    if bad:
        (path, reason), more = bad[0], len(bad) - 1
        others = f" (and {more} more input{'s' if more > 1 else ''} that cannot be read: {bad[1][0]}" \
                 f"{', ...' if more > 1 else ''})" if more else ""
        raise InputError(f"{path}: {reason}{others}")
    if writes_file(args):
        # --resume appends to its own output: what it may resume is judged by check_resume
        check_output(args.out, sources, journaled(args), force=args.force or args.resume)
        if journaled(args) and args.engine == "local":
            check_journal(args.out, force=args.force or args.resume)
    return sources


def announce_stdin(args, sources: list[Source]) -> None:
    """Say so when standard input is read from a terminal: the command is waiting for the user, not stuck."""
    if not args.quiet and any(s.path == "-" for s in sources) and sys.stdin is not None and sys.stdin.isatty():
        print("headseg: reading standard input (end it with Ctrl-D)", file=sys.stderr)


def settings_of(args, opts: SegmentOptions, sources: list[Source]) -> dict:
    """What a resumed run must share with the interrupted one."""
    out = opts.settings()
    out.update(config_of(args).resume_settings())
    out.update({k: getattr(args, k) for k in READING_KEYS})
    out["inputs"] = [s.path for s in sources]
    return out


def check_resume(args, settings: dict, sources: list[Source]) -> bool:
    """``--resume``, before the model is loaded: False when ``--out`` is a finished headseg output (no journal:
    nothing to do).  Refused (exit 2): a file without a journal that headseg did not write, a journal of other
    settings, and inputs that changed since the journaled documents were written."""
    journal = journal_path(args.out)
    if os.path.exists(args.out) and not os.path.exists(journal):
        if not is_segment_output(args.out, "jsonl"):
            raise InputError(f"--resume: {args.out} has no journal and is not a headseg JSONL output; "
                             "nothing to resume (run without --resume to write it)")
        if not args.quiet:
            print(f"headseg: {args.out} has no journal: the run that wrote it finished; nothing to resume",
                  file=sys.stderr)
        return False
    if os.path.exists(journal):
        done, end, _ = read_journal(journal, settings)
        check_journal_end(args.out, end)  # before the model loads
        # stdin, a pipe or a FIFO can be read once: its documents are checked as they are read
        if done and not any(s.stream for s in sources):
            last = max(done)
            for n, doc_id, text in iter_documents(sources, args):
                if n > last:
                    break
                resume_skip(done)(n, doc_id, text)
    return True


def config_of(args) -> SegmenterConfig:
    """The segmenter's configuration on the command line (validated, nothing loaded)."""
    return SegmenterConfig.from_args(args, quiet=args.quiet)


def load_segmenter(args):
    """The :class:`Segmenter` the command line asks for (the model loads here)."""
    if args.threads and args.backend == "torch":
        import torch  # the command owns its process; the ONNX engine takes its threads below

        torch.set_num_threads(args.threads)
    from headseg.api import Segmenter

    return Segmenter(config=config_of(args))


def open_sink(args, settings: dict, single: bool) -> Sink:
    """The sink of ``--format`` for ``--out`` (``single``: one text document), from the format registry."""
    return sink_for(args.format, SinkTarget(args.out if writes_file(args) else None, single=single,
                                            settings=settings, resume=args.resume))


def resume_skip(done: dict[int, tuple[str, str]]) -> Callable[[int, str, Any], bool]:
    """``skip(position, id, text)``: True for a document the interrupted run finished (``done``: position ->
    (id, digest of its text) from the journal); a document whose id or text changed is refused (exit 2)."""
    def skip(n: int, doc_id: str, text: Any) -> bool:
        if n not in done:
            return False
        old_id, old_digest = done[n]
        if old_id != doc_id:
            raise InputError(f"--resume: input {n + 1} is '{doc_id}', the interrupted run had '{old_id}'; "
                             "the inputs changed: run without --resume")
        if text_of(text) is None or document_digest(text_of(text)) != old_digest:
            raise InputError(f"--resume: {doc_id} changed since the interrupted run segmented it; "
                             "run without --resume to start over")
        return True

    return skip


def _pending(docs, skip, last: int = -1) -> Iterator[tuple[int, str, Any]]:
    """Documents not skipped by ``--resume`` (each journaled one checked against its digest).

    Those before ``last`` (the last journaled position: documents the interrupted run could not segment)
    are held until every journaled document has been checked, so that a changed one (standard input is
    checked only as it is read) refuses the run before anything is written.
    """
    held = []
    for n, doc_id, text in docs:
        if skip(n, doc_id, text):
            continue
        if n < last:
            held.append((n, doc_id, text))
            continue
        yield from held
        held = []
        yield n, doc_id, text
    yield from held


def segment_into(sink: Sink, segmenter, opts: SegmentOptions, docs: Iterator[tuple[int, str, Any]], args,
                 total: int | None, resumed: int) -> int:
    """Segment ``docs`` batch by batch into ``sink``, each batch written once it is ready; failed documents
    are reported on stderr in input order.  Returns how many failed."""
    failed = 0
    # Documents read and found unreadable are reported in input order with the rest.
    meta: dict[int, tuple[int, str]] = {}

    def texts():
        for i, (n, doc_id, text) in enumerate(docs):
            meta[i] = (n, doc_id)
            yield text

    with progress_bar(total=total, desc="segmenting", disable=args.quiet, unit="doc") as bar:
        if resumed:
            bar.update(resumed)
        i = 0
        for batch in segmenter.iter_segment_batches(texts(), opts, batch_docs=args.docs_per_batch, errors="yield",
                                                    unit_progress=not args.quiet):
            good = []
            for res in batch:
                n, doc_id = meta.pop(i)
                i += 1
                if isinstance(res, DocumentError):
                    report_failed(doc_id, res.reason)
                    failed += 1
                else:
                    good.append((n, doc_id, res))
            sink.write_batch(good)
            bar.update(len(batch))
            release_memory()
    return failed


def register(sub) -> None:
    """Declare ``headseg segment`` and its options on the subcommand parsers."""
    p = sub.add_parser("segment", help="split documents into topic segments or sentence-like units",
                       description="Segment text files, folders (recursively), '-' (stdin) or JSONL/Parquet corpora "
                                   "into topic segments (default) or units, streaming: each batch's records are "
                                   "written as soon as they are ready.  Segments tile the input exactly: joining "
                                   "their texts gives the input back.")
    p.add_argument("files", nargs="*", metavar="INPUT",
                   help="text files, folders (*.txt, *.text, *.md, *.ref, *.jsonl, *.parquet inside), JSONL or "
                        "Parquet corpora, or '-' for stdin (the default when stdin is not a terminal)")
    p.add_argument("--format", choices=format_names(), default=format_names()[0], help=format_help())
    p.add_argument("--input-format", choices=("auto", "text", "jsonl", "parquet"), default="auto",
                   help="how to read inputs: by suffix (auto: .jsonl, .parquet, else text), or all as one format")
    p.add_argument("--text-field", default="text", help="JSONL/Parquet field holding the text (default text)")
    p.add_argument("--id-field", default="id",
                   help="JSONL/Parquet field holding the document id, written as 'document' (default id; "
                        "without it, FILE:LINE)")
    # --model --profile --artifact --backend --precision --device --threads --batch-size --unit-mode
    add_config_flags(p, command="segment")
    # --level --segments --min-chars --max-chars --max-tokens --target-tokens --overlap --penalty...; with
    # --overlap the records are the overlapped chunks, each saying what it repeats (overlap_chars)
    add_option_flags(p)
    p.add_argument("--docs-per-batch", type=int, default=DEFAULT_BATCH_DOCS,
                   help=f"documents segmented and written together (default {DEFAULT_BATCH_DOCS}); "
                        "memory is bounded by this, and an interrupted run loses at most one batch")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write here instead of stdout ('-' = stdout); jsonl is appended batch by batch with a "
                        "journal, other formats are written atomically")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted --format jsonl --out FILE run: skip the documents it finished "
                        "(refused if they changed since)")
    options.add_force(p)
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (this process) or ray (Ray Data actors; needs the 'ray' extra)")
    p.add_argument("--address", default=None, help="ray: cluster address (default: start a local Ray)")
    p.add_argument("--workers", type=int, default=None, help="ray: number of segmenter actors (default 1)")
    p.add_argument("--gpus-per-worker", type=float, default=None, help="ray: GPUs per actor (default 0)")
    options.add_input(p)
    options.add_quiet(p)
    p.set_defaults(func=run)
