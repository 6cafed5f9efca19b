"""headseg: text segmentation from the attention heads of a BERT-family encoder.

>>> from headseg import Segmenter
>>> seg = Segmenter()                    # all-MiniLM-L6-v2, shipped head profile
>>> result = seg.segment(text)           # topic segments with exact character offsets
>>> seg.segment(text, SegmentOptions(max_tokens=256))   # or the options' fields as keywords

Subpackages: :mod:`headseg.analysis` (the base: models, windows, per-head
capture, similarity, norms, the study), :mod:`headseg.segmenter`,
:mod:`headseg.export` (ONNX) and :mod:`headseg.tui`.  Importing ``headseg``
imports neither torch nor any framework, and changes nothing in the host
process; the API prints nothing (its warnings go to the ``headseg`` logger).
"""

from __future__ import annotations

import logging

# A library's loggers go where the host sends them, and nowhere by default: without
# this, Python's last-resort handler would print headseg's warnings on stderr.
logging.getLogger("headseg").addHandler(logging.NullHandler())

from headseg.analysis.errors import (  # noqa: E402
    ArtifactError,
    DeviceError,
    HeadsegError,
    InputError,
    ModelError,
    ProfileError,
)
from headseg.analysis.model import load_model  # noqa: E402
from headseg.analysis.segments import Segment, Segmentation  # noqa: E402
from headseg.api import DocumentError, Segmenter  # noqa: E402
from headseg.config import SegmenterConfig  # noqa: E402
from headseg.segmenter.options import SegmentOptions  # noqa: E402


def sample_text() -> str:
    """The sample document the README's examples segment (three topics, 1,280 characters), shipped in the wheel."""
    from importlib.resources import files

    return files("headseg").joinpath("data", "sample.txt").read_text(encoding="utf-8")


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
    "SegmenterConfig",
    "Segmenter",
    "__version__",
    "load_model",
    "sample_text",
]
