"""The serving policy: which device serves, and which precision is served there by default.

Two rules, decided here and nowhere else: ``auto`` means CUDA when onnxruntime
really works on it (:func:`~.runtime.cuda_provider_works`), else CPU; and each
device has one default precision (int8 on CPU, fp16 then fp32 on CUDA).  The
sessions (:mod:`.session`), the artifact cache (:mod:`.serve`) and
``headseg export`` all ask these functions.
"""

from __future__ import annotations

from .runtime import cuda_provider_works


def precision_preference(device: str) -> tuple[str, ...]:
    """The precision served by default on a device, best first.

    CPU: int8, measured on every document of every dev set to stay within 0.5
    Pk points of fp32 at about twice its speed (docs/performance.md); fp32,
    which gives exactly the torch path's boundaries, is ``precision="fp32"``.
    A cached fp32 artifact is not served in int8's place: the default is one
    precision, so results do not depend on what happens to be in the cache.
    CUDA: fp16, then fp32.
    """
    return ("fp16", "fp32") if device == "cuda" else ("int8",)


def serving_device(device: str | None = "auto") -> str:
    """``cpu`` or ``cuda``: ``auto``/None is CUDA when onnxruntime really works on it, else CPU."""
    if device in (None, "auto"):
        return "cuda" if cuda_provider_works() else "cpu"
    return device
