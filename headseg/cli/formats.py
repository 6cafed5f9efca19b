"""The output formats of ``headseg segment``, registered by name: how each is written and recognised.

Each format registers itself here with :func:`register_format`, as backends and
levels do: its sink factory (one for the local and the Ray engine), a
recogniser that tells its own files from a user's (so an existing output is
replaced only when headseg wrote it), and what it supports (``needs_file``:
only with ``--out``; ``records``: written from flat record rows, so the Ray
engine can write it; ``journaled``: appended with a journal, so ``--resume``
works).  ``--format``'s choices and help, the engine checks and the output
checks read the registry, so a new format is one registration.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Callable

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.outputs import check_output_path
from headseg.analysis.reading import read_start
from headseg.analysis.segments import RECORD_FIELDS

from .inputs import Source
from .journal import JournalSink
from .sinks import ParquetSink, Sink, StreamSink


@dataclass(frozen=True)
class SinkTarget:
    """Where and how a run writes: ``out`` (None: stdout), ``single`` (one text document: no
    multi-document framing), ``settings`` (the run's settings: a local run into ``--out`` journals
    them; None for the Ray engine, which rewrites ``--out``) and ``resume``."""

    out: str | None
    single: bool = False
    settings: dict | None = None
    resume: bool = False


@dataclass(frozen=True)
class OutputFormat:
    """One registered output format."""

    name: str
    help: str
    #: ``target -> Sink``
    open: Callable[[SinkTarget], Sink]
    #: ``(path, first bytes) -> bool``: whether the file is an output headseg wrote in this format
    recognise: Callable[[str | os.PathLike, bytes], bool]
    needs_file: bool = False
    records: bool = False
    journaled: bool = False


_REGISTRY: dict[str, OutputFormat] = {}


def register_format(name: str, help: str, *, recognise: Callable[[str | os.PathLike, bytes], bool],
                    needs_file: bool = False, records: bool = False, journaled: bool = False):
    """Decorator: register the decorated sink factory as output format ``name`` (refuses a name taken)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise HeadsegError(f"a format name must be an identifier (got {name!r})")
    if name in _REGISTRY:
        raise HeadsegError(f"output format '{name}' is already registered")

    def decorate(factory: Callable[[SinkTarget], Sink]) -> Callable[[SinkTarget], Sink]:
        _REGISTRY[name] = OutputFormat(name, help, factory, recognise, needs_file, records, journaled)
        return factory

    return decorate


def format_names() -> tuple[str, ...]:
    """The registered formats, in registry order (``text`` first: the default)."""
    return tuple(_REGISTRY)


def format_help() -> str:
    """One line for ``--format``'s help."""
    return "output format: " + "; ".join(f"{f.name}: {f.help}" for f in _REGISTRY.values())


def get_format(name: str) -> OutputFormat:
    """The registered format ``name`` (:class:`InputError` naming the choices)."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise InputError(f"--format: unknown output format {name!r} (use {', '.join(_REGISTRY)})") from None


def is_segment_output(path: str | os.PathLike, fmt: str | None = None) -> bool:
    """Whether the file at ``path`` is an output of ``headseg segment`` (in ``fmt``, or in any format).

    Told from how it begins, by each format's recogniser.  A user's file could
    imitate one; no user's file is one by accident.
    """
    head = read_start(path)
    formats = _REGISTRY.values() if fmt is None else [get_format(fmt)]
    return any(f.recognise(path, head) for f in formats)


def check_output(out: str, sources: list[Source], direct: bool, force: bool = False) -> None:
    """Refuse, before any work, an output that is an input (same file, hard link, symlink), cannot be written,
    or is an existing file that headseg did not write (unless ``force``)."""
    check_output_path(out, [s.path for s in sources if s.path != "-" and "://" not in s.path],
                      ours=is_segment_output, force=force)
    if direct and os.path.exists(out) and not os.access(out, os.W_OK):
        raise InputError(f"--out {out}: permission denied")


#: how the text and JSON outputs begin (JSON: an array of records, or one record)
_TEXT_START = re.compile(rb"(##### |----- segment 1/)")
_JSON_START = re.compile(rb'\s*(\[\s*(\]|\{\s*"document":)|\{\s*"document":)')


def _text_output(path, head: bytes) -> bool:
    return _TEXT_START.match(head) is not None


def _json_output(path, head: bytes) -> bool:
    return _JSON_START.match(head) is not None


#: the record layouts headseg has written: today's, the one before the tree's ``id``/``parent``/``depth``
#: (issue 36), and the one before ``headings`` (issue 34)
_OUR_FIELDS = (RECORD_FIELDS, RECORD_FIELDS[:8], RECORD_FIELDS[:7])


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


@register_format("text", "segments between '-----' lines, '#####' per document", recognise=_text_output)
def _text_sink(t: SinkTarget) -> Sink:
    return StreamSink("text", t.single, t.out)


@register_format("jsonl", "one record per segment (per tree node with --level tree); with --out appended batch by batch with a journal "
                          "(--resume)", recognise=_jsonl_output, records=True, journaled=True)
def _jsonl_sink(t: SinkTarget) -> Sink:
    if t.out is not None and t.settings is not None:
        return JournalSink(t.out, t.settings, t.resume)
    # stdout, or the Ray engine's rows appended to --out as they come
    return StreamSink("jsonl", False, t.out, direct=t.out is not None)


@register_format("json", "one record per document (an array of them for several)", recognise=_json_output)
def _json_sink(t: SinkTarget) -> Sink:
    return StreamSink("json", t.single, t.out)


@register_format("parquet", "one row per segment or tree node (needs --out and pyarrow)", recognise=_parquet_output,
                 needs_file=True, records=True)
def _parquet_sink(t: SinkTarget) -> Sink:
    if t.out is None:
        raise InputError("--format parquet needs --out FILE")
    return ParquetSink(t.out)
