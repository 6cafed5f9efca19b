"""Silencing transformers in the loading thread only, so that loading a model prints nothing.

A library does not touch its host's logging: neither transformers' verbosity
nor its progress-bar switch is changed; the records and bars of the thread
that loads are dropped, the others' pass.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Iterator

#: threads loading a model now, whose transformers logs and progress bars are dropped
_QUIET_THREADS: set[int] = set()
_QUIET_LOCK = threading.Lock()
_QUIET_STATE: dict = {}


class _QuietThreads(logging.Filter):
    """Drops the records of the threads in :data:`_QUIET_THREADS` (the others' pass)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread not in _QUIET_THREADS


@contextlib.contextmanager
def quiet_load(transformers, prefix: str = "transformers") -> Iterator[None]:
    """Silence transformers in this thread while a model loads, and only then.

    transformers reports a load on its loggers (4.x: "Some weights of the model
    checkpoint ... were not used" for the pooler segmentation never reads; 5.x:
    a LOAD REPORT table) and draws a "Loading weights" bar (5.x).  The library
    prints nothing, and changing transformers' verbosity or its progress-bar
    switch would change the host's.  So, for this thread's records only: a
    filter on every ``prefix`` logger (a record is dropped where it is made,
    wherever the host sends it) and on the handlers of ``prefix``'s own logger
    (loggers made during the load), and transformers' tqdm factory gives this
    thread its silent bar.  Everything is removed when the last load ends.
    """
    me = threading.get_ident()
    with _QUIET_LOCK:
        if not _QUIET_THREADS:
            quiet = _QuietThreads()
            targets = [logging.getLogger(prefix)]
            targets += [lg for n, lg in list(logging.Logger.manager.loggerDict.items())
                        if n.startswith(prefix + ".") and isinstance(lg, logging.Logger)]
            targets += list(logging.getLogger(prefix).handlers)
            for t in targets:
                t.addFilter(quiet)
            _QUIET_STATE.update(filter=quiet, targets=targets, bars=_quiet_bars(transformers))
        _QUIET_THREADS.add(me)
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _QUIET_THREADS.discard(me)
            if not _QUIET_THREADS:
                for t in _QUIET_STATE.pop("targets"):
                    t.removeFilter(_QUIET_STATE["filter"])
                restore = _QUIET_STATE.pop("bars")
                if restore is not None:
                    restore()
                _QUIET_STATE.clear()


def _quiet_bars(transformers):
    """Make transformers' tqdm factory silent for :data:`_QUIET_THREADS`; returns the undo (None: nothing to undo)."""
    hf_logging = getattr(getattr(transformers, "utils", None), "logging", None)
    factory = type(getattr(hf_logging, "tqdm", None))
    original = factory.__dict__.get("__call__")
    empty = getattr(hf_logging, "EmptyTqdm", None)
    if original is None or empty is None:  # another transformers layout: leave it be
        return None

    def call(self, *args, **kwargs):
        if threading.get_ident() in _QUIET_THREADS:
            return empty(*args, **kwargs)
        return original(self, *args, **kwargs)

    factory.__call__ = call

    def restore() -> None:
        factory.__call__ = original

    return restore
