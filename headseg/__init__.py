"""headseg: text segmentation from the attention heads of a BERT-family encoder.

>>> from headseg import Segmenter
>>> seg = Segmenter()                    # embedded all-MiniLM-L6-v2, shipped head profile
>>> result = seg.segment(text)           # topic segments with exact character offsets
>>> seg.segment(text, SegmentOptions(max_tokens=256))   # or the options' fields as keywords

Subpackages: :mod:`headseg.analysis` (the base: models, windows, per-head
capture, similarity, norms, the study), :mod:`headseg.segmenter`,
:mod:`headseg.export` (ONNX) and :mod:`headseg.tui`.  Importing ``headseg``
imports neither torch nor any framework, and changes nothing in the host
process.
"""

from __future__ import annotations

from headseg.analysis.errors import (
    ArtifactError,
    DeviceError,
    HeadsegError,
    InputError,
    ModelError,
    ProfileError,
)
from headseg.analysis.model import load_model
from headseg.analysis.segments import Segment, Segmentation
from headseg.segmenter.api import DocumentError, Segmenter
from headseg.segmenter.options import SegmentOptions


def __getattr__(name: str):
    # Read from the package metadata on first use: importlib.metadata costs a
    # noticeable part of a short command's start-up.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("headseg")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'headseg' has no attribute {name!r}")

__all__ = [
    "ArtifactError",
    "DeviceError",
    "DocumentError",
    "HeadsegError",
    "InputError",
    "ModelError",
    "ProfileError",
    "Segment",
    "SegmentOptions",
    "Segmentation",
    "Segmenter",
    "__version__",
    "load_model",
]
