"""Reading user input safely and writing outputs atomically."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from .errors import InputError

#: Inputs above this size are refused unless the caller raises the limit.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def decode_text(data: bytes, source: str, encoding: str = "utf-8") -> str:
    """Decode bytes to text, refusing binary data and undecodable input."""
    if b"\x00" in data[:65536] and not encoding.lower().replace("-", "").startswith("utf16"):
        raise InputError(f"{source}: looks like a binary file (NUL bytes); headseg reads text")
    try:
        text = data.decode(encoding)
    except LookupError:
        raise InputError(f"unknown encoding '{encoding}'") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{source}: not valid {encoding} at byte {exc.start}; pass --encoding (e.g. latin-1) if it is text"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


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
        p = Path(path)
        if not p.exists():
            raise InputError(f"{source}: no such file")
        if p.is_dir():
            raise InputError(f"{source}: is a directory, not a file")
        try:
            size = p.stat().st_size
            if size > max_bytes:
                raise InputError(f"{source}: {size:,} bytes is over the limit of {max_bytes:,} (raise it with --max-bytes)")
            with open(p, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except PermissionError:
            raise InputError(f"{source}: permission denied") from None
        except OSError as exc:
            raise InputError(f"{source}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise InputError(f"{source}: input is over the limit of {max_bytes:,} bytes (raise it with --max-bytes)")
    text = decode_text(data, source, encoding)
    if not allow_empty and not text.strip():
        raise InputError(f"{source}: empty input (nothing but whitespace)")
    return text


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and rename, so a crash never leaves half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; give the file the mode a plain open() would have
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def atomic_save_npz(path: str | os.PathLike, **arrays) -> None:
    """``numpy.savez_compressed`` through a temporary file."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())
