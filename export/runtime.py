"""onnxruntime on this machine: importing it, and whether it can really run on CUDA.

The one module that imports ``onnxruntime`` (lazily, so that importing
:mod:`headseg.export` costs nothing where it is not installed) and probes the
GPU.  :mod:`.policy` decides from the probe where serving runs;
:mod:`.session` runs graphs with the module.
"""

from __future__ import annotations

import contextlib


_telemetry_off = False


def _ort():
    """The ``onnxruntime`` module, imported on first use (an :class:`ImportError` where it is missing).

    ``disable_telemetry_events`` is called before anything runs, but on onnxruntime
    1.32's Linux build it does not stop the telemetry client the library starts
    when it loads (a device id under ``~/.cache/Microsoft``, DNS lookups of its
    collector): only ``ORT_DISABLE_TELEMETRY=1`` in the environment at import does.
    The ``headseg`` command sets it (:data:`headseg.cli.QUIET_ENV`); a library must
    not set its host's environment, so here it is only documented (docs/export.md).
    Every session and the quantiser get onnxruntime through here.
    """
    global _telemetry_off
    import onnxruntime as ort

    if not _telemetry_off:
        off = getattr(ort, "disable_telemetry_events", None)
        if off is not None:
            off()
        _telemetry_off = True
    return ort


def cuda_provider_works() -> bool:
    """Whether onnxruntime can actually run on CUDA here (not merely lists the provider).

    onnxruntime-gpu lists ``CUDAExecutionProvider`` even on machines without a
    GPU, so the CUDA driver library is loaded as well.
    """
    ort = _ort()
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return False
    return cuda_driver_loads()


def cuda_driver_loads() -> bool:
    """Whether the NVIDIA driver's library (``libcuda.so.1``) loads here: a GPU may be usable at all."""
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def require_cuda(device: str | None) -> None:
    """:class:`DeviceError` (exit 6) when ``device`` is ``cuda`` and onnxruntime cannot run on a GPU here."""
    from headseg.analysis.errors import DeviceError

    if device == "cuda" and not cuda_provider_works():
        raise DeviceError("--device cuda was asked for, but onnxruntime has no usable CUDA GPU here")


class _ModuleLogging:
    """Stands in for the ``logging`` module inside onnxruntime's tools while they run (see :func:`quiet_tools`).

    ``logging.info(...)`` at module level configures the root logger (a
    ``basicConfig`` handler) when it has none: the host's logging would change.
    Here the same calls go to the ``headseg.onnxruntime`` logger, which keeps them.
    """

    def __init__(self, real):
        self._real = real
        self._log = real.getLogger("headseg.onnxruntime")

    def __getattr__(self, name):
        if name in ("debug", "info", "warning", "warn", "error", "exception", "critical", "log"):
            return getattr(self._log, "warning" if name == "warn" else name)
        return getattr(self._real, name)


@contextlib.contextmanager
def quiet_tools(prefixes: tuple[str, ...] = ("onnxruntime.quantization", "onnxruntime.transformers")):
    """While onnxruntime's quantiser or fp16 converter runs: its log calls kept off stderr and the root logger.

    The loaded modules of those packages see a stand-in ``logging`` for the
    duration and get the real one back afterwards; Python warnings they raise
    are ignored.
    """
    import logging
    import sys
    import warnings

    log = logging.getLogger("headseg.onnxruntime")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False  # the host's handlers never see the tools' chatter
    shim = _ModuleLogging(logging)
    swapped = [m for name, m in list(sys.modules.items())
               if name.startswith(prefixes) and getattr(m, "logging", None) is logging]
    for m in swapped:
        m.logging = shim
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for m in swapped:
            m.logging = logging
