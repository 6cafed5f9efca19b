"""``headseg segment``: topic segments or units of documents, corpora of any size.

Inputs are text files, folders (walked recursively), ``-`` (stdin) and JSONL
(or Parquet) corpora whose records carry a text and an id field.  Documents
stream through :meth:`Segmenter.iter_segment_batches` and each batch's records
are written as soon as they are ready, so memory is bounded by the batch, not
by the corpus.

``--format jsonl --out FILE`` appends to FILE directly, one ``write`` per batch
followed by ``fsync``, and keeps a journal ``FILE.journal``: its first line
records the settings, then one line per finished document (its position in the
input, its id, and FILE's size after it), written and synced only after the
batch's records are durable.  ``--resume`` truncates FILE to the journal's last
size (dropping whatever a killed run left after it), skips the journaled
documents and appends the rest, so an interrupted run loses at most the batch
in flight.  The journal is removed when every document is done; documents that
failed keep it, and ``--resume`` retries them.  Other formats with ``--out``
are written to a temporary file beside the target and renamed at the end.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.io import check_output_path, decode_text, read_text
from headseg.analysis.memory import release_memory
from headseg.analysis.progress import progress_bar
from headseg.analysis.segments import RECORD_FIELDS

from headseg.segmenter.api import DEFAULT_BATCH_DOCS, LEVELS, check_options

from . import options

#: suffixes read from a folder (a file named explicitly is always read)
TEXT_SUFFIXES = (".txt", ".text", ".md", ".ref")
JSONL_SUFFIXES = (".jsonl",)
PARQUET_SUFFIXES = (".parquet",)
JOURNAL_VERSION = 1

# ---------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Source:
    path: str  # "-" for stdin
    kind: str  # "text", "jsonl" or "parquet"


def _kind_of(path: str, input_format: str) -> str:
    if input_format != "auto":
        return input_format
    low = path.lower()
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    return "text"


def expand_inputs(paths: list[str], input_format: str) -> tuple[list[Source], list[tuple[str, str]]]:
    """Sources to read (folders walked in sorted order) and ``(path, reason)`` for those that do not exist."""
    if input_format == "auto":
        wanted = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES
    else:
        wanted = {"text": TEXT_SUFFIXES, "jsonl": JSONL_SUFFIXES, "parquet": PARQUET_SUFFIXES}[input_format]
    sources, missing = [], []
    for p in paths:
        if p == "-":
            sources.append(Source("-", "text" if input_format == "auto" else input_format))
            continue
        if "://" in p:
            # a remote URI (s3://, gs://, ...): the ray engine's reader opens it
            sources.append(Source(p, _kind_of(p, input_format)))
            continue
        path = Path(p)
        if path.is_dir():
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(os.path.join(root, f) for f in sorted(files)
                             if not f.startswith(".") and f.lower().endswith(wanted))
            if not found:
                missing.append((p, f"folder has no input files ({', '.join(wanted)})"))
            sources.extend(Source(f, _kind_of(f, input_format)) for f in found)
        elif path.exists():
            sources.append(Source(p, _kind_of(p, input_format)))
        else:
            missing.append((p, "no such file"))
    return sources, missing


def iter_documents(sources: list[Source], args, skip=None) -> Iterator[tuple[int, str, Any]]:
    """``(position, id, text)`` for every document of every source, lazily.

    ``text`` is an :class:`InputError` for a document that cannot be read (it is
    reported, the others go on).  ``skip(position, id)`` returning True skips a
    text file without reading it (``--resume``).
    """
    n = 0
    for src in sources:
        if src.kind == "text":
            name = "<stdin>" if src.path == "-" else src.path
            if skip is not None and skip(n, name):
                yield n, name, None
            else:
                try:
                    text: Any = read_text(src.path, encoding=args.encoding, max_bytes=args.max_bytes,
                                          allow_empty=True)
                except HeadsegError as exc:
                    text = exc
                yield n, name, text
            n += 1
        elif src.kind == "jsonl":
            for doc_id, text in _iter_jsonl(src.path, args):
                yield n, doc_id, text
                n += 1
        else:
            for doc_id, text in _iter_parquet(src.path, args):
                yield n, doc_id, text
                n += 1


def _iter_jsonl(path: str, args) -> Iterator[tuple[str, Any]]:
    source = "<stdin>" if path == "-" else path
    try:
        fh = sys.stdin.buffer if path == "-" else open(path, "rb")
    except OSError as exc:
        yield source, InputError(f"cannot read ({exc.strerror or exc})")
        return
    try:
        for line_no, raw in enumerate(_bounded_lines(fh, args.max_bytes), start=1):
            where = f"{source}:{line_no}"
            if raw is None:
                yield where, InputError(f"line is over the limit of {args.max_bytes:,} bytes (raise it with --max-bytes)")
                continue
            if not raw.strip():
                continue
            try:
                obj = json.loads(decode_text(raw, where, args.encoding))
            except HeadsegError as exc:
                yield where, exc
                continue
            except ValueError as exc:
                yield where, InputError(f"not valid JSON ({getattr(exc, 'msg', exc)})")
                continue
            if not isinstance(obj, dict):
                yield where, InputError("a JSONL record must be a JSON object")
                continue
            doc_id = obj.get(args.id_field)
            doc_id = where if doc_id is None else str(doc_id)
            text = obj.get(args.text_field)
            if not isinstance(text, str):
                what = "missing" if text is None else f"a {type(text).__name__}, not a string"
                text = InputError(f"field '{args.text_field}' is {what}")
            yield doc_id, text
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def _bounded_lines(fh, max_bytes: int) -> Iterator[bytes | None]:
    """Lines of a binary stream; a line longer than ``max_bytes`` is skipped whole and given as None."""
    while True:
        line = fh.readline(max_bytes + 1)
        if not line:
            return
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = fh.readline(1 << 20)
            yield None
            continue
        yield line


def _iter_parquet(path: str, args) -> Iterator[tuple[str, Any]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        yield path, InputError(f"not a readable Parquet file ({exc})")
        return
    names = pf.schema_arrow.names
    if args.text_field not in names:
        yield path, InputError(f"Parquet file has no column '{args.text_field}'")
        return
    cols = [args.text_field] + ([args.id_field] if args.id_field in names else [])
    row = 0
    for batch in pf.iter_batches(batch_size=1024, columns=cols):
        texts = batch.column(args.text_field).to_pylist()
        ids = batch.column(args.id_field).to_pylist() if args.id_field in names else [None] * len(texts)
        for doc_id, text in zip(ids, texts):
            where = f"{path}:{row}"
            row += 1
            if not isinstance(text, str):
                text = InputError(f"field '{args.text_field}' is {'missing' if text is None else 'not a string'}")
            yield (where if doc_id is None else str(doc_id)), text


# ---------------------------------------------------------------- outputs
def records(doc_id: str, seg) -> list[dict]:
    """One flat record per segment: the :meth:`Segmentation.to_dict` schema with the document id in each."""
    return seg.to_records(doc_id)


def check_output(out: str, sources: list[Source], direct: bool) -> None:
    """Refuse an output that is an input (same file, hard link, symlink) or cannot be written, before any work."""
    check_output_path(out, [s.path for s in sources if s.path != "-" and "://" not in s.path])
    if direct and os.path.exists(out) and not os.access(out, os.W_OK):
        raise InputError(f"--out {out}: permission denied")


class StreamSink:
    """Text, JSON or JSONL to a stream (stdout), or to a temporary file renamed over ``--out`` at the end."""

    def __init__(self, fmt: str, single: bool, out: str | None, direct: bool = False):
        self.fmt, self.single, self.out = fmt, single, out
        self.count = 0
        self.tmp = None
        if out is None:
            self.fh = sys.stdout
        elif direct:
            # records appended to --out as they come (whole lines; the ray engine's JSONL)
            self.fh = open(out, "w", encoding="utf-8", newline="")
        else:
            p = Path(out)
            fd, self.tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
            self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
        if fmt == "json" and not single:
            self.fh.write("[")

    def write_batch(self, docs: list[tuple[int, str, Any]]) -> None:
        parts = []
        for _, doc_id, seg in docs:
            if self.fmt == "jsonl":
                parts.extend(json.dumps(r, ensure_ascii=False) + "\n" for r in records(doc_id, seg))
            elif self.fmt == "json":
                body = json.dumps(seg.to_dict(document=doc_id), indent=2, ensure_ascii=False)
                if self.single:
                    parts.append(body + "\n")
                else:
                    parts.append(("," if self.count else "") + "\n" + textwrap.indent(body, "  "))
            else:
                if not self.single:
                    parts.append(f"##### {doc_id}\n")
                for i, s in enumerate(seg):
                    parts.append(f"----- segment {i + 1}/{len(seg)}  chars {s.start}-{s.end}  score {s.score:.3f} -----\n")
                    parts.append(s.text if s.text.endswith("\n") else s.text + "\n")
            self.count += 1
        self.write_text("".join(parts))

    def write_text(self, text: str) -> None:
        if text:
            self.fh.write(text)
            self.fh.flush()

    def close(self, ok: bool = True) -> None:
        if self.fmt == "json" and not self.single:
            self.fh.write("\n]\n" if self.count else "]\n")
        self.fh.flush()
        if self.tmp is None:
            if self.fh is not sys.stdout:
                os.fsync(self.fh.fileno())
                self.fh.close()
            return
        if not ok:
            self.fh.close()
            os.unlink(self.tmp)
            return
        os.fsync(self.fh.fileno())
        self.fh.close()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.tmp, 0o666 & ~umask)
        os.replace(self.tmp, self.out)


class ParquetSink:
    """Records as Parquet (one row group per batch) in a temporary file renamed over ``--out`` at the end."""

    def __init__(self, out: str):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        types = {"document": pa.string(), "score": pa.float64(), "text": pa.string()}
        self.schema = pa.schema([(f, types.get(f, pa.int64())) for f in RECORD_FIELDS])
        p = Path(out)
        fd, self.tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
        os.close(fd)
        self.out = out
        self.writer = pq.ParquetWriter(self.tmp, self.schema)

    def write_records(self, rows: list[dict]) -> None:
        if rows:
            self.writer.write_table(self.pa.Table.from_pylist(rows, schema=self.schema))

    def write_batch(self, docs) -> None:
        self.write_records([r for _, doc_id, seg in docs for r in records(doc_id, seg)])

    def close(self, ok: bool = True) -> None:
        self.writer.close()
        if ok:
            os.replace(self.tmp, self.out)
        else:
            os.unlink(self.tmp)


def read_journal(journal: str, settings: dict) -> tuple[dict[int, str], int, int]:
    """``(done, end, valid)``: finished documents by input position, the output size they fill, and the
    journal's length in bytes up to its last whole entry.  Refuses other settings than ``settings``."""
    with open(journal, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    try:
        head = json.loads(lines[0])
        old = head["settings"]
    except (ValueError, KeyError, TypeError, IndexError):
        raise InputError(f"{journal}: not a headseg journal; run again without --resume") from None
    if head.get("headseg_segment_journal") != JOURNAL_VERSION:
        raise InputError(f"{journal}: journal version {head.get('headseg_segment_journal')} is not "
                         f"{JOURNAL_VERSION}; run again without --resume")
    diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
    if diff:
        k = diff[0]
        raise InputError(f"--resume: the interrupted run used {k} = {old.get(k)!r}, this one {settings.get(k)!r}; "
                         "use the same settings, or run without --resume to start over")
    done: dict[int, str] = {}
    end, valid = 0, len(lines[0]) + 1
    # the last line may be torn by a kill: only whole, valid lines count
    for raw in lines[1:-1]:
        try:
            entry = json.loads(raw)
            n, doc, e = int(entry["n"]), str(entry["document"]), int(entry["end"])
        except (ValueError, KeyError, TypeError):
            break
        done[n] = doc
        end = max(end, e)
        valid += len(raw) + 1
    return done, end, valid


class JournalSink:
    """JSONL appended to ``--out`` batch by batch, with the journal that makes ``--resume`` exact."""

    def __init__(self, out: str, settings: dict, resume: bool):
        self.out = out
        self.journal = out + ".journal"
        self.done: dict[int, str] = {}
        if resume and os.path.exists(self.journal):
            self.done, end, journal_valid = read_journal(self.journal, settings)
            size = os.path.getsize(out) if os.path.exists(out) else 0
            if size < end:
                raise InputError(f"--out {out}: {size:,} bytes, shorter than the {end:,} its journal records; "
                                 "it was changed since: run again without --resume")
            self.fd = os.open(out, os.O_WRONLY | os.O_APPEND)
            # whatever a killed run wrote after its last finished batch is dropped
            os.ftruncate(self.fd, end)
            self.jfd = os.open(self.journal, os.O_WRONLY | os.O_APPEND)
            os.ftruncate(self.jfd, journal_valid)
        else:
            self.jfd = os.open(self.journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            self._append(self.jfd, json.dumps({"headseg_segment_journal": JOURNAL_VERSION, "settings": settings},
                                              sort_keys=True) + "\n")
            os.fsync(self.jfd)
            self.fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o666)
            os.fsync(self.fd)

    @staticmethod
    def _append(fd: int, text: str) -> None:
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]

    def write_batch(self, docs: list[tuple[int, str, Any]]) -> None:
        block = "".join(json.dumps(r, ensure_ascii=False) + "\n" for _, doc_id, seg in docs
                        for r in records(doc_id, seg))
        self._append(self.fd, block)
        os.fsync(self.fd)
        end = os.lseek(self.fd, 0, os.SEEK_END)
        self._append(self.jfd, "".join(json.dumps({"n": n, "document": doc_id, "end": end}, ensure_ascii=False) + "\n"
                                       for n, doc_id, _ in docs))
        os.fsync(self.jfd)

    def close(self, ok: bool = True) -> None:
        os.close(self.fd)
        os.close(self.jfd)
        if ok:
            os.unlink(self.journal)


# ---------------------------------------------------------------- command
def _validate(args) -> None:
    """Every argument error, found before anything is loaded (exit 2)."""
    try:
        check_options(args.level, args.segments, args.min_chars, args.max_chars, args.max_tokens, args.penalty)
    except InputError as exc:
        msg = str(exc)
        for name in ("segments", "min_chars", "max_chars", "max_tokens", "penalty"):
            msg = msg.replace(name, "--" + name.replace("_", "-"))
        raise InputError(msg) from None
    for name in ("batch_size", "docs_per_batch", "max_bytes", "workers", "threads"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1 (got {v})")
    if args.gpus_per_worker is not None and not args.gpus_per_worker >= 0:
        raise InputError(f"--gpus-per-worker must be at least 0 (got {args.gpus_per_worker})")
    to_file = args.out not in (None, "-")
    if args.resume and not (to_file and args.format == "jsonl"):
        raise InputError("--resume needs --format jsonl and --out FILE")
    if args.format == "parquet" and not to_file:
        raise InputError("--format parquet needs --out FILE")
    if args.engine == "ray":
        if not to_file or args.format not in ("jsonl", "parquet"):
            raise InputError("--engine ray needs --format jsonl or parquet and --out FILE")
        if args.resume:
            raise InputError("--resume is for the local engine; the ray engine rewrites --out")
    elif args.address or args.workers or args.gpus_per_worker:
        raise InputError("--address, --workers and --gpus-per-worker go with --engine ray")


def settings_of(args, sources: list[Source]) -> dict:
    """What a resumed run must share with the interrupted one."""
    keys = ("level", "segments", "min_chars", "max_chars", "max_tokens", "penalty", "unit_mode", "model", "profile",
            "backend", "artifact", "precision", "input_format", "text_field", "id_field", "encoding")
    out = {k: getattr(args, k) for k in keys}
    out["inputs"] = [s.path for s in sources]
    return out


def run(args) -> int:
    _validate(args)
    sources, missing = expand_inputs(args.files, args.input_format)
    if not sources and len(args.files) == 1 and missing:
        raise InputError(f"{missing[0][0]}: {missing[0][1]}")
    to_file = args.out not in (None, "-")
    direct = to_file and args.format == "jsonl"
    if to_file:
        check_output(args.out, sources, direct)
    failed = 0
    for path, reason in missing:
        print(f"headseg: error: {path}: {reason}", file=sys.stderr)
        failed += 1
    if args.engine == "ray":
        from .segment_ray import segment_corpus_ray

        return segment_corpus_ray(args, sources, failed)
    settings = settings_of(args, sources)
    if args.resume and os.path.exists(args.out) and not os.path.exists(args.out + ".journal"):
        if not args.quiet:
            print(f"headseg: {args.out} has no journal: the run that wrote it finished; nothing to resume",
                  file=sys.stderr)
        return 1 if failed else 0
    if args.resume and os.path.exists(args.out + ".journal"):
        # settings mismatches are found before the model is loaded
        read_journal(args.out + ".journal", settings)

    if args.threads and args.backend == "torch":
        import torch  # the command owns its process; the ONNX engine takes its threads below

        torch.set_num_threads(args.threads)
    from headseg.segmenter.api import Segmenter

    seg = Segmenter(model=args.model, profile=args.profile, backend=args.backend, device=args.device,
                    batch_size=args.batch_size, unit_mode=args.unit_mode, artifact=args.artifact,
                    precision=args.precision, threads=args.threads, quiet=args.quiet)
    seg.unit_params.progress = not args.quiet
    single = len(sources) == 1 and not missing and sources[0].kind == "text" and args.format != "jsonl"
    if direct:
        sink: Any = JournalSink(args.out, settings, args.resume)
    elif args.format == "parquet":
        sink = ParquetSink(args.out)
    else:
        sink = StreamSink(args.format, single, args.out if to_file else None)
    done = getattr(sink, "done", {})

    def skip(n: int, doc_id: str) -> bool:
        if n not in done:
            return False
        if done[n] != doc_id:
            raise InputError(f"--resume: input {n + 1} is '{doc_id}', the interrupted run had '{done[n]}'; "
                             "the inputs changed: run without --resume")
        return True

    # Documents read and found unreadable are reported in input order with the rest.
    meta: dict[int, tuple[int, str]] = {}

    def texts():
        for i, (n, doc_id, text) in enumerate(_pending(iter_documents(sources, args, skip), skip)):
            meta[i] = (n, doc_id)
            yield text

    kwargs = dict(level=args.level, segments=args.segments, min_chars=args.min_chars, max_chars=args.max_chars,
                  max_tokens=args.max_tokens, penalty=args.penalty)
    total = len(sources) if all(s.kind == "text" for s in sources) else None
    ok = False
    try:
        with progress_bar(total=total, desc="segmenting", disable=args.quiet, unit="doc") as bar:
            if done:
                bar.update(len(done))
            i = 0
            for batch in seg.iter_segment_batches(texts(), batch_docs=args.docs_per_batch, errors="yield",
                                                  **kwargs):
                good = []
                for res in batch:
                    n, doc_id = meta.pop(i)
                    i += 1
                    if hasattr(res, "segments"):
                        good.append((n, doc_id, res))
                    else:
                        where = "" if res.reason.startswith(f"{doc_id}:") else f"{doc_id}: "
                        print(f"headseg: error: {where}{res.reason}", file=sys.stderr)
                        failed += 1
                sink.write_batch(good)
                bar.update(len(batch))
                release_memory()
        ok = True
    finally:
        sink.close(ok=ok and (failed == 0 or not direct))
    return 1 if failed else 0


def _pending(docs, skip) -> Iterator[tuple[int, str, Any]]:
    """Documents not skipped by ``--resume`` (text files are not even read; JSONL records are checked here)."""
    for n, doc_id, text in docs:
        if text is None or skip(n, doc_id):
            continue
        yield n, doc_id, text


def register(sub) -> None:
    p = sub.add_parser("segment", help="split documents into topic segments or sentence-like units",
                       description="Segment text files, folders (recursively), '-' (stdin) or JSONL/Parquet corpora "
                                   "into topic segments (default) or units, streaming: each batch's records are "
                                   "written as soon as they are ready.  Segments tile the input exactly: joining "
                                   "their texts gives the input back.")
    p.add_argument("files", nargs="+", metavar="INPUT",
                   help="text files, folders (*.txt, *.text, *.md, *.ref, *.jsonl, *.parquet inside), JSONL or "
                        "Parquet corpora, or '-' for stdin")
    p.add_argument("--format", choices=("text", "jsonl", "json", "parquet"), default="text",
                   help="output format (parquet needs --out and pyarrow)")
    p.add_argument("--input-format", choices=("auto", "text", "jsonl", "parquet"), default="auto",
                   help="how to read inputs: by suffix (auto: .jsonl, .parquet, else text), or all as one format")
    p.add_argument("--text-field", default="text", help="JSONL/Parquet field holding the text (default text)")
    p.add_argument("--id-field", default="id",
                   help="JSONL/Parquet field holding the document id, written as 'document' (default id; "
                        "without it, FILE:LINE)")
    p.add_argument("--level", choices=LEVELS, default="topic")
    options.add_model(p)
    options.add_profile(p)
    p.add_argument("--backend", choices=("auto", "onnx", "torch"), default="auto",
                   help="auto: the ONNX engine (exported into the cache on first use), torch where it cannot "
                        "serve; onnx: ONNX or an error; torch: the reference path")
    p.add_argument("--artifact", default=None, metavar="DIR",
                   help="serve this exported artifact (from `headseg export --out DIR`)")
    p.add_argument("--precision", choices=("fp32", "fp16", "int8"), default=None,
                   help="ONNX precision (default: int8 on CPU, fp16 on CUDA; fp32 gives exactly the torch path's boundaries)")
    options.add_device(p)
    p.add_argument("--unit-mode", choices=("auto", "rules", "heads"), default="auto",
                   help="units from sentence rules with the heads' block detector for long unpunctuated "
                        "stretches (auto), rules only, or the heads' detector everywhere")
    p.add_argument("--segments", type=int, default=None, metavar="N", help="exactly N segments per document")
    p.add_argument("--min-chars", type=int, default=None, help="avoid segments shorter than this")
    p.add_argument("--max-chars", type=int, default=None, help="hard limit: no segment is longer")
    p.add_argument("--max-tokens", type=int, default=None, help="hard limit in model tokens")
    p.add_argument("--penalty", type=float, default=None,
                   help="weight of the local correlation length in the cost of a new segment (default 0.3; "
                        "higher = fewer segments; docs/segmenter.md)")
    p.add_argument("--batch-size", type=int, default=64, help="model windows per forward pass")
    p.add_argument("--docs-per-batch", type=int, default=DEFAULT_BATCH_DOCS,
                   help=f"documents segmented and written together (default {DEFAULT_BATCH_DOCS}); "
                        "memory is bounded by this, and an interrupted run loses at most one batch")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write here instead of stdout ('-' = stdout); jsonl is appended batch by batch with a "
                        "journal, other formats are written atomically")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted --format jsonl --out FILE run: skip the documents it finished")
    p.add_argument("--threads", type=int, default=None,
                   help="local engine: intra-op threads of the model (default: one per core)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (this process) or ray (Ray Data actors; needs the 'ray' extra)")
    p.add_argument("--address", default=None, help="ray: cluster address (default: start a local Ray)")
    p.add_argument("--workers", type=int, default=None, help="ray: number of segmenter actors (default 1)")
    p.add_argument("--gpus-per-worker", type=float, default=None, help="ray: GPUs per actor (default 0)")
    options.add_input(p)
    options.add_quiet(p)
    p.set_defaults(func=run)
