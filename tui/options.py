"""What the TUI is asked to show and how: :class:`AppOptions`, the one place its settings are declared.

``headseg tui``, :func:`headseg.tui.app.create_app` and the tests all build the
app from these fields; nothing here imports Textual.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headseg.analysis.text import WINDOW_TOKENS
from headseg.config import SegmenterConfig

from .data import DEFAULT_HEAD_BYTES, DEFAULT_MAX_WINDOWS, DocumentModel


@dataclass(frozen=True, kw_only=True)
class AppOptions:
    """The settings of one app run (unchanged while it runs).

    The input is one of ``path`` (a text file), ``text``, or ``document`` (a
    ready :class:`~headseg.tui.data.DocumentModel`, e.g. from
    :func:`~headseg.tui.precomputed.load_precomputed`); none means the bundled sample.
    ``loaded`` (a :class:`~headseg.analysis.model.LoadedModel`) skips loading
    ``model`` (a path or hub id; None = the embedded model).

    ``segmenter`` is ``"auto"`` (``headseg.api`` if present, built from
    :meth:`segmenter_config`), ``None`` (sentences only) or a callable
    ``text -> MarkedSpans | (MarkedSpans, warning)``.
    ``profile=None`` uses the shipped profile when it matches the model;
    ``report`` is a study's ``report.json`` whose per-head statistics colour the grid.

    ``max_tokens`` is the window size in tokens, ``max_windows`` how many windows
    of a long text are kept, ``head_bytes`` how many bytes of a larger file are
    read; ``color_system`` is ``auto``, ``truecolor`` or ``256``; ``export_dir``
    is where ``e`` saves PNGs; ``stats_windows`` how many windows the document's
    own statistics average over.
    """

    path: str | os.PathLike | None = None
    text: str | None = None
    document: DocumentModel | None = None
    model: str | None = None
    loaded: Any = None
    profile: str | os.PathLike | None = None
    report: str | os.PathLike | None = None
    segmenter: Any = "auto"
    max_tokens: int = WINDOW_TOKENS
    max_windows: int = DEFAULT_MAX_WINDOWS
    head_bytes: int = DEFAULT_HEAD_BYTES
    color_system: str = "auto"
    export_dir: str | os.PathLike = "."
    stats_windows: int = 4

    def __post_init__(self) -> None:
        if self.segmenter == "auto":
            self.segmenter_config()  # a bad setting is a HeadsegError now, before the app starts

    def segmenter_config(self) -> SegmenterConfig:
        """The configuration of the ``"auto"`` segmenter: the model and profile the app inspects, quiet."""
        return SegmenterConfig(model=self.model, profile=self.profile, quiet=True)

    @property
    def input_name(self) -> str:
        """The input's name in the app's title: the file's name, ``text``, or ``document``.

        ``document`` stands for a ready document and for the bundled sample alike.
        """
        if self.path is not None:
            return Path(self.path).name
        if self.text is not None:
            return "text"
        return "document"
