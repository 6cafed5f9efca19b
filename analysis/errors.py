"""One exception hierarchy for headseg.

Every error a user can cause (bad input, unsupported model, mismatched artifact)
is raised as a subclass of :class:`HeadsegError`; the CLI translates these into a
one-line message and a non-zero exit code.  Anything else is a bug.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def is_integer(value: Any) -> bool:
    """Whether ``value`` is an integer (Python's or numpy's) and not a bool (an int subclass that is
    never a count): the check every integer argument and option of headseg makes."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def shown(value: Any) -> str:
    """``value`` for an error message: its repr, or its type and size where that would be longer than a
    line's share (40 characters): a pasted paragraph or a 5,000-digit number given as an option must not
    fill the message.  An int's size is read from its bits: repr() of one over 4,300 digits is a
    ValueError (Python's limit)."""
    if is_integer(value) and int(value).bit_length() > 128:
        return f"an integer of about {int(int(value).bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__} of {len(text)} characters"


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first non-empty line of an exception's message (its type name if it has none), at most ``limit`` chars."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:limit]


class HeadsegError(Exception):
    """Base class of every error headseg raises on purpose."""

    exit_code = 1


class InputError(HeadsegError):
    """Unreadable, binary, non-UTF-8, empty or oversized input."""

    exit_code = 2


class ModelError(HeadsegError):
    """A model that cannot be found, loaded, or is not a supported encoder."""

    exit_code = 3


class ProfileError(HeadsegError):
    """A head profile that is malformed or belongs to another model."""

    exit_code = 4


class ArtifactError(HeadsegError):
    """An exported ONNX artifact that is missing, corrupt or does not match."""

    exit_code = 5


class DeviceError(HeadsegError):
    """A device (e.g. CUDA) that was asked for but is not available."""

    exit_code = 6
