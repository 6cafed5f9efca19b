"""Where ``headseg segment`` writes: one :class:`Sink` interface for the local and the Ray engine.

The local engine hands a sink each batch of documents with their
segmentations (:meth:`Sink.write_batch`); the Ray engine, whose actors send
back flat record rows, hands it those rows (:meth:`Sink.write_records`).  Both
end with :meth:`Sink.close`, which keeps the output only if the run went well.

* :class:`StreamSink`: text, JSON or JSONL to stdout, appended to ``--out``, or
  to a temporary file renamed over ``--out`` at the end;
* :class:`ParquetSink`: Parquet, one row group per batch, renamed at the end;
* :class:`~.journal.JournalSink`: JSONL appended to ``--out`` with the journal
  that makes ``--resume`` exact.

Which sink a ``--format`` opens is the format registry's (:mod:`.formats`).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from typing import Protocol, Sequence

from headseg.analysis.errors import HeadsegError
from headseg.analysis.writing import replace_with, temp_beside
from headseg.analysis.segments import RECORD_FIELDS, Segmentation

#: one segmented document: its position in the input, its id and its segmentation
Doc = tuple[int, str, Segmentation]


class Sink(Protocol):
    """What both engines write to; every sink takes documents and record rows alike."""

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Write one batch of segmented documents (the local engine)."""

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write flat records, :data:`RECORD_FIELDS` each (the Ray engine's rows)."""

    def close(self, ok: bool = True) -> None:
        """Finish the output; with ``ok`` False, leave no half-written result behind where one can be."""


def report_failed(doc_id: str, reason: str) -> None:
    """The line on stderr for a document that failed, from either engine: ``headseg: error: ID: REASON``
    (the id once when the reason begins with it, as a reading error at ``FILE:LINE`` does)."""
    where = "" if reason.startswith(f"{doc_id}:") else f"{doc_id}: "
    print(f"headseg: error: {where}{reason}", file=sys.stderr)


def records(doc_id: str, seg: Segmentation) -> list[dict]:
    """One flat record per segment: the :meth:`Segmentation.to_dict` schema with the document id in each."""
    return seg.to_records(doc_id)


def batch_records(docs: Sequence[Doc]) -> list[dict]:
    """The flat records of a batch of documents, in order."""
    return [r for _, doc_id, seg in docs for r in records(doc_id, seg)]


def tree_paths(seg: Segmentation) -> list[str]:
    """For a segment tree, each leaf's place in it as "2.1.3" (child numbers from the document down);
    empty for a flat segmentation."""
    if not seg.nodes:
        return []
    inner = seg.inner_ids()
    return [p for p, n in zip(seg.node_paths(), seg.nodes) if n.id not in inner]


def jsonl(rows: Sequence[dict]) -> str:
    """``rows`` as JSON lines (non-ASCII kept as is)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


class StreamSink:
    """Text, JSON or JSONL to a stream (stdout), or to a temporary file renamed over ``--out`` at the end.

    ``direct`` appends to ``--out`` itself as records come (whole lines: the
    Ray engine's JSONL).  ``single`` writes one document without the
    multi-document framing (no ``#####`` headers, no JSON array).
    """

    def __init__(self, fmt: str, single: bool, out: str | None, direct: bool = False):
        self.fmt, self.single, self.out = fmt, single, out
        self.count = 0
        self.tmp = None
        if out is None:
            self.fh = sys.stdout
        elif direct:
            self.fh = open(out, "w", encoding="utf-8", newline="")
        else:
            fd, self.tmp = temp_beside(out)
            self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
        if fmt == "json" and not single:
            self.fh.write("[")

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Write the batch in the sink's format, in one write."""
        if self.fmt == "jsonl":
            self.count += len(docs)
            self.write_records(batch_records(docs))
            return
        parts = []
        for _, doc_id, seg in docs:
            if self.fmt == "json":
                body = json.dumps(seg.to_dict(document=doc_id), indent=2, ensure_ascii=False)
                if self.single:
                    parts.append(body + "\n")
                else:
                    parts.append(("," if self.count else "") + "\n" + textwrap.indent(body, "  "))
            else:
                if not self.single:
                    parts.append(f"##### {doc_id}\n")
                paths = tree_paths(seg)
                for i, s in enumerate(seg):
                    where = f"  node {paths[i]}" if paths else ""
                    parts.append(f"----- segment {i + 1}/{len(seg)}{where}  chars {s.start}-{s.end}  "
                                 f"score {s.score:.3f} -----\n")
                    parts.append(s.text if s.text.endswith("\n") else s.text + "\n")
            self.count += 1
        self._write("".join(parts))

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write record rows as JSON lines; only a JSONL sink holds bare records."""
        if self.fmt != "jsonl":
            raise HeadsegError(f"records are written as jsonl, not {self.fmt}")
        self._write(jsonl(rows))

    def _write(self, text: str) -> None:
        if text:
            self.fh.write(text)
            self.fh.flush()

    def close(self, ok: bool = True) -> None:
        """Close the JSON array, sync a file, and rename a temporary file over ``--out`` (removed if not ``ok``)."""
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
        replace_with(self.tmp, self.out)


class ParquetSink:
    """Records as Parquet (one row group per batch) in a temporary file renamed over ``--out`` at the end."""

    def __init__(self, out: str):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        types = {"document": pa.string(), "score": pa.float64(), "text": pa.string(),
                 "headings": pa.list_(pa.string())}
        self.schema = pa.schema([(f, types.get(f, pa.int64())) for f in RECORD_FIELDS])
        fd, self.tmp = temp_beside(out)
        os.close(fd)
        self.out = out
        self.writer = pq.ParquetWriter(self.tmp, self.schema)

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write the rows as one row group (nothing for no rows)."""
        if rows:
            self.writer.write_table(self.pa.Table.from_pylist(list(rows), schema=self.schema))

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Write the batch's records as one row group."""
        self.write_records(batch_records(docs))

    def close(self, ok: bool = True) -> None:
        """Finish the file and rename it over ``--out``, or remove it if not ``ok``."""
        self.writer.close()
        if ok:
            replace_with(self.tmp, self.out)
        else:
            os.unlink(self.tmp)


