"""headseg itself as a method under evaluation: registered first, before the baselines.

The evaluation harness (:mod:`headseg.segmenter.evaluation`) knows methods by
name; this one builds the front door's :class:`~headseg.Segmenter` (and so its
engine), which the segmenter package cannot import.  Importing this module
registers it (``headseg evaluate`` and the benchmarks do); ``import headseg``
does not, so that a command that evaluates nothing does not pay for the
evaluation modules' import.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from headseg.config import SegmenterConfig
from headseg.segmenter.evaluation.methods import Method, MethodUnavailable, Prediction, register_method


@register_method("headseg", options=("config",), first=True)
class HeadsegMethod(Method):
    """headseg's own segmenter through its public API (:class:`headseg.Segmenter`), built once per run
    from one :class:`~headseg.config.SegmenterConfig`, as every command builds its segmenter."""

    takes_k = True
    description = "headseg Segmenter(model=None, profile=None, backend='auto'), level='topic'"

    def __init__(self, config: "SegmenterConfig | Mapping[str, Any] | None" = None, **settings: Any):
        """``config`` (``headseg evaluate`` gives the one its flags make) with ``settings`` (its fields:
        ``model=...``, ``backend=...``) applied; validated here, before any data or model is read."""
        super().__init__()
        self.config = SegmenterConfig.of(config, **settings)

    def setup(self):
        """Build the Segmenter (model, profile and backend resolved once, quietly)."""
        try:
            from headseg.api import Segmenter
        except ImportError as exc:
            raise MethodUnavailable(f"headseg's segmenter API is not available ({exc})") from exc
        self.seg = Segmenter(config=self.config, quiet=True)

    def predict(self, doc, k=None):
        """Topic boundaries of ``doc.text`` as character offsets; ``k`` is passed as ``segments``."""
        result = self.seg.segment(doc.text, level="topic", segments=k)
        return Prediction(chars=list(result.boundaries), info={"segments": len(result)},
                          confidence=[s.confidence for s in result.segments[1:]])

    def params(self):
        """The settings as asked for (``signature`` records what they resolved to)."""
        c = self.config
        # the keys results were stored under before the config: a re-run finds them
        return {"model": _name(c.model) or "embedded", "profile": _name(c.profile) or "default",
                "backend": c.backend, "precision": c.precision or "default"}

    packages = ("torch", "transformers", "onnxruntime", "onnxruntime-gpu")

    def signature(self):
        """The base signature plus the model, profile, resolved backend and segmenter settings."""
        from dataclasses import asdict

        self.ensure_setup()
        seg = self.seg
        backend = seg.backend
        manifest = getattr(backend, "manifest", None)
        return dict(
            super().signature(),
            model_fingerprint=seg.loaded.info.fingerprint,
            profile_hash=seg.profile.hash(),
            # "auto" resolves to torch or a cached ONNX artifact of some precision: record what it became
            backend={"kind": type(backend).__name__, "device": str(getattr(backend, "device", "")),
                     "precision": getattr(manifest, "precision", "fp32")},
            settings={"topic": asdict(seg.params), "units": asdict(seg.unit_params), "unit_mode": seg.unit_mode,
                      "window_tokens": seg.window_tokens},
        )


def _name(path: "str | os.PathLike | None") -> str | None:
    return None if path is None else os.fspath(path)
