"""onnxruntime on this machine: importing it, and whether it can really run on CUDA.

The one module that imports ``onnxruntime`` (lazily, so that importing
:mod:`headseg.export` costs nothing where it is not installed) and probes the
GPU.  :mod:`.policy` decides from the probe where serving runs;
:mod:`.session` runs graphs with the module.
"""

from __future__ import annotations


_telemetry_off = False


def _ort():
    """The ``onnxruntime`` module, imported on first use (an :class:`ImportError` where it is missing).

    Its telemetry is switched off before anything runs (``disable_telemetry_events``,
    onnxruntime's documented switch; it sends events only on Windows builds),
    since offline means no call out at all; every session and the quantiser get
    onnxruntime through here.
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
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True
