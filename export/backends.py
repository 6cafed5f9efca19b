"""The capture backends by name, and :func:`make_backend`, the one place a backend is chosen.

Each backend is a factory registered here with :func:`register_backend`, next
to its definition; the command line (choices, help) and the library's checks
read the names from :func:`backend_names`, so a new backend is its factory
plus its engine module.  The registry's order is the order users see:
``auto``, ``onnx``, ``torch``.

A factory is called as ``factory(loaded, profile, device=..., artifact=...,
precision=..., export=..., threads=..., quiet=...)`` with arguments already
checked by :func:`make_backend`, and returns a
:class:`~headseg.analysis.capture.CaptureBackend`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Callable

from headseg.analysis.capture import CaptureBackend, TorchBackend
from headseg.analysis.errors import ArtifactError, DeviceError, HeadsegError, first_line
from headseg.analysis.model import LoadedModel
from headseg.analysis.profile import HeadProfile
from headseg.analysis.registry import Registry

from . import policy
from .artifact import PRECISIONS
from .policy import EngineChoice, choose_engine
from .runtime import cuda_provider_works
from .provision import onnx_backend

logger = logging.getLogger("headseg")

#: what a backend factory is: ``(loaded, profile, **checked keyword arguments) -> CaptureBackend``
BackendFactory = Callable[..., CaptureBackend]


@dataclass(frozen=True)
class _Entry:
    """One registered backend: its factory and its one-clause description for ``--help``."""

    factory: BackendFactory
    help: str


#: the backends by name, in the order users see (``auto``, ``onnx``, ``torch``)
BACKENDS: Registry[_Entry] = Registry("backend")


def register_backend(name: str, help: str) -> Callable[[BackendFactory], BackendFactory]:
    """Decorator: register the decorated factory as backend ``name``; ``help`` is one clause for ``--help``.

    Refuses a name that is already taken (a second factory would silently
    replace the first).
    """
    return BACKENDS.register(name, lambda factory: _Entry(factory, help))


def backend_names() -> tuple[str, ...]:
    """The registered backend names, in registry order (``auto``, ``onnx``, ``torch``)."""
    return BACKENDS.names()


def backend_help() -> str:
    """One line for ``--backend``'s help: ``name: what it does`` for every backend, in registry order."""
    return BACKENDS.help()


def make_backend(
    loaded: LoadedModel,
    profile: HeadProfile | None = None,
    backend: str = "auto",
    device: str | None = None,
    artifact: str | os.PathLike | None = None,
    precision: str | None = None,
    export: bool = True,
    threads: int | None = None,
    quiet: bool = False,
) -> CaptureBackend:
    """The capture backend for ``loaded`` and a head ``profile`` (:class:`HeadProfile`): the one place this is decided.

    * ``"torch"``: :class:`TorchBackend` (the reference; hooks on every head).
    * ``"onnx"``: the ONNX artifact ``artifact``, or the cached one for the model,
      profile and precision; if there is none it is exported into the cache first
      (``export=True``).  Any problem is an :class:`ArtifactError`.
    * ``"auto"`` (default): as ``"onnx"``, but where ONNX cannot serve (no
      onnxruntime, no export toolchain, a cache that cannot be written, a broken
      cached artifact) it says why on the ``headseg`` logger and uses torch.
      A model built in memory (no directory) is served by torch unless an
      artifact for it is already cached.

    ``backend`` may also be a capture backend already made (returned as it is).
    ``device``: ``"auto"``/None (CUDA when usable), ``"cpu"`` or ``"cuda"``.
    ``precision``: ``fp32``, ``fp16`` or ``int8`` instead of the device's default.
    """
    if hasattr(backend, "capture"):
        return backend
    factory = BACKENDS.get(backend).factory
    if device not in (None, "auto", "cpu", "cuda"):
        raise DeviceError(f"unknown device '{device}' (use cpu, cuda or auto)")
    if precision is not None and precision not in PRECISIONS:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")
    return factory(loaded, profile, device=device, artifact=artifact, precision=precision, export=export,
                   threads=threads, quiet=quiet)


@register_backend("auto", "the ONNX engine (exported into the cache on first use), torch where it cannot serve")
def _auto_backend(loaded, profile, *, device, artifact, precision, export, threads, quiet) -> CaptureBackend:
    """ONNX where it can serve; otherwise torch, saying why (an explicit ``artifact`` never falls back).

    On a host where torch sees a GPU and onnxruntime cannot use it, the engine is
    :func:`~.policy.choose_engine`'s, said in one line on the ``headseg`` logger.
    """
    choice = None if artifact is not None else _gpu_host_choice(device, precision)
    if choice is not None:
        if not quiet:
            logger.warning(choice.reason)
        if choice.backend == "torch":
            return _torch_backend(loaded, profile, device=choice.device, artifact=None, precision=None,
                                  export=export, threads=threads, quiet=quiet)
        device = choice.device
    try:
        return onnx_backend(loaded, profile, device, artifact, precision, export, threads, quiet,
                            export_in_memory=False)
    except (ArtifactError, ImportError) as exc:
        if artifact is not None:
            if isinstance(exc, ImportError):
                raise _needs_onnxruntime(exc) from None
            raise
        if not quiet:
            logger.warning(f"serving with torch: {first_line(exc, 300)}")
        # the precision was the ONNX engine's; the fallback runs fp32, as the warning above says
        return _torch_backend(loaded, profile, device=device, artifact=None, precision=None, export=export,
                              threads=threads, quiet=quiet)


@register_backend("onnx", "ONNX or an error")
def _onnx_backend(loaded, profile, *, device, artifact, precision, export, threads, quiet) -> CaptureBackend:
    """The ONNX engine or an :class:`ArtifactError`; exports even a model built in memory."""
    try:
        return onnx_backend(loaded, profile, device, artifact, precision, export, threads, quiet,
                            export_in_memory=True)
    except ImportError as exc:
        raise _needs_onnxruntime(exc) from None


@register_backend("torch", "the reference path")
def _torch_backend(loaded, profile, *, device, artifact, precision, export, threads, quiet) -> CaptureBackend:
    """:class:`TorchBackend` on ``device`` (an artifact is refused: only ONNX serves one)."""
    if artifact is not None:
        raise HeadsegError("an artifact is served by the onnx backend, not torch")
    if precision not in (None, "fp32"):
        # asked of torch it would be silently ignored: torch runs the model in fp32
        raise HeadsegError(f"precision {precision} is served by the onnx backend; torch runs fp32")
    return TorchBackend(loaded, device=device or "auto")


def _gpu_host_choice(device: str | None, precision: str | None) -> EngineChoice | None:
    """:func:`~.policy.choose_engine` where it applies: ``auto``/``cuda`` asked, onnxruntime unable to use CUDA."""
    if device not in (None, "auto", "cuda"):
        return None
    try:
        if cuda_provider_works():
            return None
    except ImportError:
        return None  # no onnxruntime: the fallback to torch keeps the device asked (auto picks CUDA)
    return choose_engine(device, policy.torch_gpu_name(), policy.host_cores(), precision, policy.GPU_MEASUREMENT)


def _needs_onnxruntime(exc: ImportError) -> ArtifactError:
    """A missing onnxruntime, as the :class:`ArtifactError` it is for a caller that asked for ONNX."""
    return ArtifactError(f"the onnx backend needs onnxruntime ({first_line(exc)})")
