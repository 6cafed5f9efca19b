"""Where ``headseg segment`` writes: one :class:`Sink` interface for the local and the Ray engine.

The local engine hands a sink each batch of documents with their
segmentations (:meth:`Sink.write_batch`); the Ray engine, whose actors send
back flat record rows, hands it those rows (:meth:`Sink.write_records`).  Both
end with :meth:`Sink.close`, which keeps the output only if the run went well.
What the bytes are is the output format's (:mod:`headseg.formats`); a sink
decides only where they go and when they are durable:

* :class:`StreamSink`: a text format (text, JSON, JSONL) to stdout, appended to
  ``--out``, or to a temporary file renamed over ``--out`` at the end;
* :class:`ParquetSink`: a file format (Parquet, one row group per batch) in a
  temporary file renamed at the end;
* :class:`~.journal.JournalSink`: JSONL appended to ``--out`` with the journal
  that makes ``--resume`` exact.

Which sink a ``--format`` opens is decided in :mod:`.formats`.
"""

from __future__ import annotations

import os
import sys
from typing import Protocol, Sequence

from headseg.analysis.segments import Segmentation
from headseg.analysis.writing import replace_with, temp_beside
from headseg.formats import document_records, get_format

#: one segmented document: its position in the input, its id and its segmentation
Doc = tuple[int, str, Segmentation]

class Sink(Protocol):
    """What both engines write to; every sink takes documents and record rows alike."""

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Write one batch of segmented documents (the local engine)."""

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write flat records, :data:`~headseg.analysis.segments.RECORD_FIELDS` each (the Ray engine's rows)."""

    def close(self, ok: bool = True) -> None:
        """Finish the output; with ``ok`` False, leave no half-written result behind where one can be."""


def report_failed(doc_id: str, reason: str) -> None:
    """The line on stderr for a document that failed, from either engine: ``headseg: error: ID: REASON``
    (the id once when the reason begins with it, as a reading error at ``FILE:LINE`` does)."""
    where = "" if reason.startswith(f"{doc_id}:") else f"{doc_id}: "
    print(f"headseg: error: {where}{reason}", file=sys.stderr)


def batch_records(docs: Sequence[Doc]) -> list[dict]:
    """The flat records of a batch of documents, in order."""
    return document_records(named(docs))


def named(docs: Sequence[Doc]) -> list[tuple[str, Segmentation]]:
    """A batch as the output formats take it: ``(id, segmentation)`` pairs."""
    return [(doc_id, seg) for _, doc_id, seg in docs]


class StreamSink:
    """A text format to a stream (stdout), or to a temporary file renamed over ``--out`` at the end.

    ``direct`` appends to ``--out`` itself as records come (whole lines: the
    Ray engine's JSONL).  ``single`` writes one document without the
    multi-document framing (no ``#####`` headers, no JSON array).
    """

    def __init__(self, fmt: str, single: bool, out: str | None, direct: bool = False):
        self.encoder = get_format(fmt).encoder(single)
        self.out = out
        self.tmp = None
        if out is None:
            self.fh = sys.stdout
        elif direct:
            self.fh = open(out, "w", encoding="utf-8", newline="")
        else:
            fd, self.tmp = temp_beside(out)
            self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
        self.fh.write(self.encoder.opening())

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Write the batch in the sink's format, in one write."""
        self._write(self.encoder.documents(named(docs)))

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write record rows; only a format that holds records (JSONL) takes them."""
        self._write(self.encoder.records(rows))

    def _write(self, text: str) -> None:
        if text:
            self.fh.write(text)
            self.fh.flush()

    def close(self, ok: bool = True) -> None:
        """Close the output (a JSON array's bracket), sync a file, and rename a temporary file over ``--out``
        (removed if not ``ok``)."""
        self.fh.write(self.encoder.closing())
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
    """A file format (``fmt``: Parquet) in a temporary file renamed over ``--out`` at the end."""

    def __init__(self, out: str, fmt: str = "parquet"):
        fd, self.tmp = temp_beside(out)
        os.close(fd)
        self.out = out
        try:
            self.writer = get_format(fmt).writer(self.tmp)
        except BaseException:  # no pyarrow, say: no temporary file left behind
            os.unlink(self.tmp)
            raise

    def write_records(self, rows: Sequence[dict]) -> None:
        """Write the rows as one batch (nothing for no rows)."""
        self.writer.write_records(rows)

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Write the batch's records as one batch."""
        self.writer.write_documents(named(docs))

    def close(self, ok: bool = True) -> None:
        """Finish the file and rename it over ``--out``, or remove it if not ``ok``."""
        self.writer.close()
        if ok:
            replace_with(self.tmp, self.out)
        else:
            os.unlink(self.tmp)
