"""Guarding outputs before any work: paths that must not be written are refused, one writer per output.

What is refused, and why, is in :func:`check_output_path`; the locks in
:func:`output_lock`.  How a file is then written is :mod:`.writing`'s.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from .errors import InputError
from .writing import STDOUT, output_target


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


#: how much longer than an output's name the longest file headseg writes beside it is (its lock, ``.NAME`` +
#: :data:`LOCK_SUFFIX`; a temporary file is ``.NAME.XXXXXXXX.tmp``, a journal ``NAME.journal``)
COMPANION_BYTES = 15


def _shown(path: str | os.PathLike, limit: int = 120) -> str:
    """``path`` for a message: a name thousands of bytes long is cut in the middle."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2 + 3:]}"


def _nearest_folder(path: Path) -> Path:
    folder = path.parent
    while not folder.is_dir() and folder.parent != folder:
        folder = folder.parent
    return folder


def check_name_length(target: str | os.PathLike, what: str = "--out") -> None:
    """Refuse (exit 2) an output whose name, or the name of a file headseg writes beside it, or whose whole path
    is longer than the file system allows: one line before any work, not an ``OSError`` when the file is made."""
    p = Path(os.path.abspath(Path(target).expanduser()))
    try:
        name_max = os.pathconf(_nearest_folder(p), "PC_NAME_MAX")
        path_max = os.pathconf(_nearest_folder(p), "PC_PATH_MAX")
    except (OSError, ValueError):
        return  # no limits to read here: creating the file will tell
    longest = max((len(os.fsencode(part)) for part in p.parts), default=0)
    name = len(os.fsencode(p.name))
    if longest > name_max or name + COMPANION_BYTES > name_max:
        raise InputError(f"{what} {_shown(target)}: the name is too long for this file system ({max(longest, name)} "
                         f"bytes; an output's name may have {name_max - COMPANION_BYTES}: headseg writes files "
                         "beside it named after it)")
    if len(os.fsencode(str(p))) + COMPANION_BYTES >= path_max:
        raise InputError(f"{what} {_shown(target)}: the path is too long for this file system "
                         f"({len(os.fsencode(str(p))):,} bytes; at most {path_max - COMPANION_BYTES - 1:,})")


def check_not_cache(target: str | os.PathLike, what: str = "--out", hint: str = "") -> None:
    """Refuse (exit 2) an output inside headseg's cache: the cache is headseg's own, never an output.

    A file there (a new one too) would replace or sit beside a cached graph or
    record that serving trusts; a link is judged by where it leads.
    """
    from .cache import cache_root

    root = os.path.realpath(cache_root())
    if _is_under(os.path.realpath(target), root) or _is_under(os.path.abspath(target), root):
        raise InputError(f"{what} {target}: is inside headseg's cache {root}, which is never an output; "
                         f"pick another place{hint}")


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
    which is what gets written; a link into a missing folder is refused.
    With ``ours`` (a test of whether an existing file is an output headseg
    wrote), a non-empty file that fails it is refused unless ``force``:
    headseg never overwrites what it did not write (an empty file holds nothing
    to lose).  Returns the path to write.
    """
    if out is None or str(out) == STDOUT:
        return None
    if str(out) == "":
        raise InputError(f"{what}: empty path")
    check_name_length(out, what)
    try:
        return _check_output_file(out, inputs, what, ours, force)
    except OSError as exc:  # one the checks above did not foresee: still one line, before any work
        raise InputError(f"{what} {_shown(out)}: {exc.strerror or exc}") from None


def _check_output_file(out: str | os.PathLike, inputs, what: str, ours: Callable[[Path], bool] | None,
                       force: bool) -> Path:
    target = output_target(out)
    if target != Path(out).expanduser() and not target.parent.is_dir():
        # a dangling link into a missing folder: headseg does not make folders at the end of a link
        raise InputError(f"{what} {out}: is a symbolic link to {target}, whose folder does not exist")
    _check_pseudo(target, what)
    check_not_cache(target, what)
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


def check_output_dir(out: str | os.PathLike, inputs=(), files=(), what: str = "--out") -> Path:
    """:func:`check_output_path` for an output folder and the ``files`` that will be written in it."""
    if str(out) in ("", STDOUT):
        raise InputError(f"{what} needs a directory, not '{out}'")
    check_name_length(out, what)
    try:
        return _check_output_folder(out, inputs, files, what)
    except OSError as exc:  # one the checks above did not foresee: still one line, before any work
        raise InputError(f"{what} {_shown(out)}: {exc.strerror or exc}") from None


def _check_output_folder(out: str | os.PathLike, inputs, files, what: str) -> Path:
    target = Path(out).expanduser()
    _check_pseudo(target, what)
    check_not_cache(target, what)
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
