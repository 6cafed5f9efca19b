"""Options that several commands share, declared once so they mean the same everywhere.

The segmentation options (``--level``, ``--max-chars``...) are declared by
:func:`headseg.segmenter.options.add_option_flags`, from the fields of
:class:`~headseg.segmenter.options.SegmentOptions`.
"""

from __future__ import annotations

import argparse
import codecs
import errno
import importlib.util
import math
import sys

from headseg.analysis.errors import InputError
from headseg.analysis.reading import AUTO_ENCODING, DEFAULT_MAX_BYTES
from headseg.config import add_config_flags

#: the modules of the per-head (torch) path: ``study``, ``inspect``, ``tui``, ``--backend torch``
TORCH_MODULES = ("torch", "transformers")


def require(*modules: str) -> None:
    """Refuse a command before any work when a module of an optional extra is missing.

    Raises :class:`ModuleNotFoundError` with the module's ``name``: the command
    line turns it into one line naming the extra to install (``EXTRAS`` in
    :mod:`headseg.cli`) and exit code 2.  Looks the modules up without importing them.
    """
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)


class StdoutClosedError(OSError):
    """What writing to a standard output that was closed when the process started raises."""


class ClosedStdout:
    """Stands in for ``sys.stdout`` when the process started without one (``>&-``: Python sets it to None), so
    that a command writing there fails as any unwritable output does, in one line, not with an AttributeError."""

    def write(self, text: str) -> int:
        if text:
            raise StdoutClosedError(errno.EBADF, "standard output is closed")
        return 0

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def stdout_closed() -> bool:
    """Whether the process started with its standard output closed (``headseg ... >&-``)."""
    return sys.stdout is None or isinstance(sys.stdout, ClosedStdout)


def add_model(p: argparse.ArgumentParser) -> None:
    """``--model PATH``: the encoder to load (default: the embedded one; :class:`SegmenterConfig`)."""
    add_config_flags(p, "model")


def add_profile(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--profile HEADS.json``: the head profile to use (``help`` replaces the default text)."""
    add_config_flags(p, "profile", helps={"profile": help} if help else None)


def add_device(p: argparse.ArgumentParser) -> None:
    """``--device``: where the model runs, one of :data:`headseg.config.DEVICES`."""
    add_config_flags(p, "device")


def add_engine(p: argparse.ArgumentParser, what: str = "") -> None:
    """``--backend`` (from the backend registry) and ``--precision``: what serves the model.

    ``what`` names the user of the engine in the help, e.g. ``"for the headseg method"``.
    """
    helps = {"backend": f"backend {what} (default auto: the ONNX engine)",
             "precision": f"ONNX precision {what} (default: the device's)"} if what else None
    add_config_flags(p, "backend", "precision", helps=helps)


def add_input(p: argparse.ArgumentParser) -> None:
    """``--encoding`` and ``--max-bytes``: how text inputs are read."""
    p.add_argument("--encoding", default=AUTO_ENCODING,
                   help="text encoding of the inputs (default auto: UTF-8, or UTF-16/UTF-32 where the input begins "
                        "with their byte order mark; a mark that contradicts an encoding given here is refused)")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="refuse larger inputs")


def add_quiet(p: argparse.ArgumentParser, help: str = "no progress bar or notes on stderr") -> None:
    """``--quiet``: no progress or notes on stderr (errors are still reported)."""
    p.add_argument("--quiet", action="store_true", help=help)


def add_force(p: argparse.ArgumentParser, what: str = "--out") -> None:
    """``--force``: replace an existing output file that headseg did not write (refused otherwise)."""
    p.add_argument("--force", action="store_true",
                   help=f"replace an existing {what} file that is not a headseg output (refused otherwise)")


def check_input(args: argparse.Namespace) -> None:
    """``--encoding`` must name a text codec and ``--max-bytes`` be positive (:class:`InputError` otherwise)."""
    try:
        if args.encoding != AUTO_ENCODING and not codecs.lookup(args.encoding)._is_text_encoding:
            raise LookupError
    except LookupError:
        raise InputError(f"--encoding: unknown text encoding '{args.encoding}'") from None
    if args.max_bytes < 1:
        raise InputError(f"--max-bytes must be at least 1 (got {args.max_bytes})")


def check_positive(args: argparse.Namespace, *names: str, minimum: int = 1) -> None:
    """Each integer flag ``names`` (attribute names) that is set must be at least ``minimum``."""
    for name in names:
        v = getattr(args, name)
        if v is not None and v < minimum:
            raise InputError(f"--{name.replace('_', '-')} must be at least {minimum} (got {v})")


def check_finite(args: argparse.Namespace, *names: str) -> None:
    """Each float flag ``names`` (attribute names) that is set must be a finite number (no nan, no inf)."""
    for name in names:
        v = getattr(args, name)
        if v is not None and not math.isfinite(v):
            raise InputError(f"--{name.replace('_', '-')} must be a finite number (got {v})")


def model_limits(model: str | None) -> tuple[int, int, int]:
    """``(layers, heads, max_positions)`` of ``--model`` from its ``config.json`` alone: no weights, no torch.

    A model that cannot be found or is not a supported encoder raises
    :class:`~headseg.analysis.errors.ModelError` (exit 3).  ``max_positions``
    is the position table's size (RoBERTa's reserved positions taken off).
    """
    from headseg.analysis.families import max_positions, read_config
    from headseg.analysis.locate import resolve_model_path

    path, name = resolve_model_path(model)
    cfg = read_config(path, name)
    return cfg["num_hidden_layers"], cfg["num_attention_heads"], max_positions(cfg, None)


def check_model_and_profile(model: str | None, profile: str | None) -> None:
    """A ``--model`` that names no model (exit 3) or a ``--profile`` that cannot be read (exit 4), found from
    their files alone (``config.json``, the profile's JSON): for commands whose methods would otherwise meet
    them only when they set up, after the data (or a whole embedding run)."""
    if model is not None:
        model_limits(model)
    if profile is not None:
        from headseg.analysis.profile import HeadProfile

        HeadProfile.load(profile)
