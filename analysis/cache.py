"""headseg's on-disk cache: where it is, digests of large files, model fingerprints, locks.

The cache is ``$HEADSEG_CACHE`` if set, else the platform's user cache folder
(``~/.cache/headseg`` on Linux).  Everything written here is written through a
temporary file and a rename, so a reader never sees half a file and two
processes can share the cache.  A cache that cannot be written is not an error
for readers: the small records below are then simply recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Iterator

from .errors import ArtifactError, ModelError

#: weight files hashed to identify a model directory without loading it
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")


def cache_root() -> Path:
    """``$HEADSEG_CACHE`` if set, else the user cache folder for headseg."""
    env = os.environ.get("HEADSEG_CACHE")
    if env:
        return Path(env).expanduser()
    try:
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("headseg", appauthor=False))
    except ImportError:  # platformdirs is a dependency; keep working without it
        return Path.home() / ".cache" / "headseg"


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 digest of the file at ``path``, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_dev}"


def _record_path(kind: str, key: str) -> Path:
    return cache_root() / kind / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def _read_record(kind: str, key: str) -> dict | None:
    # A record someone else could have written is not trusted: it decides cache keys.
    if cache_unsafe(_record_path(kind, key)):
        return None
    try:
        data = json.loads(_record_path(kind, key).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def _write_record(kind: str, key: str, data: dict) -> bool:
    """Best effort: False if the cache cannot be written."""
    from .writing import atomic_write_json

    try:
        path = _record_path(kind, key)
        if cache_unsafe(path):
            return False
        private_dir(path.parent)
        atomic_write_json(path, {"key": key, **data})
        # the atomic write gives the umask's mode (0664 under umask 002), which _read_record would refuse
        make_private(path)
        return True
    except OSError:
        return False


def cached_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file, remembered by its path, size, mtime and inode (as git's index does).

    A large file (a 90 MB weight file or graph) is hashed once; later calls only
    ``stat`` it.  Any change of size, mtime or inode hashes it again.
    """
    p = Path(path)
    key = _stat_key(p)
    rec = _read_record("digests", key)
    if rec is not None and isinstance(rec.get("sha256"), str):
        return rec["sha256"]
    digest = file_sha256(p)
    _write_record("digests", key, {"sha256": digest})
    return digest


def weight_files(model_dir: str | os.PathLike) -> list[Path]:
    """The weight files a model folder is loaded from, as transformers picks them: safetensors first.

    Only those decide the model, so a ``pytorch_model.bin`` lying beside a
    ``model.safetensors`` changes nothing (neither the digest nor the cache key).
    """
    d = Path(model_dir)
    if (d / "model.safetensors").is_file():
        return [d / "model.safetensors"]
    shards = sorted(d.glob("model-*-of-*.safetensors"))
    if shards:
        return shards
    if (d / "pytorch_model.bin").is_file():
        return [d / "pytorch_model.bin"]
    shards = sorted(d.glob("pytorch_model-*-of-*.bin"))
    if shards:
        return shards
    return [d / n for n in WEIGHT_FILES[2:] if (d / n).is_file()][:1]


def weights_digest(model_dir: str | os.PathLike) -> str:
    """One digest of a model directory's config and the weight files it loads, computed without loading them.

    Names and contents only: two folders holding the same files have the same digest.
    """
    d = Path(model_dir)
    weights = weight_files(d)
    if not weights:
        raise ModelError(f"{d}: no weight file ({', '.join(WEIGHT_FILES)}) to identify the model by")
    h = hashlib.sha256()
    for f in [d / "config.json"] + weights:
        h.update(f.name.encode())
        h.update(cached_digest(f).encode())
    return h.hexdigest()[:32]


def known_fingerprint(digest: str) -> str | None:
    """The model fingerprint (hash of its parameters) recorded for a weights digest, if any."""
    rec = _read_record("fingerprints", digest)
    fp = None if rec is None else rec.get("fingerprint")
    return fp if isinstance(fp, str) else None


def remember_fingerprint(digest: str, fingerprint: str) -> bool:
    """Record that the weights with ``digest`` have ``fingerprint`` (best effort)."""
    return _write_record("fingerprints", digest, {"fingerprint": fingerprint})


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, timeout: float = 600.0) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if needed), waited for up to ``timeout`` seconds.

    POSIX ``flock``: the lock dies with its process, so a killed exporter never
    leaves a stale lock behind.  Waiting longer raises :class:`ArtifactError`
    (the lock guards cached artifacts).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fh = open(p, "a+")
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: rely on atomic renames alone
            yield
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    # what could not be had is the cached artifact, not the model: exit 5, and a fallback may follow
                    raise ArtifactError(f"{p}: another process has held this lock for {timeout:.0f} s") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    finally:
        fh.close()


def writable_dir(path: str | os.PathLike) -> bool:
    """Whether files can be created in ``path`` (made if missing)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def unsafe_reason(path: str | os.PathLike, follow: bool = False) -> str | None:
    """Why ``path`` is not private to this user (another owner, or writable by group/others); None if it is.

    A missing path is not unsafe (nothing can be read from it).  Without
    ``follow`` a symbolic link is judged itself, so a link planted in the cache
    cannot point serving at another user's files.
    """
    if not hasattr(os, "geteuid"):  # pragma: no cover - Windows: ACLs, not mode bits
        return None
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be inspected ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{path} is writable by group/others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def cache_unsafe(path: str | os.PathLike, files: bool = False) -> str | None:
    """Why a path inside the cache cannot be trusted, else None.

    Checks the cache root (the folder ``$HEADSEG_CACHE`` names may be a link)
    and every existing folder from it down to ``path``; with ``files``, also
    the entries of the folder ``path``.  An artifact or record that another
    user could have written would run their graph or pick their cache key.
    """
    root = cache_root()
    why = unsafe_reason(root, follow=True)
    if why:
        return why
    p = Path(path)
    try:
        rel = p.relative_to(root)
    except ValueError:
        return None  # not in the cache: the caller named it
    cur = root
    for part in rel.parts:
        cur = cur / part
        why = unsafe_reason(cur)
        if why:
            return why
    if files and p.is_dir():
        for entry in p.iterdir():
            why = unsafe_reason(entry)
            if why:
                return why
    return None


def private_dir(path: str | os.PathLike) -> Path:
    """Make ``path`` (and missing parents) readable and writable by this user only; returns it."""
    p = Path(path)
    # mkdir(parents=True) would give the parents the default mode: make each one here.
    for d in [*reversed(p.parents), p]:
        if not d.exists():
            d.mkdir(exist_ok=True, mode=0o700)
    return p


def make_private(path: str | os.PathLike) -> None:
    """Take group/others' write bits off a folder headseg wrote and its files (umask 002 would leave them)."""
    p = Path(path)
    for entry in [p, *p.iterdir()] if p.is_dir() else [p]:
        if not entry.is_symlink():
            mode = stat.S_IMODE(entry.stat().st_mode)
            if mode & 0o022:
                entry.chmod(mode & ~0o022)
