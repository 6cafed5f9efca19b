"""Reading user input safely: size limits, encodings, binary data refused, one-line errors."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from .errors import HeadsegError, InputError


#: Inputs above this size are refused unless the caller raises the limit.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


#: Byte order marks that name their encoding unambiguously; UTF-32 first, since
#: the UTF-32 LE mark begins with the UTF-16 LE one.
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


#: C0 controls that never occur in text (tab, line breaks, form feed and ESC excluded).
_BINARY_CONTROLS = re.compile(r"[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f]")


def _norm_encoding(encoding: str) -> str:
    return encoding.lower().replace("-", "").replace("_", "")


def decode_text(data: bytes, source: str, encoding: str = "utf-8") -> str:
    """Decode bytes to text, refusing binary data and undecodable input.

    With the default UTF-8, a UTF-16 or UTF-32 byte order mark selects that
    encoding (the mark is unambiguous).  Binary content is judged on the whole
    decoded text: any NUL, or control characters in more than a tenth of it.
    """
    enc = encoding
    if _norm_encoding(encoding) in ("utf8", "utf8sig"):
        for bom, name in _BOMS:
            if data.startswith(bom):
                enc, data = name, data[len(bom):]
                break
    try:
        text = data.decode(enc)
    except LookupError:
        raise InputError(f"unknown encoding '{encoding}'") from None
    except UnicodeDecodeError as exc:
        if b"\x00" in data:
            raise InputError(f"{source}: looks like a binary file (NUL bytes); headseg reads text "
                             "(for UTF-16/UTF-32 text without a byte order mark pass --encoding utf-16 or utf-32)"
                             ) from None
        raise InputError(
            f"{source}: not valid {enc} at byte {exc.start}; pass --encoding (e.g. latin-1) if it is text"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        raise InputError(f"{source}: looks like a binary file (NUL characters); headseg reads text "
                         "(for UTF-16/UTF-32 text without a byte order mark pass --encoding utf-16 or utf-32)")
    # Counting stops early: a text only needs to be shown to be below the limit.
    limit = len(text) // 10
    if limit and _BINARY_CONTROLS.search(text):
        count = 0
        for _ in _BINARY_CONTROLS.finditer(text):
            count += 1
            if count > limit:
                raise InputError(f"{source}: looks like a binary file (mostly control characters); headseg reads text")
    return text


def _read_error(source: str, exc: OSError) -> InputError:
    """The one-line error for a file the operating system refused to stat or read."""
    if isinstance(exc, PermissionError):
        return InputError(f"{source}: permission denied")
    return InputError(f"{source}: cannot read ({exc.strerror or exc})")


def file_size(path: str | os.PathLike) -> int:
    """Size in bytes of the file at ``path``; :class:`InputError` when it is missing, a directory or unreadable."""
    source = str(path)
    p = Path(path)
    if not p.exists():
        raise InputError(f"{source}: no such file")
    if p.is_dir():
        raise InputError(f"{source}: is a directory, not a file")
    try:
        return p.stat().st_size
    except OSError as exc:
        raise _read_error(source, exc) from None


def read_head(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The first ``max_bytes`` bytes of the file at ``path`` (all of a shorter file), errors as :func:`file_size`."""
    try:
        with open(path, "rb") as fh:
            return fh.read(max_bytes)
    except OSError as exc:
        raise _read_error(str(path), exc) from None


def read_text(
    path: str | os.PathLike,
    encoding: str = "utf-8",
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_empty: bool = False,
) -> str:
    """Read a text file (``-`` = stdin) with clear errors for every bad case."""
    source = str(path)
    if source == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
        source = "<stdin>"
    else:
        size = file_size(path)
        if size > max_bytes:
            raise InputError(f"{source}: {size:,} bytes is over the limit of {max_bytes:,} (raise it with --max-bytes)")
        data = read_head(path, max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{source}: input is over the limit of {max_bytes:,} bytes (raise it with --max-bytes)")
    text = decode_text(data, source, encoding)
    if not allow_empty and not text.strip():
        raise InputError(f"{source}: empty input (nothing but whitespace)")
    return text


def read_json(
    path: str | os.PathLike,
    error: type[HeadsegError],
    *,
    unreadable: str,
    missing: str | None = None,
) -> Any:
    """The JSON value stored in the file at ``path``, or ``error`` raised with the caller's message.

    Each message is a :meth:`str.format` template in which ``{path}`` is ``path``
    as given.  ``unreadable`` (an I/O error, text that is not UTF-8, or not JSON)
    also gets ``{exc}``, the reason, and ``{exc_type}``, its class name.
    ``missing`` is raised when ``path`` is not a file; None leaves that case to
    ``unreadable``, for callers that have checked the file already.
    """
    p = Path(path)
    if missing is not None and not p.is_file():
        raise error(missing.format(path=path))
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise error(unreadable.format(path=path, exc=exc, exc_type=type(exc).__name__)) from None


def read_json_object(
    path: str | os.PathLike,
    error: type[HeadsegError],
    *,
    unreadable: str,
    not_object: str,
    missing: str | None = None,
) -> dict:
    """:func:`read_json` for a file that must hold a JSON object.

    ``not_object`` (a template with ``{path}``) is raised when the file holds
    another JSON value (a list, a number, ...).
    """
    value = read_json(path, error, unreadable=unreadable, missing=missing)
    if not isinstance(value, dict):
        raise error(not_object.format(path=path))
    return value


def read_start(path: str | os.PathLike, size: int = 65536) -> bytes:
    """The first ``size`` bytes of ``path`` (b"" when it cannot be read): enough to tell what wrote a file."""
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""
