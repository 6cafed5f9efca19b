"""The journal of a JSONL ``--out``: what makes ``headseg segment --resume`` exact.

:class:`JournalSink` appends an appendable format's bytes (JSONL: whole lines, written by the format's
own encoder, :mod:`headseg.formats`) to ``--out`` batch by batch and keeps
``OUT.journal`` beside it: its first line records the run's settings, then one
line per finished document (its position in the input, its id, a digest of its
text, and the output's size after it), written and synced only after the
batch's records are durable.  :func:`read_journal` reads it back for
``--resume``, refusing other settings.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Sequence

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.reading import read_start
from headseg.formats import get_format, json_line

from .sinks import Doc, named

#: the journal's format; a journal of another version is refused by ``--resume``
#: (2: each entry carries the digest of its document's text)
JOURNAL_VERSION = 2


def document_digest(text: str) -> str:
    """The digest a journal keeps of a document's text, so ``--resume`` can tell that it changed."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


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
    """The appendable format ``fmt`` (JSONL) appended to ``--out`` batch by batch, with the journal that
    makes ``--resume`` exact.

    ``done`` holds the documents an interrupted run finished (input position ->
    (id, digest of the text)), read from the journal when resuming; they are skipped.
    """

    def __init__(self, out: str, settings: dict, resume: bool, fmt: str = "jsonl"):
        f = get_format(fmt)
        if not f.appendable:
            # a resumed output is cut back to a journaled size and appended to: only whole records may end it
            raise HeadsegError(f"a journaled output needs an appendable format (got {f.name})")
        self.encoder = f.encoder(False)
        self.out = out
        self.journal = journal_path(out)
        self.done: dict[int, tuple[str, str]] = {}
        # the journal is headseg's own file: never written through a link planted in its place
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        self._cut: tuple[int, int] | None = None
        if resume and os.path.exists(self.journal):
            self.done, end, journal_valid = read_journal(self.journal, settings)
            check_journal_end(out, end)
            # Nothing is touched before the first write: a resume refused on the way (a document of
            # standard input that changed, found as it is read) leaves the output and its journal as they were.
            self._cut = (end, journal_valid)
            self.fd = self.jfd = -1
        else:
            self.jfd = os.open(self.journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | nofollow, 0o666)
            self._append(self.jfd, json.dumps({"headseg_segment_journal": JOURNAL_VERSION, "settings": settings},
                                              sort_keys=True) + "\n")
            os.fsync(self.jfd)
            self.fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o666)
            os.fsync(self.fd)

    def _resume_files(self) -> None:
        """Open a resumed output and journal, dropping whatever a killed run wrote after its last finished batch."""
        if self._cut is None:
            return
        end, journal_valid = self._cut
        self._cut = None
        # O_CREAT: a run killed before its first batch left a journal and perhaps no output yet
        self.fd = os.open(self.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        os.ftruncate(self.fd, end)
        self.jfd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
        os.ftruncate(self.jfd, journal_valid)

    @staticmethod
    def _append(fd: int, text: str) -> None:
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]

    def write_records(self, rows: Sequence[dict]) -> None:
        """Append the rows to ``--out`` and make them durable; not journaled, so ``--resume`` drops them."""
        self._resume_files()
        self._append(self.fd, self.encoder.records(rows))
        os.fsync(self.fd)

    def write_batch(self, docs: Sequence[Doc]) -> None:
        """Append the batch in the format, then journal its documents once its bytes are durable."""
        self._resume_files()
        self._append(self.fd, self.encoder.documents(named(docs)))
        os.fsync(self.fd)
        end = os.lseek(self.fd, 0, os.SEEK_END)
        self._append(self.jfd, "".join(json_line({"n": n, "document": doc_id, "digest": document_digest(seg.text),
                                                  "end": end}) for n, doc_id, seg in docs))
        os.fsync(self.jfd)

    def close(self, ok: bool = True) -> None:
        """Close both files; with ``ok`` (every document done) the journal is removed.  A resumed run that
        wrote nothing and did not finish leaves both files untouched."""
        if self._cut is not None and not ok:
            return
        self._resume_files()
        os.close(self.fd)
        os.close(self.jfd)
        if ok:
            os.unlink(self.journal)
