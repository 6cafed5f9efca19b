"""onnxruntime on this machine: importing it, and whether it can really run on CUDA.

The one module that imports ``onnxruntime`` (lazily, so that importing
:mod:`headseg.export` costs nothing where it is not installed) and probes the
GPU.  :mod:`.policy` decides from the probe where serving runs;
:mod:`.session` runs graphs with the module.
"""

from __future__ import annotations


def _ort():
    """The ``onnxruntime`` module, imported on first use (an :class:`ImportError` where it is missing)."""
    import onnxruntime as ort

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
