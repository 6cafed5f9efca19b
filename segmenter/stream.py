"""Streaming: documents of any iterable in, one result per document out, in order, in bounded batches.

:meth:`~headseg.Segmenter.iter_segment` reads at most one batch
ahead (``batch_docs`` documents, or fewer once they hold ``batch_chars``
characters) and segments it with ``segment_many``; memory is bounded by the
batch, not the corpus.  A document that fails is isolated: the batch is run
again one document at a time, so only that document becomes a
:class:`DocumentError`.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from headseg.analysis.errors import HeadsegError, InputError, first_line, is_integer, shown
from headseg.analysis.reading import decode_text
from headseg.analysis.segments import Segmentation

from .structure import text_of

#: :meth:`Segmenter.iter_segment` batches: at most this many documents ...
DEFAULT_BATCH_DOCS = 32
#: ... and about this many characters (a longer document is a batch of its own)
DEFAULT_BATCH_CHARS = 1_000_000

Batch = list[tuple[int, "str | None", Any]]


@dataclass(frozen=True)
class DocumentError:
    """A document of :meth:`Segmenter.iter_segment` that could not be segmented (``errors="yield"``)."""

    #: position in the input (0-based)
    index: int
    #: the record's id, or None for a plain text without one
    document: str | None
    #: one line saying why
    reason: str
    #: the exception itself
    error: BaseException | None = None


def check_batch_sizes(batch_docs: Any, batch_chars: Any) -> None:
    """Both batch limits are positive integers (raises :class:`HeadsegError`)."""
    if any(not is_integer(n) or n < 1 for n in (batch_docs, batch_chars)):
        raise HeadsegError(f"batch_docs and batch_chars must be positive integers (got {shown(batch_docs)}, "
                           f"{shown(batch_chars)})")


def iter_batches(items: Iterable[Any], text_field: str, id_field: str, batch_docs: int,
                 batch_chars: int) -> Iterator[Batch]:
    """Batches of ``(index, id, text)`` read from ``items``; ``text`` is an :class:`InputError`
    (or the reader's own exception) for an unusable item."""
    check_batch_sizes(batch_docs, batch_chars)
    batch: Batch = []
    size = 0
    reader = iter(items)
    for index in itertools.count():
        try:
            item = next(reader)
        except StopIteration:
            break
        except Exception:
            # ``items`` itself failed (a reader's I/O error): the documents it gave before are still
            # segmented and handed out, then its error is raised where the next document would be.
            if batch:
                yield batch
            raise
        doc_id, text = document_of(item, text_field, id_field)
        batch.append((index, doc_id, text))
        size += len(text_of(text) or "")
        if len(batch) >= batch_docs or size >= batch_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def segment_batch(segment_many: Callable[[Sequence[str]], list[Segmentation]],
                  batch: Batch) -> list[Segmentation | DocumentError]:
    """One result per ``(index, id, text)`` of ``batch``: its segmentation (with ``meta["document"]``
    set to the id) or a :class:`DocumentError`; one failing document does not spoil the others."""
    results: list[Segmentation | DocumentError | None] = [None] * len(batch)
    # a SourceText is a text: the pipeline unwraps it, reading its hint
    good = [i for i, (_, _, text) in enumerate(batch) if text_of(text) is not None]
    for i, (index, doc_id, text) in enumerate(batch):
        if text_of(text) is None:
            results[i] = DocumentError(index, doc_id, str(text), text)
    try:
        done = segment_many([batch[i][2] for i in good])
    except Exception:  # noqa: BLE001 - isolate the failing document(s) below
        done = None
    if done is None:
        # One document spoilt the batch: run them one by one so that only it fails.
        done = []
        for i in good:
            index, doc_id, text = batch[i]
            try:
                done.append(segment_many([text])[0])
            except Exception as exc:  # noqa: BLE001 - reported per document, the rest go on
                done.append(DocumentError(index, doc_id, _reason(exc), exc))
    for i, res in zip(good, done):
        if isinstance(res, Segmentation) and batch[i][1] is not None:
            res.meta["document"] = batch[i][1]
        results[i] = res
    return results  # type: ignore[return-value]


def iterable_of(items: Any, what: str, lazy: bool = False) -> Any:
    """``items`` as a list (``lazy``: as given), after checking that it is an iterable and not one text:
    a str is iterable, and each of its characters would become a document.  Raises :class:`InputError`
    saying ``what`` (the items themselves are checked one by one later)."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InputError(f"{what} (got {type(items).__name__}; one text: segment())")
    if isinstance(items, Mapping):
        # iterating a mapping gives its keys: one record would become a document per field name
        raise InputError(f"{what} (got {type(items).__name__}; one record: put it in a list)")
    return items if lazy else list(items)


def check_errors(errors: str) -> None:
    """Raise unless ``errors`` is ``"raise"`` or ``"yield"``."""
    if errors not in ("raise", "yield"):
        raise HeadsegError(f"errors must be 'raise' or 'yield' (got '{errors}')")


def checked(results: list, errors: str) -> Iterator[list]:
    """The batch, or with ``errors="raise"`` the results before its first failure and then that error."""
    if errors == "raise":
        for j, res in enumerate(results):
            if isinstance(res, DocumentError):
                if j:
                    yield results[:j]
                raise res.error if isinstance(res.error, Exception) else HeadsegError(res.reason)
    yield results


def _reason(exc: BaseException) -> str:
    """One line for a failed document: the message of a headseg error, else the exception's type and message."""
    msg = first_line(exc, 500)
    return msg if isinstance(exc, HeadsegError) or msg == type(exc).__name__ else f"{type(exc).__name__}: {msg}"


def not_text(value: Any, field: str) -> InputError:
    """The error of a record whose text ``field`` holds ``value``, not a string (None: the field is missing)."""
    what = "missing" if value is None else f"of type {type(value).__name__}, not a string"
    return InputError(f"field '{field}' is {what}")


def document_of(item: Any, text_field: str, id_field: str) -> tuple[str | None, Any]:
    """``(id, text)`` of one input item; ``text`` is an :class:`InputError` when the item is unusable."""
    if text_of(item) is not None:
        return None, item  # a str, or a SourceText whose hint goes on to the pipeline
    if isinstance(item, Exception):
        # a reader's error for this document (e.g. unreadable file) passes through in its place
        return None, item
    if isinstance(item, Mapping):
        doc_id = item.get(id_field)
        doc_id = None if doc_id is None else str(doc_id)
        text = item.get(text_field)
        if not isinstance(text, str):
            return doc_id, not_text(text, text_field)
        return doc_id, text
    if isinstance(item, tuple) and len(item) == 2 and text_of(item[1]) is not None:
        return (None if item[0] is None else str(item[0])), item[1]
    return None, InputError(f"expected a text, a record or an (id, text) pair, got {type(item).__name__}")


def jsonl_document(raw: bytes | None, where: str, encoding: str, max_bytes: int, text_field: str,
                   id_field: str) -> tuple[str, Any]:
    """``(id, text)`` of one non-blank line of a JSONL corpus, found at ``where`` (``FILE:LINE``, also the id
    of a record without one); ``text`` is an :class:`InputError` for a line that is no usable record.
    ``raw`` is None for a line over ``max_bytes`` (skipped unread).

    The one reading of a JSONL line: the local engine and the Ray engine's actors both parse with it, so
    both give every record the same id and text (and every bad line the same error).
    """
    if raw is None:
        return where, InputError(f"line is over the limit of {max_bytes:,} bytes (raise it with --max-bytes)")
    try:
        obj = json.loads(decode_text(raw, where, encoding))
    except HeadsegError as exc:
        return where, exc
    except ValueError as exc:
        return where, InputError(f"not valid JSON ({getattr(exc, 'msg', exc)})")
    if not isinstance(obj, dict):
        return where, InputError("a JSONL record must be a JSON object")
    doc_id, text = document_of(obj, text_field, id_field)
    return (where if doc_id is None else doc_id), text
