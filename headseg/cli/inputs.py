"""What ``headseg segment`` reads: input paths expanded into sources, and the documents in them, lazily.

Inputs are text files, folders (walked recursively, in sorted order), ``-``
(stdin), JSONL and Parquet corpora, and remote URIs (which only the Ray
engine's reader opens).  Inputs that are missing or unreadable, and text files
whose first bytes show they cannot be read, are found before any model loads
(:func:`check_text_sources`); a document that turns out unreadable later (a
JSONL record, bytes past the first ones) is yielded as an :class:`InputError`
in its place, so it is reported in input order and the others go on.

The readers take the parsed command line (``args``) and read from it
``encoding``, ``max_bytes``, ``text_field`` and ``id_field``.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.reading import check_text_file, read_text
from headseg.segmenter.stream import jsonl_document, not_text
from headseg.segmenter.structure import as_read

#: suffixes read from a folder (a file named explicitly is always read)
TEXT_SUFFIXES = (".txt", ".text", ".md", ".ref")
JSONL_SUFFIXES = (".jsonl",)
PARQUET_SUFFIXES = (".parquet",)


@dataclass(frozen=True)
class Source:
    """One input to read: its path (``"-"`` for stdin, or a remote URI) and how to read it.

    ``stream``: the input can be read only once (stdin, a pipe, a FIFO, process substitution's ``/dev/fd/N``,
    a character device): nothing sniffs or re-reads it; its one reading is the documents' own.
    """

    path: str  # "-" for stdin
    kind: str  # "text", "jsonl" or "parquet"
    stream: bool = False


def is_stream(path: str) -> bool:
    """Whether the input at ``path`` is not a regular file (stdin, a pipe, a FIFO, a device): opening it a
    second time finds nothing (a pipe's bytes are gone) or blocks (a FIFO waits for a new writer)."""
    if path == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


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
            sources.append(Source("-", "text" if input_format == "auto" else input_format, stream=True))
            continue
        if "://" in p:
            # a remote URI (s3://, gs://, ...): the ray engine's reader opens it
            sources.append(Source(p, _kind_of(p, input_format)))
            continue
        path = Path(p)
        if path.is_dir():
            found, refused = [], []
            for root, dirs, files in os.walk(path, onerror=refused.append):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(os.path.join(root, f) for f in sorted(files)
                             if not f.startswith(".") and f.lower().endswith(wanted))
            # a folder that cannot be listed is reported as such, not as an empty one
            missing.extend((exc.filename or p, _why(exc)) for exc in refused)
            if not found and not refused:
                missing.append((p, f"folder has no input files ({', '.join(wanted)})"))
            for f in found:
                if _readable(f, missing):
                    sources.append(Source(f, _kind_of(f, input_format)))
        elif path.exists():
            if _readable(p, missing):
                sources.append(Source(p, _kind_of(p, input_format), stream=is_stream(p)))
        else:
            missing.append((p, "no such file"))
    return sources, missing


def check_text_sources(sources: list[Source], encoding: str, max_bytes: int) -> list[tuple[str, str]]:
    """``(path, reason)`` for each local text file that its size and first bytes show cannot be read
    (:func:`~headseg.analysis.reading.check_text_file`), found before any model loads.  A stream (stdin, a
    pipe, a FIFO) is not sniffed: it can be read once, and that reading is its document's."""
    bad = []
    for src in sources:
        if src.kind != "text" or src.stream or "://" in src.path:
            continue
        try:
            check_text_file(src.path, encoding=encoding, max_bytes=max_bytes)
        except InputError as exc:
            msg = str(exc)
            bad.append((src.path, msg[len(src.path) + 2:] if msg.startswith(f"{src.path}: ") else msg))
    return bad


def _why(exc: OSError) -> str:
    """The reason an input cannot be read, in the words of the other input errors."""
    return "permission denied" if isinstance(exc, PermissionError) else f"cannot read ({exc.strerror or exc})"


def _readable(path: str, missing: list[tuple[str, str]]) -> bool:
    """Whether the file at ``path`` can be opened for reading; if not, ``(path, reason)`` joins ``missing``,
    so an unreadable input is reported before any model is loaded."""
    # access(), not a trial open: opening and closing a pipe (e.g. `<(cmd)`) would break its writer
    if os.access(path, os.R_OK):
        return True
    missing.append((path, "permission denied"))
    return False


def iter_documents(sources: list[Source], args) -> Iterator[tuple[int, str, Any]]:
    """``(position, id, text)`` for every document of every source, lazily.

    ``text`` is an :class:`InputError` for a document that cannot be read (it is
    reported, the others go on).
    """
    n = 0
    for src in sources:
        if src.kind == "text":
            name = "<stdin>" if src.path == "-" else src.path
            try:
                text: Any = read_text(src.path, encoding=args.encoding, max_bytes=args.max_bytes, allow_empty=True)
                text = as_read(src.path, text)  # a .md file is Markdown under --structure auto
            except HeadsegError as exc:
                text = exc
            yield n, name, text
            n += 1
        elif src.kind == "jsonl":
            for doc_id, text in _iter_jsonl(src.path, args):
                yield n, doc_id, text
                n += 1
        else:
            for doc_id, text in parquet_documents(src.path, args.text_field, args.id_field):
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
        for line_no, raw in jsonl_lines(fh, args.max_bytes):
            yield jsonl_document(raw, f"{source}:{line_no}", args.encoding, args.max_bytes, args.text_field,
                                 args.id_field)
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def jsonl_lines(fh, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` of the non-blank lines of a binary stream, numbered from 1; the line is None
    when it is over ``max_bytes`` (skipped unread).  Both engines read JSONL corpora with it."""
    for line_no, raw in enumerate(_bounded_lines(fh, max_bytes), start=1):
        if raw is None or raw.strip():
            yield line_no, raw


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


def parquet_documents(path: str, text_field: str, id_field: str, name: str | None = None,
                      batch_rows: int = 1024) -> Iterator[tuple[str, Any]]:
    """``(id, text)`` of every row of the Parquet file at ``path`` (a local path, or a URI pyarrow opens),
    read ``batch_rows`` rows at a time (memory is bounded by the batch, not the file).

    ``name`` (default ``path``) names the file: a record without an id (a null, or no ``id_field``
    column) is ``NAME:ROW`` (rows counted from 0), an unreadable file or one without ``text_field`` is a
    single ``(NAME, InputError)``.  ``text`` is an :class:`InputError` for a record whose text is not a string.
    The one reading of a Parquet corpus: the local engine and the Ray engine's reading tasks both use it,
    so both give every record the same id and text (and every bad record the same error).
    """
    import pyarrow.parquet as pq

    name = path if name is None else name
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        yield name, InputError(f"not a readable Parquet file ({exc})")
        return
    names = pf.schema_arrow.names
    if text_field not in names:
        yield name, InputError(f"Parquet file has no column '{text_field}'")
        return
    cols = [text_field] + ([id_field] if id_field in names else [])
    row = 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=cols):
        texts = batch.column(text_field).to_pylist()
        ids = batch.column(id_field).to_pylist() if id_field in names else [None] * len(texts)
        for doc_id, text in zip(ids, texts):
            where = f"{name}:{row}"
            row += 1
            if not isinstance(text, str):
                text = not_text(text, text_field)
            yield (where if doc_id is None else str(doc_id)), text
