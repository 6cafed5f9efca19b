"""The serving policy: which engine and device serve ``auto``, and which precision is served by default.

Three rules, decided here and nowhere else:

* ``auto`` means CUDA when onnxruntime really works on it
  (:func:`~.runtime.cuda_provider_works`), else CPU (:func:`serving_device`);
* each device has one default precision (int8 on CPU, fp16 then fp32 on CUDA:
  :func:`precision_preference`);
* on a GPU host whose onnxruntime has no CUDA provider (torch sees the GPU,
  onnxruntime does not), ``--backend auto`` serves whichever engine
  benchmarks/gpu.sh measured faster for the whole segmenter there
  (:func:`choose_engine`, from :data:`GPU_MEASUREMENT`), and says which in one line.

The sessions (:mod:`.session`), the artifact cache (:mod:`.provision`), the
backend registry (:mod:`.backends`) and ``headseg export`` all ask these functions.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from .runtime import cuda_driver_loads, cuda_provider_works


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


@dataclass(frozen=True)
class GpuMeasurement:
    """What ``benchmarks/gpu.sh`` measured on one GPU host: the two numbers :func:`choose_engine` compares.

    Both are document tokens per second of the whole segmenter (tokenization,
    windows, capture, pooling, search) on the dev pack's documents.  The ONNX
    figure is per core, since it scales with the host's cores and the torch-CUDA
    figure does not.
    """

    #: the GPU it ran on, as torch names it
    gpu: str
    #: torch on CUDA, at its best batch size
    torch_cuda_tokens_per_s: float
    #: ONNX int8 on the CPU with every core, divided by ``cores``
    onnx_int8_tokens_per_s_per_core: float
    #: the cores of that host
    cores: int


#: the measurement the ``auto`` choice on a GPU host reads; None until benchmarks/gpu.sh has run on a GPU
#: (issue 50): ``auto`` then keeps the engine measured on CPU (ONNX int8) and says so
GPU_MEASUREMENT: GpuMeasurement | None = None


@dataclass(frozen=True)
class EngineChoice:
    """What ``--backend auto`` serves on a host where torch sees a GPU: an engine, a device, and why."""

    #: ``"onnx"`` or ``"torch"``
    backend: str
    #: ``"cpu"`` or ``"cuda"``
    device: str
    #: the one line said on stderr (which engine runs and why)
    reason: str


def torch_gpu_name() -> str | None:
    """The name of the GPU torch sees here, or None.

    torch is imported only where it is installed and an NVIDIA driver loads
    (``libcuda.so.1``): on a machine without one this costs no torch import.
    """
    if importlib.util.find_spec("torch") is None or not cuda_driver_loads():
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return str(torch.cuda.get_device_name(0))
    except Exception:  # a torch that cannot start CUDA (or import) here is no GPU for serving
        return None


def host_cores() -> int:
    """The cores this process may run on (its affinity where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose_engine(device: str | None, gpu: str | None, cores: int, precision: str | None = None,
                  measured: GpuMeasurement | None = None) -> EngineChoice | None:
    """``--backend auto`` on a host where onnxruntime has no usable CUDA provider; None: the plain rule holds.

    ``device``: what was asked (``auto``/None or ``cuda``; ``cpu`` never comes
    here); ``gpu``: the GPU torch sees (:func:`torch_gpu_name`), None for none;
    ``precision``: the precision asked for, None for the default;
    ``measured``: :data:`GPU_MEASUREMENT`, None when not measured.

    * no GPU for torch either: None (ONNX on the CPU, or the CUDA error for ``cuda``);
    * ``cuda`` asked for: torch on CUDA, the only engine that can honour it here;
    * ``auto``, a precision only ONNX serves (int8, fp16): ONNX on the CPU, said;
    * ``auto``, not measured: ONNX on the CPU, the engine measured on CPU, said;
    * ``auto``, measured: torch on CUDA when its measured document tokens/s beat
      the ONNX figure per core times this host's ``cores``, else ONNX on the CPU.
    """
    if gpu is None:
        return None
    no_provider = "onnxruntime has no CUDA provider here"
    if device == "cuda":
        return EngineChoice("torch", "cuda", f"serving with torch on CUDA ({gpu}): {no_provider}")
    onnx = f"ONNX {precision or precision_preference('cpu')[0]} on the CPU"
    keep = f"serving {onnx}, not torch on the GPU ({gpu}): {no_provider}"
    if precision not in (None, "fp32"):
        return EngineChoice("onnx", "cpu", f"{keep} and torch runs fp32, not {precision}")
    if measured is None:
        return EngineChoice("onnx", "cpu", f"{keep} and torch-CUDA's speed is not measured yet "
                                           "(benchmarks/gpu.sh); --backend torch --device cuda uses the GPU")
    cpu = measured.onnx_int8_tokens_per_s_per_core * cores
    figures = (f"{measured.torch_cuda_tokens_per_s:,.0f} document tokens/s with torch on {measured.gpu} against "
               f"about {cpu:,.0f} for ONNX int8 on {cores} cores (benchmarks/gpu.sh)")
    if measured.torch_cuda_tokens_per_s > cpu:
        return EngineChoice("torch", "cuda", f"serving with torch on CUDA ({gpu}): {no_provider}, and it "
                                             f"measured {figures}")
    return EngineChoice("onnx", "cpu", f"{keep}: measured {figures}")
