"""headseg.export — ONNX export of the selected heads and an onnxruntime backend.

See docs/export.md.  ``OnnxBackend`` has the interface of
:class:`analysis.capture.TorchBackend`; ``make_backend`` picks one of the two.
"""

from .artifact import cache_dir, cache_root, read_manifest
from .backend import OnnxBackend, make_backend

__all__ = ["OnnxBackend", "cache_dir", "cache_root", "make_backend", "read_manifest"]
