"""headseg itself as a method under evaluation: registered first, before the baselines.

The evaluation harness (:mod:`headseg.segmenter.evaluation`) knows methods by
name; this one builds the front door's :class:`~headseg.Segmenter` (and so its
engine), which the segmenter package cannot import.  Importing this module
registers it (``headseg evaluate`` and the benchmarks do); ``import headseg``
does not, so that a command that evaluates nothing does not pay for the
evaluation modules' import.
"""

from __future__ import annotations

from headseg.segmenter.evaluation.methods import Method, MethodUnavailable, Prediction, register_method


@register_method("headseg", options=("model", "profile", "backend", "precision"), first=True)
class HeadsegMethod(Method):
    """headseg's own segmenter through its public API (:class:`headseg.Segmenter`), built once per run."""

    takes_k = True
    description = "headseg Segmenter(model=None, profile=None, backend='auto'), level='topic'"

    def __init__(self, model: str | None = None, profile: str | None = None, backend: str = "auto",
                 precision: str | None = None):
        super().__init__()
        self.model = model
        self.profile = profile
        self.backend = backend
        self.precision = precision

    def setup(self):
        """Build the Segmenter (model, profile and backend resolved once, quietly)."""
        try:
            from headseg.api import Segmenter
        except ImportError as exc:
            raise MethodUnavailable(f"headseg's segmenter API is not available ({exc})") from exc
        self.seg = Segmenter(model=self.model, profile=self.profile, backend=self.backend, precision=self.precision,
                             quiet=True)

    def predict(self, doc, k=None):
        """Topic boundaries of ``doc.text`` as character offsets; ``k`` is passed as ``segments``."""
        result = self.seg.segment(doc.text, level="topic", segments=k)
        return Prediction(chars=list(result.boundaries), info={"segments": len(result)})

    def params(self):
        """The settings as asked for (``signature`` records what they resolved to)."""
        return {"model": self.model or "embedded", "profile": self.profile or "default", "backend": self.backend,
                "precision": self.precision or "default"}

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
