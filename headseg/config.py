"""The segmenter's configuration: what model, heads and engine a :class:`~headseg.Segmenter` is built from.

:class:`SegmenterConfig` is the one place these settings are declared.  Each
field carries its command-line flag (``cli`` metadata,
:func:`headseg.analysis.settings.flag`), so ``headseg segment``, ``headseg
serve`` and the other commands make their flags from it
(:func:`add_config_flags`) and read them back (:meth:`SegmenterConfig.from_args`);
the framework adapters, the Ray engine and the service build their segmenter
from one; a resumed run must share the fields marked ``resume``
(:meth:`SegmenterConfig.resume_settings`).  Adding a setting is one field here
and the code that uses it.  Validated once, on construction, before any model
is loaded.

What the text is cut into and under which limits are the segmentation options
(:class:`~headseg.segmenter.options.SegmentOptions`), per call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from headseg.analysis.errors import ArtifactError, DeviceError, HeadsegError, InputError, is_integer, shown
from headseg.analysis.settings import add_flags, flag, merged, resume_names, values_from_args
from headseg.analysis.text import WINDOW_TOKENS
from headseg.export.artifact import PRECISIONS
from headseg.export.backends import backend_help, backend_names
from headseg.segmenter.pipeline import UNIT_MODES

#: ``--device`` has one meaning in every command: where the model runs
DEVICES = ("auto", "cpu", "cuda")

#: the commands whose segmenter is built from the full configuration (the others take a few fields)
_SEGMENTING = ("segment",)


@dataclass(frozen=True)
class SegmenterConfig:
    """The model, heads and engine of a segmenter, and its batch sizes; see :class:`headseg.Segmenter`.

    Raises :class:`HeadsegError` (``DeviceError`` for the device,
    ``ArtifactError`` for the precision) on a bad value.
    """

    #: a local Hugging Face model directory or a cached hub id (None: the embedded all-MiniLM-L6-v2)
    model: str | os.PathLike | None = field(default=None, metadata=flag(
        "--model", "local Hugging Face model directory or cached hub id (default: embedded all-MiniLM-L6-v2)",
        metavar="PATH", resume=True))
    #: a head profile written by ``headseg study`` (None: the model's shipped or fallback profile)
    profile: str | os.PathLike | None = field(default=None, metadata=flag(
        "--profile", "head profile from `headseg study` (default: the one shipped for the embedded model)",
        metavar="HEADS.json", resume=True))
    #: an artifact written by ``headseg export --out DIR`` to serve (its profile is the default profile)
    artifact: str | os.PathLike | None = field(default=None, metadata=flag(
        "--artifact", "serve this exported artifact (from `headseg export --out DIR`)", metavar="DIR",
        resume=True, commands=("segment", "serve")))
    #: what serves the model: a registered backend (``auto``: ONNX, torch where ONNX cannot serve)
    backend: str = field(default="auto", metadata=flag(
        "--backend", backend_help, choices=backend_names, resume=True))
    #: ONNX precision instead of the device's default (int8 on CPU, fp16 on CUDA)
    precision: str | None = field(default=None, metadata=flag(
        "--precision", "ONNX precision (default: int8 on CPU, fp16 on CUDA; fp32 gives exactly the torch "
                       "path's boundaries)", choices=PRECISIONS, resume=True))
    #: where the model runs (``auto``/None: CUDA when usable, else CPU)
    device: str | None = field(default="auto", metadata=flag(
        "--device", "where the model runs: cuda when a GPU is usable (auto), cpu or cuda (default auto)",
        choices=DEVICES))
    #: onnxruntime threads (int8 on CPU: windows run side by side; None: one per core)
    threads: int | None = field(default=None, metadata=flag(
        "--threads", "model threads (default: one per core): int8 on CPU runs that many windows side by "
                     "side, other precisions use them as intra-op threads", type=int,
        commands=("segment", "serve")))
    #: model windows per capture call
    batch_size: int = field(default=64, metadata=flag(
        "--batch-size", "model windows per forward pass", type=int, commands=_SEGMENTING))
    #: the model window in tokens, special tokens included (at most the model's positions)
    window_tokens: int = WINDOW_TOKENS
    #: how units are found (:data:`~headseg.segmenter.pipeline.UNIT_MODES`)
    unit_mode: str = field(default="auto", metadata=flag(
        "--unit-mode", "units from sentence rules with the heads' block detector for long unpunctuated "
                       "stretches (auto), rules only, or the heads' detector everywhere",
        choices=UNIT_MODES, resume=True, commands=_SEGMENTING))
    #: no warning on the ``headseg`` logger when ``auto`` falls back to torch
    quiet: bool = False

    def __post_init__(self) -> None:
        names = backend_names()
        if not isinstance(self.backend, str) or self.backend not in names:
            raise HeadsegError(f"unknown backend {self.backend!r} (use {', '.join(names[:-1])} or {names[-1]})")
        if self.device not in (None, *DEVICES):
            raise DeviceError(f"unknown device {self.device!r} (use cpu, cuda or auto)")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise ArtifactError(f"unknown precision {self.precision!r} (use {', '.join(PRECISIONS)})")
        if self.unit_mode not in UNIT_MODES:
            raise HeadsegError(f"unit_mode must be {', '.join(UNIT_MODES[:-1])} or {UNIT_MODES[-1]} "
                               f"(got {shown(self.unit_mode)})")
        if not is_integer(self.batch_size) or self.batch_size < 1:
            raise HeadsegError("batch_size must be a positive integer")
        if not is_integer(self.window_tokens) or self.window_tokens < 8:
            raise HeadsegError(f"window_tokens must be an integer of at least 8 (got {shown(self.window_tokens)})")
        if self.threads is not None and (not is_integer(self.threads) or self.threads < 1):
            raise HeadsegError(f"threads must be a positive integer (got {shown(self.threads)})")
        for name in ("model", "profile", "artifact"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, (str, os.PathLike)):
                raise HeadsegError(f"{name} must be a path or a name (got {type(v).__name__})")
        if self.artifact is not None and self.backend == "torch":
            raise HeadsegError("an artifact is served by the onnx backend, not torch")

    @classmethod
    def of(cls, config: "SegmenterConfig | Mapping[str, Any] | None" = None, **overrides: Any) -> "SegmenterConfig":
        """``config`` (an object, a mapping of fields, or None for the defaults) with ``overrides`` applied;
        unknown names raise :class:`HeadsegError`."""
        return merged(cls, config, overrides, "config", "setting(s) for the segmenter")

    @classmethod
    def from_args(cls, args: Any, **overrides: Any) -> "SegmenterConfig":
        """The configuration of parsed command-line ``args`` (flags from :func:`add_config_flags`); a bad
        value is an :class:`InputError` naming the flag."""
        values = values_from_args(cls, args)
        values.update(overrides)
        try:
            return cls(**values)
        except (DeviceError, ArtifactError):
            raise
        except HeadsegError as exc:
            # "threads must be ..." is "--threads must be ..." on the command line
            reason = str(exc)
            name = reason.split(" ", 1)[0]
            raise InputError(f"--{reason.replace(name, name.replace('_', '-'), 1)}" if name in config_names()
                             else reason) from None

    def resume_settings(self) -> dict[str, Any]:
        """What a resumed run must share with the interrupted one (the fields marked ``resume``)."""
        return {name: _plain(getattr(self, name)) for name in resume_names(SegmenterConfig)}


def _plain(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def config_names() -> tuple[str, ...]:
    """Every field of :class:`SegmenterConfig`, in declaration order."""
    return tuple(f.name for f in fields(SegmenterConfig))


def add_config_flags(parser: Any, *names: str, command: str | None = None,
                     helps: Mapping[str, str] | None = None) -> None:
    """Declare the flags of :class:`SegmenterConfig` fields ``names`` (all of them, or those ``command``
    offers, when none are named) on an argparse parser; ``helps``: another help per field here."""
    add_flags(parser, SegmenterConfig, include=names or None, command=command if not names else None,
              helps=helps)
