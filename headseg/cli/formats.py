"""The output formats of ``headseg segment``: which sink each ``--format`` opens, and the output checks.

The formats themselves (their bytes, their recognisers, what they hold) are
the library's registry (:mod:`headseg.formats`); ``--format``'s choices and
help, the engine checks and the output checks read it, so a new format is one
registration there.  Here the command decides where a format's bytes go: a
text format to a stream or a file renamed into place, a file format to a
temporary file renamed into place, an appendable one into ``--out`` with the
journal that makes ``--resume`` exact.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from headseg.analysis.errors import InputError
from headseg.analysis.outputs import check_output_path
from headseg.analysis.reading import read_start
from headseg.formats import FORMATS, get_format

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


def format_names() -> tuple[str, ...]:
    """The registered formats, in registry order (``text`` first: the default)."""
    return FORMATS.names()


def format_help() -> str:
    """One line for ``--format``'s help."""
    return "output format: " + FORMATS.help()


def sink_for(fmt: str, t: SinkTarget) -> Sink:
    """The sink that writes format ``fmt`` to ``t``."""
    f = get_format(fmt)
    if f.writer is not None:
        if t.out is None:
            raise InputError(f"--format {f.name} needs --out FILE")
        return ParquetSink(t.out, f.name)
    if f.appendable and t.out is not None:
        if t.settings is not None:
            return JournalSink(t.out, t.settings, t.resume, f.name)
        # the Ray engine's rows appended to --out as they come
        return StreamSink(f.name, False, t.out, direct=True)
    return StreamSink(f.name, t.single, t.out)


def is_segment_output(path: str | os.PathLike, fmt: str | None = None) -> bool:
    """Whether the file at ``path`` is an output of ``headseg segment`` (in ``fmt``, or in any format).

    Told from how it begins, by each format's recogniser.  A user's file could
    imitate one; no user's file is one by accident.
    """
    head = read_start(path)
    formats = FORMATS.values() if fmt is None else [get_format(fmt)]
    return any(f.recognise(path, head) for f in formats)


def check_output(out: str, sources: list[Source], direct: bool, force: bool = False) -> None:
    """Refuse, before any work, an output that is an input (same file, hard link, symlink), cannot be written,
    or is an existing file that headseg did not write (unless ``force``)."""
    check_output_path(out, [s.path for s in sources if s.path != "-" and "://" not in s.path],
                      ours=is_segment_output, force=force)
    if direct and os.path.exists(out) and not os.access(out, os.W_OK):
        raise InputError(f"--out {out}: permission denied")
