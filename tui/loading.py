"""The slow half of the TUI: the document, its grid statistics and its marks, worked out off the UI thread.

The app's thread workers call :func:`prepare_document` and :func:`mark_document`
and hand the results to the UI thread.  Nothing here imports Textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from headseg.analysis.errors import HeadsegError

from .data import DocumentModel, ModelSource, read_document
from .marks import AutoSegmenter, MarkedSpans, sentence_segmentation
from .options import AppOptions
from .stats import document_statistics, load_report_stats

#: The paragraph shipped with the TUI, shown when there is no input and no source checkout.
SAMPLE_PATH = Path(__file__).resolve().parent / "sample.txt"


def default_sample() -> Path:
    """``examples/sample.txt`` of a source checkout, else the paragraph shipped with the TUI."""
    repo_sample = Path(__file__).resolve().parent.parent / "examples" / "sample.txt"
    return repo_sample if repo_sample.is_file() else SAMPLE_PATH


@dataclass
class PreparedDocument:
    """What the app shows once loading is done.

    ``stats``: grid statistics by display name, each ``[L, H]`` (the report's
    first, then the document's own); ``notes``: ``(message, severity)``
    notifications for a profile or report that could not be used;
    ``profile_heads``: the ``(layer, head)`` pairs the profile selected;
    ``loaded``: the model the document was computed with (None for a ready
    document given without one), handed on to the segmenter.
    """

    doc: DocumentModel
    stats: dict[str, np.ndarray]
    notes: list[tuple[str, str]]
    profile_heads: list[tuple[int, int]]
    loaded: Any


def prepare_document(options: AppOptions, document: DocumentModel | None, loaded: Any) -> PreparedDocument:
    """The document (built from ``options`` unless ``document`` is given), its first window and statistics.

    ``loaded`` is the model if the app has one (else ``options.model`` is
    loaded when the document needs it).  A profile or report that fails is a
    note; anything else that fails raises.
    """
    if document is not None:
        doc = document
    else:
        doc, loaded = _build_document(options, loaded)
    report_stats, notes = _report_statistics(options, doc)
    profile_heads, profile_notes = _profile_heads(options, doc)
    notes += profile_notes
    doc.matrices(0)
    stats = dict(report_stats)
    stats.update({f"document · {k}": v for k, v in document_statistics(doc, options.stats_windows).items()})
    return PreparedDocument(doc, stats, notes, profile_heads, loaded)


def _build_document(options: AppOptions, loaded: Any) -> tuple[DocumentModel, Any]:
    """The input text cut into windows, with the model (loaded here if ``loaded`` is None)."""
    note = ""
    if options.text is not None:
        text = options.text
        if not text.strip():
            raise HeadsegError("empty text: nothing to show")
    else:
        path = options.path if options.path is not None else default_sample()
        text, note = read_document(path, head_bytes=options.head_bytes)
    if loaded is None:
        from headseg.analysis.model import load_model

        loaded = load_model(options.model)
    doc = DocumentModel.from_text(
        text, ModelSource(loaded), max_tokens=options.max_tokens, max_windows=options.max_windows, note=note
    )
    return doc, loaded


def _report_statistics(options: AppOptions, doc: DocumentModel) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
    """The study report's per-head statistics, named ``report · …``; a failure is a note, not fatal."""
    if options.report is None:
        return {}, []
    try:
        stats = load_report_stats(options.report, doc.num_layers, doc.num_heads)
    except HeadsegError as exc:
        return {}, [(str(exc), "error")]
    return {f"report · {k}": v for k, v in stats.items()}, []


def _profile_heads(options: AppOptions, doc: DocumentModel) -> tuple[list[tuple[int, int]], list[tuple[str, str]]]:
    """The heads the profile selected (none for the fallback profile); a failure is a note, not fatal."""
    from types import SimpleNamespace

    from headseg.analysis.profile import FALLBACK_CORPUS, resolve_profile

    info = SimpleNamespace(name=doc.source.name, fingerprint=doc.source.fingerprint,
                           num_layers=doc.num_layers, num_heads=doc.num_heads)
    try:
        prof = resolve_profile(info, options.profile)
    except HeadsegError as exc:
        return [], [(f"{exc}; heads not marked", "error")]
    # The fallback (no study was run for this model) marks nothing: no head was selected.
    if prof.corpus == FALLBACK_CORPUS:
        return [], []
    return [(l, h) for l, h in prof.heads if l < doc.num_layers and h < doc.num_heads], []


def mark_document(options: AppOptions, loaded: Any, text: str) -> tuple[MarkedSpans, str]:
    """Units and topics to mark in ``text``, and a warning (``""`` if none), from ``options.segmenter``.

    Slow: the automatic segmenter may load a model (``loaded`` is handed over
    so it does not load it again).  Any failure falls back to sentences with a
    warning.
    """
    seg, warning = sentence_segmentation(text), ""
    if options.segmenter == "auto":
        seg, warning = AutoSegmenter(options.segmenter_config(), loaded=loaded)(text)
    elif callable(options.segmenter):
        try:
            res = options.segmenter(text)
            seg, warning = res if isinstance(res, tuple) else (res, "")
        except Exception as exc:  # noqa: BLE001 - an injected segmenter may fail like the real one
            warning = f"segmenter failed ({exc}); showing sentences"
    return seg, warning
