"""Where ``headseg segment`` writes: one :class:`Sink` interface for the local and the Ray engine.

The local engine hands a sink each batch of documents with their
segmentations (:meth:`Sink.write_batch`); the Ray engine, whose actors send
back flat record rows, hands it those rows (:meth:`Sink.write_records`).  Both
end with :meth:`Sink.close`, which keeps the output only if the run went well.

* :class:`StreamSink`: text, JSON or JSONL to stdout, appended to ``--out``, or
  to a temporary file renamed over ``--out`` at the end;
* :class:`ParquetSink`: Parquet, one row group per batch, renamed at the end;
* :class:`JournalSink`: JSONL appended to ``--out`` with the journal that makes
  ``--resume`` exact (:func:`read_journal` reads it back).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Protocol, Sequence

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.io import check_output_path
from headseg.analysis.segments import RECORD_FIELDS, Segmentation

from .inputs import Source

#: the journal's format; a journal of another version is refused by ``--resume``
JOURNAL_VERSION = 1

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


def records(doc_id: str, seg: Segmentation) -> list[dict]:
    """One flat record per segment: the :meth:`Segmentation.to_dict` schema with the document id in each."""
    return seg.to_records(doc_id)


def batch_records(docs: Sequence[Doc]) -> list[dict]:
    """The flat records of a batch of documents, in order."""
    return [r for _, doc_id, seg in docs for r in records(doc_id, seg)]


def jsonl(rows: Sequence[dict]) -> str:
    """``rows`` as JSON lines (non-ASCII kept as is)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def check_output(out: str, sources: list[Source], direct: bool) -> None:
    """Refuse an output that is an input (same file, hard link, symlink) or cannot be written, before any work."""
    check_output_path(out, [s.path for s in sources if s.path != "-" and "://" not in s.path])
    if direct and os.path.exists(out) and not os.access(out, os.W_OK):
        raise InputError(f"--out {out}: permission denied")


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
            p = Path(out)
            fd, self.tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
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
                for i, s in enumerate(seg):
                    parts.append(f"----- segment {i + 1}/{len(seg)}  chars {s.start}-{s.end}  score {s.score:.3f} -----\n")
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
    """JSONL appended to ``--out`` batch by batch, with the journal that makes ``--resume`` exact.

    ``done`` holds the documents an interrupted run finished (input position ->
    id), read from the journal when resuming; they are skipped.
    """

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

    def write_records(self, rows: Sequence[dict]) -> None:
        """Append the rows to ``--out`` and make them durable; not journaled, so ``--resume`` drops them."""
        self._append(self.fd, jsonl(rows))
        os.fsync(self.fd)

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Append the batch's records, then journal its documents once the records are durable."""
        self.write_records(batch_records(docs))
        end = os.lseek(self.fd, 0, os.SEEK_END)
        self._append(self.jfd, "".join(json.dumps({"n": n, "document": doc_id, "end": end}, ensure_ascii=False) + "\n"
                                       for n, doc_id, _ in docs))
        os.fsync(self.jfd)

    def close(self, ok: bool = True) -> None:
        """Close both files; with ``ok`` (every document done) the journal is removed."""
        os.close(self.fd)
        os.close(self.jfd)
        if ok:
            os.unlink(self.journal)
