"""Reading user input safely and writing outputs atomically."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

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


# --------------------------------------------------------------------- outputs
#: ``--out -`` means standard output.
STDOUT = "-"

#: Pseudo file systems whose entries look writable but are not files.
_PSEUDO_ROOTS = ("/proc", "/sys", "/dev")


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _input_stats(inputs) -> list[tuple[str, os.stat_result]]:
    out = []
    for src in inputs or ():
        if src is None or str(src) == STDOUT:
            continue
        try:
            out.append((str(src), os.stat(src)))  # follows symlinks: a link to an input is that input
        except OSError:
            continue
    return out


def _check_not_input(target: Path, inputs: list[tuple[str, os.stat_result]], what: str) -> None:
    try:
        st = os.stat(target)
    except OSError:
        st = None
    real = os.path.realpath(target)
    for src, sst in inputs:
        if st is not None and _same_file(st, sst):
            raise InputError(f"{what} {target}: is the input {src} (same file); "
                             "refusing to overwrite an input, pick another output")
        if stat.S_ISDIR(sst.st_mode) and real.startswith(os.path.realpath(src) + os.sep):
            # an input folder is read recursively: a file written inside it would be an input next time
            raise InputError(f"{what} {target}: is inside the input folder {src}; pick another output")


def _probe_writable(folder: Path, what: str, target: Path) -> None:
    """Create and remove a temporary file in ``folder`` (the nearest existing one on the way to it)."""
    probe_dir = folder
    while not probe_dir.exists():
        if probe_dir.parent == probe_dir:
            break
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise InputError(f"{what} {target}: {probe_dir} is not a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".headseg-probe.", suffix=".tmp", dir=str(probe_dir))
    except OSError as exc:
        raise InputError(f"{what} {target}: cannot write in {probe_dir} ({exc.strerror or exc})") from None
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError:
        pass


def _check_pseudo(target: Path, what: str) -> None:
    real = os.path.realpath(target)
    for root in _PSEUDO_ROOTS:
        if _is_under(real, "/dev/shm"):
            continue  # a real (tmpfs) file system
        if _is_under(real, root) or _is_under(os.path.abspath(target), root):
            raise InputError(f"{what} {target}: is under {root}, not a place for output files"
                             + (" (use --out - for standard output)" if root == "/dev" else ""))


def check_output_path(out: str | os.PathLike | None, inputs=(), what: str = "--out", *,
                      ours: Callable[[Path], bool] | None = None, force: bool = False) -> Path | None:
    """Refuse, before any work, an output file that cannot or must not be written.

    ``None`` or ``-`` (standard output) pass.  Refused with :class:`InputError`
    (exit 2): a path that is one of ``inputs`` (the same file by device and
    inode, so hard links and symlinks count), a file inside an input folder, a
    directory, anything that is not a regular file, anything under ``/proc``,
    ``/sys`` or ``/dev``, and a location where no file can be created (checked
    by creating and removing a temporary file beside the target, as the atomic
    write will).  A symbolic link is judged by its target (:func:`output_target`),
    which is what gets written; a link into a missing folder is refused.  With ``ours`` (a test of whether an existing file is an output
    headseg wrote), a non-empty file that fails it is refused unless ``force``:
    headseg never overwrites what it did not write (an empty file holds nothing
    to lose).  Returns the path to write.
    """
    if out is None or str(out) == STDOUT:
        return None
    if str(out) == "":
        raise InputError(f"{what}: empty path")
    target = output_target(out)
    if target != Path(out).expanduser() and not target.parent.is_dir():
        # a dangling link into a missing folder: headseg does not make folders at the end of a link
        raise InputError(f"{what} {out}: is a symbolic link to {target}, whose folder does not exist")
    _check_pseudo(target, what)
    if target.is_dir():
        raise InputError(f"{what} {target}: is a directory; give a file name")
    if target.exists() and not target.is_file():
        raise InputError(f"{what} {target}: exists and is not a regular file")
    _check_not_input(target, _input_stats(inputs), what)
    _probe_writable(target.parent, what, target)
    if ours is not None and not force and _non_empty_file(target) and not ours(target):
        raise InputError(f"{what} {target}: exists and is not an output of headseg; refusing to overwrite it "
                         "(pass --force to replace it)")
    return target


def _non_empty_file(p: Path) -> bool:
    try:
        return p.is_file() and p.stat().st_size > 0
    except OSError:
        return False


def read_start(path: str | os.PathLike, size: int = 65536) -> bytes:
    """The first ``size`` bytes of ``path`` (b"" when it cannot be read): enough to tell what wrote a file."""
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


#: the lock file of an output ``F`` is ``.F`` + this, beside it (see :func:`output_lock`)
LOCK_SUFFIX = ".headseg-lock"


def lock_path(out: str | os.PathLike) -> Path:
    """The lock file guarding the output ``out`` (a file or a folder): hidden, beside the file it names.

    A symbolic link is followed (:func:`output_target`), so two runs writing one
    file through different names take the same lock.
    """
    p = output_target(out)
    return p.parent / f".{p.name}{LOCK_SUFFIX}"


@contextlib.contextmanager
def output_lock(out: str | os.PathLike | None, what: str = "--out") -> Iterator[None]:
    """Hold an exclusive lock on the output ``out`` for the block; a second writer is refused at once.

    ``None`` or ``-`` (standard output) take no lock.  The lock is a POSIX
    ``flock`` on :func:`lock_path` (created with the output's folder if
    needed): it dies with its process, so a killed run leaves no stale lock,
    only an empty lock file that the next run takes over.  The file is removed
    on release while still held; a process that opened it before the removal
    sees that the path no longer names its file and opens it again.  Another
    holder raises :class:`InputError` (exit 2) naming the output.
    """
    if out is None or str(out) == STDOUT:
        yield
        return
    import fcntl

    path = lock_path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{what} {out}: cannot create {path.parent} ({exc.strerror or exc})") from None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise InputError(f"{what} {out}: cannot create its lock file {path} ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InputError(f"{what} {out}: another headseg run is writing it (it holds {path.name}); "
                             "wait for it to finish or pick another output") from None
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if current is not None and _same_file(os.fstat(fd), current):
            break
        os.close(fd)  # the previous holder removed it between our open and our lock: take the new one
    try:
        yield
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)


@contextlib.contextmanager
def output_locks(outs, what: str = "--out") -> Iterator[None]:
    """:func:`output_lock` on each of ``outs`` (None entries skipped) for the block."""
    with contextlib.ExitStack() as stack:
        for out in outs:
            stack.enter_context(output_lock(out, what))
        yield


#: errno values that mean an output could not be written (disk full, quota, too large, I/O, read-only)
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def check_output_dir(out: str | os.PathLike, inputs=(), files=(), what: str = "--out") -> Path:
    """:func:`check_output_path` for an output folder and the ``files`` that will be written in it."""
    if str(out) in ("", STDOUT):
        raise InputError(f"{what} needs a directory, not '{out}'")
    target = Path(out).expanduser()
    _check_pseudo(target, what)
    if target.exists() and not target.is_dir():
        raise InputError(f"{what} {target}: exists and is not a directory")
    stats = _input_stats(inputs)
    for src, sst in stats:
        if target.exists() and _same_file(os.stat(target), sst):
            raise InputError(f"{what} {target}: is the input folder {src}; pick another output folder")
    for name in files:
        if (target / name).is_symlink():
            # writing through it would replace a file outside the folder that headseg did not write
            raise InputError(f"{what} {target}: {name} in it is a symbolic link; headseg writes its own files "
                             "there, pick another output folder or remove the link")
        _check_not_input(target / name, stats, what)
    _probe_writable(target, what, target)
    return target


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
