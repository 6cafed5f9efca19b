"""headseg: text segmentation from the attention heads of a BERT-family encoder.

>>> from headseg import Segmenter
>>> seg = Segmenter()                    # embedded all-MiniLM-L6-v2, shipped head profile
>>> result = seg.segment(text)           # topic segments with exact character offsets

Subpackages: :mod:`headseg.analysis` (the base: models, windows, per-head
capture, similarity, norms, the study), :mod:`headseg.segmenter`,
:mod:`headseg.export` (ONNX) and :mod:`headseg.tui`.  Importing ``headseg``
imports neither torch nor any framework, and changes nothing in the host
process.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

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
from headseg.segmenter.api import Segmenter

try:
    __version__ = _version("headseg")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "ArtifactError",
    "DeviceError",
    "HeadsegError",
    "InputError",
    "ModelError",
    "ProfileError",
    "Segment",
    "Segmentation",
    "Segmenter",
    "__version__",
    "load_model",
]
