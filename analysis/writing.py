"""Writing outputs atomically: a temporary file beside the target, renamed over it when complete.

``-`` (:data:`STDOUT`) is standard output.  Whether a path may be written at
all is checked before any work by :mod:`.outputs`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import tempfile
from pathlib import Path


#: ``--out -`` means standard output.
STDOUT = "-"


#: errno values that mean an output could not be written (disk full, quota, too large, I/O, read-only)
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def output_target(path: str | os.PathLike) -> Path:
    """The file an output ``path`` names: the target of a symbolic link, else ``path`` itself.

    An output is written where a plain ``open(path, "w")`` would write it: a
    link the user made is kept and its target replaced, never the link itself
    (renaming a temporary file over ``path`` would delete the link and leave
    its target stale).
    """
    p = Path(path).expanduser()
    return Path(os.path.realpath(p)) if p.is_symlink() else p


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and rename, so a crash never leaves half a file."""
    with _atomic_file(Path(path), binary=True) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` to ``path`` as indented UTF-8 JSON with a final newline, atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def atomic_save_npz(path: str | os.PathLike, **arrays) -> None:
    """``numpy.savez_compressed`` through a temporary file."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def write_output(out: str | os.PathLike | None, data: str | bytes) -> None:
    """Write ``data`` to ``out`` atomically, or to standard output for ``None`` / ``-``."""
    if out is None or str(out) == STDOUT:
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(data)
            sys.stdout.flush()
        return
    atomic_write_bytes(out, data.encode("utf-8") if isinstance(data, str) else data)


@contextlib.contextmanager
def open_output(out: str | os.PathLike | None, binary: bool = False):
    """A stream to write ``out`` piece by piece: standard output for ``None`` / ``-``.

    A file is written beside the target and renamed over it only when the
    block ends without an exception, so a failed or interrupted run leaves the
    old file (or none) and no partial one.
    """
    if out is None or str(out) == STDOUT:
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    with _atomic_file(Path(out), binary=binary) as fh:
        yield fh


def temp_beside(path: str | os.PathLike) -> tuple[int, str]:
    """``(fd, name)`` of a new temporary file in the folder of :func:`output_target` of ``path`` (made if
    missing), to be renamed over it by :func:`replace_with`."""
    p = output_target(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))


def replace_with(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Rename the finished temporary file ``tmp`` (from :func:`temp_beside`) over the file ``path`` names."""
    # mkstemp creates 0600; give the file the mode a plain open() would have
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, output_target(path))


def _umask() -> int:
    """The process's umask, read without setting it where the system allows.

    ``os.umask`` can only be read by setting it: between the two calls every
    file another thread of the host process creates would get mode 0666.
    Linux reports it in ``/proc/self/status`` (since 4.7).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o077)  # the fallback's window: files created meanwhile are private, not open to all
    os.umask(umask)
    return umask


@contextlib.contextmanager
def _atomic_file(p: Path, binary: bool):
    """Write through a temporary file beside ``p``, renamed over it only if the block succeeds."""
    fd, tmp = temp_beside(p)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        replace_with(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
