"""Output formats: segmentations written as text, JSON, JSONL or Parquet, each format registered by name.

Every format writes the one record schema (:data:`~headseg.analysis.segments.RECORD_SCHEMA`,
built by :meth:`Segmentation.to_records` and :meth:`Segmentation.to_dict`), so the
command line's sinks, the Ray engine, the service and a program write the same
bytes for the same segmentation.  A format is either

* a *text* format: an :class:`Encoder` that turns batches of documents into text
  (with an opening and a closing, e.g. a JSON array's brackets), written to any
  stream; or
* a *file* format: a :class:`FileWriter` on a path (Parquet: one row group per batch).

Each registers itself with :func:`register_format`, with a recogniser that tells
its own files from a user's (so an existing output is replaced only when headseg
wrote it) and what it holds (``records``: flat records, so record rows from the Ray
engine can be written; ``appendable``: whole lines, one record each, so a file of it
can be appended to batch by batch).  ``headseg segment --format`` and its checks
read the registry, so a new format is one registration here.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from headseg.analysis.errors import HeadsegError, InputError, shown
from headseg.analysis.reading import read_start
from headseg.analysis.registry import Registry
from headseg.analysis.segments import RECORD_FIELDS, RECORD_SCHEMA, Segmentation

#: one document to write: its id and its segmentation
Segmented = tuple[str, Segmentation]


def json_line(record: Any) -> str:
    """``record`` as one JSON line (non-ASCII kept as is): JSONL's lines and the service's NDJSON."""
    return json.dumps(record, ensure_ascii=False) + "\n"


def json_lines(rows: Sequence[dict]) -> str:
    """``rows`` as JSON lines."""
    return "".join(json_line(r) for r in rows)


def document_records(docs: Sequence[Segmented]) -> list[dict]:
    """The flat records of ``docs``, in order (:meth:`Segmentation.to_records`, the id in each)."""
    return [r for doc_id, seg in docs for r in seg.to_records(doc_id)]


def failure_record(document: str, reason: str) -> dict:
    """What stands for a document that could not be segmented where a stream goes on: its id and why."""
    return {"document": document, "error": reason}


def blank_record(document: str) -> dict:
    """A record of the schema's types holding nothing but ``document`` (a failed document's row among good
    ones, where a column must keep its type: the Ray engine's batches)."""
    blanks: dict[type, Callable[[], Any]] = {str: str, int: lambda: -1, float: float, list: list}
    return {f.name: None if f.optional else blanks[f.type]() for f in RECORD_SCHEMA} | {"document": document}


def tree_paths(seg: Segmentation) -> list[str]:
    """For a segment tree, each leaf's place in it as "2.1.3" (child numbers from the document down);
    empty for a flat segmentation."""
    if not seg.nodes:
        return []
    inner = seg.inner_ids()
    return [p for p, n in zip(seg.node_paths(), seg.nodes) if n.id not in inner]


#: how the text and JSON outputs begin (JSON: an array of records, or one record)
_TEXT_START = re.compile(rb"(##### |----- segment 1/)")
_JSON_START = re.compile(rb'\s*(\[\s*(\]|\{\s*"document":)|\{\s*"document":)')

def _without(*names: str) -> tuple[str, ...]:
    return tuple(f for f in RECORD_FIELDS if f not in names)


#: the record layouts headseg has written: today's, without ``confidence`` (issue 48) or ``overlap_chars``
#: (issue 49) or both, the one before the tree's ``id``/``parent``/``depth`` (issue 36), and the one
#: before ``headings`` (issue 34)
_BEFORE_48 = _without("confidence", "overlap_chars")
_OUR_FIELDS = (RECORD_FIELDS, _without("confidence"), _without("overlap_chars"), _BEFORE_48, _BEFORE_48[:8],
               _BEFORE_48[:7])


def _text_output(path, head: bytes) -> bool:
    return _TEXT_START.match(head) is not None


def _json_output(path, head: bytes) -> bool:
    return _JSON_START.match(head) is not None


def _jsonl_output(path, head: bytes) -> bool:
    try:
        first = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        return False
    return isinstance(first, dict) and tuple(first) in _OUR_FIELDS


def _parquet_output(path, head: bytes) -> bool:
    if not head.startswith(b"PAR1"):
        return False
    try:
        import pyarrow.parquet as pq

        return tuple(pq.read_schema(path).names) in _OUR_FIELDS
    except Exception:  # noqa: BLE001 - unreadable, or no pyarrow: not ours to overwrite
        return False


@dataclass(frozen=True)
class OutputFormat:
    """One registered output format: a text format (``encoder``) or a file format (``writer``)."""

    name: str
    help: str
    #: ``(path, first bytes) -> bool``: whether the file is an output headseg wrote in this format
    recognise: Callable[[str | os.PathLike, bytes], bool]
    #: a text format's ``single -> Encoder``; None for a file format
    encoder: Callable[[bool], Encoder] | None = None
    #: a file format's ``path -> FileWriter``; None for a text format
    writer: Callable[[str], FileWriter] | None = None
    #: holds flat records: record rows (the Ray engine's) can be written to it
    records: bool = False
    #: whole lines, one record each: a file of it can be appended to batch by batch
    appendable: bool = False

    @property
    def needs_file(self) -> bool:
        """Written to a path, never to a stream."""
        return self.writer is not None


#: the output formats by name, in the order users see (``text`` first: the default)
FORMATS: Registry[OutputFormat] = Registry("output format", error=InputError)


def register_format(name: str, help: str, *, recognise: Callable[[str | os.PathLike, bytes], bool],
                    file: bool = False, records: bool = False, appendable: bool = False) -> Callable[[type], type]:
    """Class decorator: register the decorated :class:`Encoder` subclass (a text format), or with ``file``
    the decorated :class:`FileWriter` class (a file format), as output format ``name``.  Refuses a name taken."""
    if not isinstance(name, str) or not name.isidentifier():
        raise HeadsegError(f"a format name must be an identifier (got {shown(name)})")
    if file and appendable:
        raise HeadsegError(f"format '{name}': a file format is not appended to")
    def entry(cls: type) -> OutputFormat:
        if not file:
            cls.name = name  # type: ignore[attr-defined]  - its messages name the format
        return OutputFormat(name, help, recognise, None if file else cls, cls if file else None, records, appendable)

    return FORMATS.register(name, entry)


class Encoder:
    """A text format's writer for one output: :meth:`opening`, :meth:`documents` batch by batch,
    :meth:`closing`.  ``single``: the output holds one document and no multi-document framing."""

    name = "encoder"

    def __init__(self, single: bool = False):
        self.single = single

    def opening(self) -> str:
        """What the output begins with."""
        return ""

    def documents(self, docs: Sequence[Segmented]) -> str:
        """The text of one batch of documents."""
        raise NotImplementedError

    def records(self, rows: Sequence[dict]) -> str:
        """The text of flat record rows (formats that hold records only)."""
        raise HeadsegError(f"records are written as jsonl, not {self.name}")

    def closing(self) -> str:
        """What the output ends with."""
        return ""


@register_format("text", "segments between '-----' lines, '#####' per document", recognise=_text_output)
class TextEncoder(Encoder):
    """Segments (or overlapped chunks) between ``-----`` lines (with offsets, score, confidence and a tree leaf's place),
    ``#####`` per document."""

    def documents(self, docs: Sequence[Segmented]) -> str:
        parts = []
        for doc_id, seg in docs:
            if not self.single:
                parts.append(f"##### {doc_id}\n")
            paths = tree_paths(seg)
            # with overlapped chunks, the chunks stand for the segments, as in the records
            for i, s in enumerate(seg.chunks or seg.segments):
                where = f"  node {paths[i]}" if paths else ""
                repeated = f"  overlap {seg[i].start - s.start} chars" if seg.chunks else ""
                sure = seg[i].confidence  # of the boundary opening it (None: the text's start, untested)
                sure = "" if sure is None else f"  confidence {sure:.3f}"
                parts.append(f"----- segment {i + 1}/{len(seg)}{where}  chars {s.start}-{s.end}  "
                             f"score {s.score:.3f}{sure}{repeated} -----\n")
                parts.append(s.text if s.text.endswith("\n") else s.text + "\n")
        return "".join(parts)


@register_format("jsonl", "one record per segment (per tree node with --level tree); with --out appended batch by "
                         "batch with a journal (--resume)", recognise=_jsonl_output, records=True, appendable=True)
class JsonlEncoder(Encoder):
    """One flat record per segment (per tree node) per line."""

    def documents(self, docs: Sequence[Segmented]) -> str:
        return json_lines(document_records(docs))

    def records(self, rows: Sequence[dict]) -> str:
        return json_lines(rows)


@register_format("json", "one record per document (an array of them for several)", recognise=_json_output)
class JsonEncoder(Encoder):
    """One :meth:`Segmentation.to_dict` record per document, indented; an array of them unless ``single``."""

    def __init__(self, single: bool = False):
        super().__init__(single)
        #: documents in the array so far: the first has no comma before it, an empty array no line break
        self.count = 0

    def opening(self) -> str:
        return "" if self.single else "["

    def documents(self, docs: Sequence[Segmented]) -> str:
        parts = []
        for doc_id, seg in docs:
            body = json.dumps(seg.to_dict(document=doc_id), indent=2, ensure_ascii=False)
            if self.single:
                parts.append(body + "\n")
            else:
                parts.append(("," if self.count else "") + "\n" + textwrap.indent(body, "  "))
            self.count += 1
        return "".join(parts)

    def closing(self) -> str:
        if self.single:
            return ""
        return "\n]\n" if self.count else "]\n"


class FileWriter(Protocol):
    """A file format's writer on one path: batches of documents or of record rows, then :meth:`close`."""

    def write_documents(self, docs: Sequence[Segmented]) -> None:
        """Write one batch of documents."""

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write one batch of flat records (:data:`RECORD_FIELDS` each)."""

    def close(self) -> None:
        """Finish the file."""


def arrow_schema():
    """The record schema as a pyarrow schema (the Parquet columns, in record order)."""
    import pyarrow as pa

    types = {str: pa.string(), int: pa.int64(), float: pa.float64(), list: pa.list_(pa.string())}
    return pa.schema([(f.name, types[f.type]) for f in RECORD_SCHEMA])


@register_format("parquet", "one row per segment or tree node (needs --out and pyarrow)", recognise=_parquet_output,
                 file=True, records=True)
class ParquetWriter:
    """Records as Parquet at ``path``, one row group per batch (needs pyarrow)."""

    def __init__(self, path: str | os.PathLike):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._table = pa.Table.from_pylist
        self.schema = arrow_schema()
        self.writer = pq.ParquetWriter(path, self.schema)

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write the rows as one row group (nothing for no rows)."""
        if rows:
            self.writer.write_table(self._table(list(rows), schema=self.schema))

    def write_documents(self, docs: Sequence[Segmented]) -> None:
        """Write the batch's records as one row group."""
        self.write_records(document_records(docs))

    def close(self) -> None:
        """Finish the file (its footer)."""
        self.writer.close()


def get_format(name: str) -> OutputFormat:
    """The registered format ``name`` (:class:`InputError` naming the choices)."""
    return FORMATS.get(name)


def dumps(fmt: str, docs: Sequence[Segmented], single: bool = False) -> str:
    """``docs`` as the whole text of an output in the text format ``fmt`` (as ``headseg segment`` writes it)."""
    encoder = _encoder(fmt, single)
    return encoder.opening() + encoder.documents(docs) + encoder.closing()


def write(fmt: str, docs: Sequence[Segmented], path: str | os.PathLike, single: bool = False) -> None:
    """Write ``docs`` to ``path`` in ``fmt`` (a text or a file format), replacing what was there."""
    f = get_format(fmt)
    if f.writer is None:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(dumps(fmt, docs, single))
        return
    out = f.writer(os.fspath(path))
    out.write_documents(docs)
    out.close()


def read_records(path: str | os.PathLike) -> list[dict]:
    """The flat records of a JSONL or Parquet output (``appendable`` lines, or Parquet rows)."""
    if read_start(path).startswith(b"PAR1"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _encoder(fmt: str, single: bool) -> Encoder:
    f = get_format(fmt)
    if f.encoder is None:
        raise InputError(f"format {fmt} is written to a file, not as text")
    return f.encoder(single)
