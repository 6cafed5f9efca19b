"""Reading user input safely: size limits, encodings, binary data refused, one-line errors."""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from .errors import HeadsegError, InputError


#: Inputs above this size are refused unless the caller raises the limit.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

#: the default encoding: UTF-8, or the UTF-16/UTF-32 that a byte order mark names.  An encoding given
#: explicitly is what the caller says the bytes are, so a mark of another one contradicts it.
AUTO_ENCODING = "auto"


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


#: every byte order mark, the UTF-8 one included, with the codec family it belongs to
_MARKS = ((b"\xef\xbb\xbf", "utf-8"),) + _BOMS


#: how documents in formats that are not text begin, and what to say: headseg reads text, they are converted first
_NOT_TEXT_FORMATS = (
    (b"%PDF-", "a PDF file", "convert it to text first, e.g. `pdftotext FILE FILE.txt`"),
    (b"PK\x03\x04", "a ZIP archive (a .docx, .odt or .epub is one)", "convert it to text first"),
    (b"{\\rtf", "an RTF document", "convert it to text first"),
)


def _check_format(data: bytes, source: str) -> None:
    for magic, what, advice in _NOT_TEXT_FORMATS:
        if data.startswith(magic):
            raise InputError(f"{source}: is {what}, not text; {advice}")


def _decodes(data: bytes, encoding: str, final: bool) -> bool:
    try:
        codecs.getincrementaldecoder(encoding)().decode(data, final=final)
    except UnicodeDecodeError:
        return False
    return True


def _check_encoding(data: bytes, source: str, encoding: str, final: bool = True) -> None:
    """Refuse bytes that say they are not in ``encoding`` (given explicitly; the default reads byte order marks).

    A byte order mark of another encoding contradicts it; so do UTF-8 bytes without a single NUL read as
    UTF-16 or UTF-32: every such text of letters, spaces or line breaks has NULs, and UTF-8 read that way
    decodes without an error into CJK ideographs.
    """
    if encoding == AUTO_ENCODING:
        return
    try:
        codec = codecs.lookup(encoding).name  # "utf-16-le", "iso8859-1", ...
    except LookupError:
        raise InputError(f"unknown encoding '{encoding}'") from None
    for mark, name in _MARKS:
        if data.startswith(mark):
            # the UTF-32 LE mark begins with the UTF-16 LE one: utf-16 text may begin with it (and a NUL)
            family = codec in ("utf-16", "utf-32") and name.startswith(codec)
            utf8 = name == "utf-8" and codec in ("utf-8", "utf-8-sig")
            if not (family or utf8 or name == codec or (name == "utf-32-le" and codec == "utf-16-le")):
                raise InputError(f"{source}: begins with the {name.upper()} byte order mark, which contradicts "
                                 f"--encoding {encoding}; drop --encoding (the default reads the mark)")
            return
    if codec.startswith(("utf-16", "utf-32")) and b"\x00" not in data and len(data) >= 4 \
            and _decodes(data, "utf-8", final):
        raise InputError(f"{source}: is UTF-8 text, not {encoding} (no byte order mark and no NUL byte, which "
                         f"{encoding} text of letters and spaces has); drop --encoding")


#: what a decoding into mostly these characters did not find text in: replacement and private-use characters
_NOT_TEXT = re.compile(r"[\ufffd\ue000-\uf8ff\U000f0000-\U0010ffff]")


def decode_text(data: bytes, source: str, encoding: str = AUTO_ENCODING, final: bool = True) -> str:
    """Decode bytes to text, refusing binary data and undecodable input.

    With the default ``auto``, the text is UTF-8 unless a UTF-16 or UTF-32 byte
    order mark selects that encoding (the mark is unambiguous); with an encoding
    given, UTF-8 included, a mark that contradicts it is refused, as are UTF-8
    bytes read as UTF-16 or UTF-32.
    A PDF (or another document format) is named as such.  Binary content is
    judged on the whole decoded text: any NUL, or control characters in more
    than a tenth of it; a text of mostly replacement or private-use characters
    was decoded with the wrong encoding.  ``final`` False: ``data`` is the
    beginning of a file (:func:`check_text_file`), which may end inside a character.
    """
    _check_format(data, source)
    _check_encoding(data, source, encoding, final)
    enc = encoding
    if encoding == AUTO_ENCODING:
        enc = "utf-8"
        for bom, name in _BOMS:
            if data.startswith(bom):
                enc, data = name, data[len(bom):]
                break
    try:
        text = codecs.getincrementaldecoder(enc)().decode(data, final=final)
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
    shown = len(text) - sum(ch.isspace() for ch in text)
    if shown and len(_NOT_TEXT.findall(text)) * 2 > shown:
        raise InputError(f"{source}: decodes as {enc} into mostly replacement or private-use characters, not "
                         "text; pass the right --encoding")
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


#: how much of a text file :func:`check_text_file` reads
SNIFF_BYTES = 65536


def check_text_file(path: str | os.PathLike, encoding: str = AUTO_ENCODING, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """What :func:`read_text` would refuse in the file at ``path`` that its size and first bytes show (missing,
    a folder, unreadable, over ``max_bytes``, a PDF, binary, the wrong encoding): :class:`InputError`, found
    before any work.  What only the rest of the file can show is found when it is read."""
    source = str(path)
    size = file_size(path)
    if size > max_bytes:
        raise InputError(f"{source}: {size:,} bytes is over the limit of {max_bytes:,} (raise it with --max-bytes)")
    head = read_head(path, SNIFF_BYTES)
    decode_text(head, source, encoding, final=len(head) == size)


def read_text(
    path: str | os.PathLike,
    encoding: str = AUTO_ENCODING,
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
