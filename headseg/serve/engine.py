"""Deprecated: the old name of :mod:`.host` (its ``Engine`` is now ``Host``); kept for one release."""

from __future__ import annotations

import warnings

from . import host as _host


def __getattr__(name: str):
    # docs/serve.md and docs/performance.md named headseg.serve.engine before the rename
    new = "Host" if name == "Engine" else name
    if new.startswith("_") or not hasattr(_host, new):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"headseg.serve.engine.{name} is deprecated: use headseg.serve.host.{new}",
                  DeprecationWarning, stacklevel=2)
    return getattr(_host, new)
