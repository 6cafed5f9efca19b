"""Deprecated: the old name of :mod:`.onnx_backend`; kept for one release."""

from __future__ import annotations

import warnings

from . import onnx_backend as _renamed


def __getattr__(name: str):
    # docs/export.md showed ``from headseg.export.engine import OnnxBackend`` before the rename
    if name.startswith("_") or not hasattr(_renamed, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"headseg.export.engine.{name} is deprecated: use headseg.export.onnx_backend.{name}",
                  DeprecationWarning, stacklevel=2)
    return getattr(_renamed, name)
