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

import hashlib
import json
import os
import re
import sys
import textwrap
from typing import Protocol, Sequence

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.outputs import check_output_path
from headseg.analysis.reading import read_start
from headseg.analysis.writing import replace_with, temp_beside
from headseg.analysis.segments import RECORD_FIELDS, Segmentation

from .inputs import Source

#: the journal's format; a journal of another version is refused by ``--resume``
#: (2: each entry carries the digest of its document's text)
JOURNAL_VERSION = 2

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


def jsonl(rows: Sequence[dict]) -> str:
    """``rows`` as JSON lines (non-ASCII kept as is)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def document_digest(text: str) -> str:
    """The digest a journal keeps of a document's text, so ``--resume`` can tell that it changed."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


#: how each output format of ``headseg segment`` begins (JSON: an array of records, or one record)
_TEXT_START = re.compile(rb"(##### |----- segment 1/)")
_JSON_START = re.compile(rb'\s*(\[\s*(\]|\{\s*"document":)|\{\s*"document":)')


def is_segment_output(path: str | os.PathLike, fmt: str | None = None) -> bool:
    """Whether the file at ``path`` is an output of ``headseg segment`` (in ``fmt``, or in any format).

    Told from how it begins: text output opens with a ``#####`` document header or
    the first segment's ``-----`` line, JSON with an array of records or one
    record (``"document"`` first), JSONL with a record whose fields are exactly
    :data:`RECORD_FIELDS` in order, Parquet with the ``PAR1`` mark and those
    columns.  A user's file could imitate one; no user's file is one by accident.
    """
    head = read_start(path)
    if fmt in (None, "parquet") and head.startswith(b"PAR1"):
        try:
            import pyarrow.parquet as pq

            return tuple(pq.read_schema(path).names) == RECORD_FIELDS
        except Exception:  # noqa: BLE001 - unreadable, or no pyarrow: not ours to overwrite
            return False
    if fmt in (None, "jsonl"):
        try:
            first = json.loads(head.split(b"\n", 1)[0])
            if isinstance(first, dict) and tuple(first) == RECORD_FIELDS:
                return True
        except ValueError:
            pass
    if fmt in (None, "json") and _JSON_START.match(head):
        return True
    return fmt in (None, "text") and _TEXT_START.match(head) is not None


def check_output(out: str, sources: list[Source], direct: bool, force: bool = False) -> None:
    """Refuse, before any work, an output that is an input (same file, hard link, symlink), cannot be written,
    or is an existing file that headseg did not write (unless ``force``)."""
    check_output_path(out, [s.path for s in sources if s.path != "-" and "://" not in s.path],
                      ours=is_segment_output, force=force)
    if direct and os.path.exists(out) and not os.access(out, os.W_OK):
        raise InputError(f"--out {out}: permission denied")


def journal_path(out: str) -> str:
    """The journal that makes ``--resume`` of the JSONL output ``out`` exact: ``OUT.journal`` beside it."""
    return out + ".journal"


def is_journal(path: str | os.PathLike) -> bool:
    """Whether the file at ``path`` begins with a journal header that headseg wrote (of any version)."""
    try:
        head = json.loads(read_start(path).split(b"\n", 1)[0])
    except ValueError:
        return False
    return isinstance(head, dict) and "headseg_segment_journal" in head


def check_journal(out: str, force: bool = False) -> None:
    """Refuse, before any work, a journal path of ``out`` that headseg would clobber: a symbolic link or other
    non-file (never written through), or a file headseg did not write (unless ``force``)."""
    journal = journal_path(out)
    if not os.path.lexists(journal):
        return
    if os.path.islink(journal) or not os.path.isfile(journal):
        raise InputError(f"--out {out}: its journal {journal} exists and is not a regular file; "
                         "remove it or pick another output")
    if not force and os.path.getsize(journal) > 0 and not is_journal(journal):
        raise InputError(f"--out {out}: {journal} exists and is not a headseg journal; refusing to overwrite it "
                         "(pass --force to replace it)")


def check_journal_end(out: str, end: int) -> None:
    """Refuse to resume into ``out`` when it is shorter than the ``end`` its journal records (it was changed)."""
    size = os.path.getsize(out) if os.path.exists(out) else 0
    if size < end:
        raise InputError(f"--out {out}: {size:,} bytes, shorter than the {end:,} its journal records; "
                         "it was changed since: run again without --resume")


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
        replace_with(self.tmp, self.out)


class ParquetSink:
    """Records as Parquet (one row group per batch) in a temporary file renamed over ``--out`` at the end."""

    def __init__(self, out: str):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        types = {"document": pa.string(), "score": pa.float64(), "text": pa.string()}
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


def read_journal(journal: str, settings: dict) -> tuple[dict[int, tuple[str, str]], int, int]:
    """``(done, end, valid)``: finished documents by input position (their id and text digest), the output
    size they fill, and the journal's length in bytes up to its last whole entry.  Refuses other settings
    than ``settings``."""
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
    done: dict[int, tuple[str, str]] = {}
    end, valid = 0, len(lines[0]) + 1
    # the last line may be torn by a kill: only whole, valid lines count
    for raw in lines[1:-1]:
        try:
            entry = json.loads(raw)
            n, doc, e, digest = int(entry["n"]), str(entry["document"]), int(entry["end"]), str(entry["digest"])
        except (ValueError, KeyError, TypeError):
            break
        done[n] = (doc, digest)
        end = max(end, e)
        valid += len(raw) + 1
    return done, end, valid


class JournalSink:
    """JSONL appended to ``--out`` batch by batch, with the journal that makes ``--resume`` exact.

    ``done`` holds the documents an interrupted run finished (input position ->
    (id, digest of the text)), read from the journal when resuming; they are skipped.
    """

    def __init__(self, out: str, settings: dict, resume: bool):
        self.out = out
        self.journal = journal_path(out)
        self.done: dict[int, tuple[str, str]] = {}
        # the journal is headseg's own file: never written through a link planted in its place
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        if resume and os.path.exists(self.journal):
            self.done, end, journal_valid = read_journal(self.journal, settings)
            check_journal_end(out, end)
            # O_CREAT: a run killed before its first batch left a journal and perhaps no output yet
            self.fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            # whatever a killed run wrote after its last finished batch is dropped
            os.ftruncate(self.fd, end)
            self.jfd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | nofollow)
            os.ftruncate(self.jfd, journal_valid)
        else:
            self.jfd = os.open(self.journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | nofollow, 0o666)
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
        self._append(self.jfd, "".join(json.dumps({"n": n, "document": doc_id, "digest": document_digest(seg.text),
                                                   "end": end}, ensure_ascii=False) + "\n"
                                       for n, doc_id, seg in docs))
        os.fsync(self.jfd)

    def close(self, ok: bool = True) -> None:
        """Close both files; with ``ok`` (every document done) the journal is removed."""
        os.close(self.fd)
        os.close(self.jfd)
        if ok:
            os.unlink(self.journal)
