"""The front door's :class:`Segmenter`: a configuration in, the engine built, the pipeline over it.

``Segmenter(...)`` reads as its steps: the settings become one
:class:`~headseg.config.SegmenterConfig`; the model and the head profile are
resolved; the engine is chosen and built (:func:`headseg.export.backends.make_backend`,
the one place that is decided); and the segmentation pipeline
(:class:`~headseg.segmenter.pipeline.Pipeline`, which knows only the capture
contract) runs over it.  The async face (``asegment``) runs through the
engine room's async runner (:mod:`headseg.export.runner`).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Mapping, Sequence

from headseg.analysis.capture import CaptureBackend
from headseg.analysis.errors import HeadsegError, shown
from headseg.analysis.model import LoadedModel, load_model
from headseg.analysis.profile import HeadProfile, resolve_profile
from headseg.analysis.segments import Segmentation
from headseg.export import runner
from headseg.export.backends import backend_names, make_backend
from headseg.export.provision import artifact_profile
from headseg.segmenter.encode import UnitEncoder
from headseg.segmenter.options import SegmentOptions
from headseg.segmenter.pipeline import DEFAULT_BATCH_CHARS, DEFAULT_BATCH_DOCS, DocumentError, Pipeline, check_knobs
from headseg.segmenter.stream import iterable_of
from headseg.segmenter.topics import TopicParams
from headseg.segmenter.units import UnitParams

from .config import SegmenterConfig

__all__ = ["Segmenter", "DocumentError", "TopicParams", "UnitParams", "SegmentOptions", "SegmenterConfig",
           "DEFAULT_BATCH_DOCS", "DEFAULT_BATCH_CHARS"]

#: the keyword ``window_tokens`` had before it was named so (it also named the hard segment limit)
_OLD_WINDOW_KEYWORD = "max_tokens"


class Segmenter(Pipeline):
    """Segment text into sentence-like units or topic segments.

    >>> seg = Segmenter()                      # embedded model, shipped head profile, ONNX engine
    >>> result = seg.segment(text)             # topic segments, number chosen automatically
    >>> "".join(s.text for s in result) == text
    True
    """

    def __init__(self, model: "str | os.PathLike | LoadedModel | None" = None,
                 profile: "HeadProfile | str | os.PathLike | None" = None,
                 backend: "str | CaptureBackend | None" = None, device: str | None = None,
                 batch_size: int | None = None,
                 window_tokens: int | None = None, params: TopicParams | None = None,
                 unit_params: UnitParams | None = None, unit_mode: str | None = None,
                 artifact: "str | os.PathLike | None" = None, precision: str | None = None,
                 threads: int | None = None, quiet: bool | None = None,
                 sentence_splitter: Callable[[str], Sequence[tuple[int, int]]] | None = None,
                 config: SegmenterConfig | Mapping[str, Any] | None = None, **deprecated: Any):
        """``model``: None (embedded), a local directory, a cached hub id, or a :class:`LoadedModel`.

        Every keyword left None takes ``config``'s value (its defaults without one).
        ``backend``: ``"auto"`` (default) serves from the ONNX artifact of the
        model, profile and precision, exporting it into the cache on first use,
        and falls back to torch where ONNX cannot serve; ``"onnx"`` insists on
        ONNX; ``"torch"`` is the reference; or a capture backend already made.
        ``artifact``: serve this exported artifact directory (its ``profile.json``
        is the default profile).  ``device``: auto, cpu or cuda; ``precision``:
        fp32, fp16 or int8 instead of the device's default (int8 on CPU, fp16 on
        CUDA; fp32 gives exactly the torch backend's boundaries); ``threads``:
        onnxruntime intra-op threads; ``window_tokens``: the model window (128).
        ``sentence_splitter``: a callable ``text -> [(start, end), ...]`` (pysbd,
        spaCy...) for the units instead of the sentence rules.  ``config``: a
        :class:`SegmenterConfig` (or its fields) that the keywords override.
        ``max_tokens`` is the old name of ``window_tokens`` (deprecated).
        """
        window_tokens = _window_keyword(window_tokens, deprecated)
        if backend is not None and not isinstance(backend, str) and not hasattr(backend, "capture"):
            names = backend_names()
            raise HeadsegError(f"backend must be {', '.join(repr(n) for n in names)} or a capture backend "
                               f"(got {shown(backend)})")
        given = {"model": None if isinstance(model, LoadedModel) else model,
                 "profile": profile if isinstance(profile, (str, os.PathLike)) else None,
                 "backend": backend if isinstance(backend, str) else None, "device": device,
                 "batch_size": batch_size, "window_tokens": window_tokens, "unit_mode": unit_mode,
                 "artifact": artifact, "precision": precision, "threads": threads, "quiet": quiet}
        self.config = c = SegmenterConfig.of(config, **{k: v for k, v in given.items() if v is not None})
        check_knobs(params, unit_params, c.unit_mode, sentence_splitter)  # before any model or engine
        # The ONNX engine needs no torch weights: load them only for the torch backend.
        self.loaded = model if isinstance(model, LoadedModel) else load_model(c.model, weights=c.backend == "torch")
        info = self.loaded.info
        if not 8 <= c.window_tokens <= info.max_positions:  # before the engine: building one may export
            raise HeadsegError(f"window_tokens must be between 8 and {info.max_positions}")
        # a profile object goes straight to resolve_profile (which refuses anything else); names via the config
        chosen = c.profile if profile is None or isinstance(profile, (str, os.PathLike)) else profile
        if chosen is None and c.artifact is not None:
            chosen = artifact_profile(c.artifact, self.loaded)
        profile = resolve_profile(info, chosen)
        engine = backend if backend is not None and not isinstance(backend, str) else make_backend(
            self.loaded, profile, backend=c.backend, device=c.device, artifact=c.artifact, precision=c.precision,
            threads=c.threads, quiet=c.quiet)
        encoder = UnitEncoder.of(self.loaded.tokenizer, engine, profile, info.num_layers, info.num_heads,
                                 batch_size=c.batch_size, window_tokens=c.window_tokens)
        super().__init__(encoder, profile, params=params, unit_params=unit_params, unit_mode=c.unit_mode,
                         sentence_splitter=sentence_splitter)

    def __repr__(self) -> str:
        return (f"Segmenter(model={self.loaded.info.name!r}, backend={self.backend.name!r}, "
                f"device={self.backend.device!r}, profile={self.profile.hash()})")

    @property
    def max_tokens(self) -> int:
        """Deprecated: the model window, :attr:`window_tokens`."""
        warnings.warn("Segmenter.max_tokens is now window_tokens (max_tokens is the hard segment limit of "
                      "SegmentOptions)", DeprecationWarning, stacklevel=2)
        return self.window_tokens

    async def asegment(self, text: str, options: SegmentOptions | Mapping[str, Any] | None = None,
                       **overrides: Any) -> Segmentation:
        """:meth:`segment` for asyncio: the work runs off the event loop (:mod:`headseg.export.runner`),
        and the model calls of concurrent ``asegment`` calls are packed together by a token budget."""
        opts = SegmentOptions.of(options, **overrides)
        return (await runner.runner_of(self).segment_many([text], opts))[0]

    async def asegment_many(self, texts: Sequence[str], options: SegmentOptions | Mapping[str, Any] | None = None,
                            **overrides: Any) -> list[Segmentation]:
        """:meth:`segment_many` for asyncio (see :meth:`asegment`)."""
        opts = SegmentOptions.of(options, **overrides)
        return await runner.runner_of(self).segment_many(iterable_of(texts, "texts must be a list of str"), opts)


def _window_keyword(window_tokens: int | None, deprecated: dict[str, Any]) -> int | None:
    """``window_tokens``, or its old keyword ``max_tokens`` with a :class:`DeprecationWarning`."""
    extra = set(deprecated) - {_OLD_WINDOW_KEYWORD}
    if extra:
        raise TypeError(f"Segmenter() got an unexpected keyword argument {sorted(extra)[0]!r}")
    if _OLD_WINDOW_KEYWORD not in deprecated:
        return window_tokens
    if window_tokens is not None:
        raise HeadsegError("give window_tokens, not both it and its old name max_tokens")
    warnings.warn("Segmenter(max_tokens=...) is now window_tokens=... (max_tokens is the hard segment limit of "
                  "SegmentOptions)", DeprecationWarning, stacklevel=3)
    return deprecated[_OLD_WINDOW_KEYWORD]
