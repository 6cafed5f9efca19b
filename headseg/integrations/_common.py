"""What the framework adapters share: the segmenter (built once, on first use) and its options."""

from __future__ import annotations

import os
from typing import Any, Sequence

from headseg.analysis.errors import HeadsegError
from headseg.analysis.segments import Segmentation
from headseg.segmenter.api import Segmenter, check_options
from headseg.segmenter.tokens import TokenCounterSpec, resolve_token_counter


class SegmenterRunner:
    """A :class:`Segmenter` (given, or built on first use) and the options every call passes it."""

    def __init__(self, segmenter: Segmenter | None = None, *, model: str | os.PathLike | None = None,
                 profile: Any = None, backend: str = "auto", device: str | None = None,
                 level: str = "topic", segments: int | None = None, min_chars: int | None = None,
                 max_chars: int | None = None, max_tokens: int | None = None,
                 token_counter: TokenCounterSpec = None, penalty: float | None = None):
        if segmenter is not None:
            if not isinstance(segmenter, Segmenter):
                raise HeadsegError(f"segmenter must be a headseg Segmenter (got {type(segmenter).__name__})")
            if model is not None or profile is not None or backend != "auto" or device is not None:
                raise HeadsegError("pass either a ready segmenter or model/profile/backend/device, not both")
        check_options(level=level, segments=segments, min_chars=min_chars, max_chars=max_chars,
                              max_tokens=max_tokens, penalty=penalty)
        self._segmenter = segmenter
        self.build_args = {"model": model, "profile": profile, "backend": backend, "device": device}
        self.options = {"level": level, "segments": segments, "min_chars": min_chars, "max_chars": max_chars,
                        "max_tokens": max_tokens, "penalty": penalty}
        self.token_counter_spec = token_counter
        # Resolved now, so a tokenizer directory is read once and a bad one fails at construction.
        self._counter = resolve_token_counter(token_counter)

    @property
    def loaded(self) -> bool:
        return self._segmenter is not None

    @property
    def segmenter(self) -> Segmenter:
        """The segmenter, loading the model on first access."""
        if self._segmenter is None:
            self._segmenter = Segmenter(**self.build_args)
        return self._segmenter

    def segment_many(self, texts: Sequence[str]) -> list[Segmentation]:
        if not texts:
            return []
        return self.segmenter.segment_many(list(texts), token_counter=self._counter, **self.options)


def page_numbers(text: str, result: Segmentation) -> list[int]:
    """Page (1-based, pages separated by form feeds) on which each segment's first non-form-feed character lies."""
    pages, seen, pos = [], 0, 0
    for s in result:
        seen += text.count("\f", pos, s.start)
        pos = s.start
        lead = len(s.text) - len(s.text.lstrip("\f"))
        pages.append(1 + seen + lead)
    return pages
