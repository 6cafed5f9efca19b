"""Serving from artifacts: find the cached one, export one into the cache, open one for a profile.

The cache (:func:`~.artifact.cache_dir`) holds one artifact per model, head
profile and precision.  :func:`onnx_backend` is the whole path from a loaded
model and a profile to a running :class:`~.onnx_backend.OnnxBackend`: the artifact
given, else the cached one in the device's precision (:mod:`.policy`), else a
fresh export into the cache (once, under a file lock, so concurrent processes
export it once between them).  A broken cached artifact is exported again,
never trusted.  Every failure is an :class:`ArtifactError` that says why;
:mod:`.backends` decides whether that falls back to torch.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Sequence

from headseg.analysis.cache import cache_root, cache_unsafe, file_lock, make_private, private_dir, writable_dir
from headseg.analysis.errors import ArtifactError, ModelError, first_line
from headseg.analysis.model import LoadedModel
from headseg.analysis.profile import HeadProfile

from .artifact import PROFILE_NAME, Manifest, cache_dir, check_matches, read_manifest
from .onnx_backend import OnnxBackend
from .exporter import export_artifact
from .policy import precision_preference, serving_device
from .runtime import require_cuda

logger = logging.getLogger("headseg")


def find_cached(fingerprint: str, profile_hash: str, precisions: Sequence[str],
                weights_digest: str | None = None) -> Path | None:
    """The first cached artifact directory with a manifest, in ``precisions`` order.

    Raises :class:`ArtifactError` for one that another user could have written
    (see :func:`~headseg.analysis.cache.cache_unsafe`): its graph is not run.
    """
    for p in precisions:
        d = cache_dir(fingerprint, profile_hash, p, weights_digest)
        if (d / "manifest.json").is_file():
            why = cache_unsafe(d, files=True)
            if why:
                raise ArtifactError(f"refusing the cached artifact {d}: {why} (the cache must be yours alone: "
                                    f"chmod -R go-w {cache_root()}, or set HEADSEG_CACHE)")
            return d
    return None


def _lock_path(target: Path) -> Path:
    """The lock file every exporter of the cached artifact ``target`` takes (beside it)."""
    return target.parent / f".{target.name}.lock"


def cache_target(loaded: LoadedModel, profile_hash: str, precision: str) -> Path:
    """The cache folder an export of ``loaded`` goes to, its parents made private; :class:`ArtifactError` if unsafe.

    The folder itself and its lock file are checked too: a link planted there
    would send the export's files (or the lock's) out of the cache.
    """
    target = cache_dir(loaded.info.fingerprint, profile_hash, precision, loaded.weights_digest)
    why = cache_unsafe(target) or cache_unsafe(_lock_path(target))
    if why:
        raise ArtifactError(f"refusing to export into the cache: {why} (the cache must be yours alone: "
                            f"chmod -R go-w {cache_root()}, or set HEADSEG_CACHE)")
    if os.path.lexists(target) and not target.is_dir():
        raise ArtifactError(f"refusing to export into the cache: {target} is not a directory (headseg did not "
                            "write it; remove it, or set HEADSEG_CACHE)")
    try:
        private_dir(target.parent)
    except OSError:
        pass  # reported just below, as a cache that cannot be written
    if not writable_dir(target.parent):
        raise ArtifactError(f"the cache {cache_root()} cannot be written (set HEADSEG_CACHE to a writable folder)")
    return target


def artifact_profile(artifact: str | os.PathLike, loaded: LoadedModel | None = None) -> HeadProfile:
    """The head profile an artifact was exported with (``profile.json`` inside it).

    With ``loaded``, the artifact is first checked to come from that model, so a
    mismatch is reported as what it is (an artifact of another model).
    """
    d = Path(artifact)
    manifest = read_manifest(d)  # a clear message for a missing or broken artifact first
    if loaded is not None:
        check_matches(manifest, loaded.info.fingerprint or None, None, str(d), weights_digest=loaded.weights_digest)
    if not (d / PROFILE_NAME).is_file():
        raise ArtifactError(f"{d}: no {PROFILE_NAME} in the artifact; pass --profile or run `headseg export` again")
    return HeadProfile.load(d / PROFILE_NAME)


def export_available() -> str | None:
    """None if this installation can export ONNX graphs (``onnx``, ``onnxruntime``, ``safetensors``), else why not.

    The builder (:mod:`.builder`) needs neither torch nor optimum.
    """
    for mod, pkg in (("onnx", "onnx"), ("onnxruntime", "onnxruntime"), ("safetensors", "safetensors")):
        if importlib.util.find_spec(mod) is None:
            return f"module '{mod}' is missing (pip install {pkg})"
    return None


def export_to_cache(loaded: LoadedModel, profile: HeadProfile, precision: str, device: str = "cpu",
                    quiet: bool = False) -> Path:
    """Export the profile's heads into the cache once, safely against concurrent exporters; returns the directory.

    Raises :class:`ArtifactError` with the reason if it cannot (no export
    toolchain, a cache that cannot be written or is not private).
    """
    why = export_available()
    if why:
        raise ArtifactError(f"cannot export the ONNX graph: {why}")
    target = cache_target(loaded, profile.hash(), precision)

    def announce() -> None:
        if not quiet:
            logger.warning(f"exporting the ONNX serving graph for {loaded.info.name} ({precision}) into "
                           f"{target.parent}; this happens once per model, profile and precision")

    write_cached(loaded, target, profile.capture_heads, profile.hash(), keep_existing=True, before=announce,
                 precision=precision, parity_device=device if precision == "fp16" else "cpu", profile=profile,
                 progress=not quiet)
    return target


def _finished(target: Path) -> bool:
    """Whether ``target`` holds a finished export's manifest (not a killed export's marker)."""
    try:
        read_manifest(target)
    except ArtifactError:
        return False
    return True


def write_cached(loaded: LoadedModel, target: Path, heads, profile_hash: str, keep_existing: bool = False,
                 before=None, **kwargs) -> Manifest | None:
    """Export into the cache folder ``target`` (from :func:`cache_target`) under its lock, and make it private.

    The one way an artifact is written into the cache, shared by serving and
    ``headseg export``: concurrent exporters take turns.  ``keep_existing``:
    an artifact another process finished while this one waited is kept (None
    is returned).  ``before()`` runs once the lock is held and an export will
    happen.  ``kwargs`` go to :func:`~.exporter.export_artifact`.  A folder that
    cannot be written, or weights the builder cannot read, is an :class:`ArtifactError`.
    """
    with file_lock(_lock_path(target)):
        if keep_existing and _finished(target):
            return None
        if before is not None:
            before()
        try:
            manifest = export_artifact(loaded, heads, profile_hash, target, owned=True, **kwargs)
            make_private(target)
        except OSError as exc:
            raise ArtifactError(f"cannot write the artifact into {target} ({exc.strerror or exc})") from None
        except ModelError as exc:  # weights the builder cannot read (only a pytorch_model.bin): ONNX cannot serve
            raise ArtifactError(f"cannot export the ONNX graph: {exc}") from None
    return manifest


def onnx_backend(loaded: LoadedModel, profile: HeadProfile | None, device: str | None,
                 artifact: str | os.PathLike | None, precision: str | None, export: bool, threads: int | None,
                 quiet: bool, export_in_memory: bool) -> OnnxBackend:
    """The :class:`OnnxBackend` serving ``profile``: ``artifact``, else the cached one, else a fresh export.

    ``precision`` None is the device's default (:func:`~.policy.precision_preference`);
    ``export=False`` refuses to export; ``export_in_memory=False`` refuses to
    export a model built in memory (no weight files to key the cache on), so it
    is exported only on request.  Raises :class:`ArtifactError` (or
    :class:`ImportError` without onnxruntime).
    """
    if artifact is not None:
        return open_for_profile(loaded, Path(artifact), device or "auto", profile, threads)
    if profile is None:
        raise ArtifactError("the onnx backend needs a head profile (--profile) or an artifact (--artifact)")
    require_cuda(device)  # before an export into the cache that no GPU here could serve (exit 6)
    target = serving_device(device)
    prefs = (precision,) if precision else precision_preference(target)
    directory = find_cached(loaded.info.fingerprint, profile.hash(), prefs, loaded.weights_digest)
    if directory is not None:
        try:
            return open_for_profile(loaded, directory, target, profile, threads)
        except ArtifactError as exc:
            if not export or loaded.weights_digest is None:
                raise
            # A broken cached artifact is replaced, not trusted.
            logger.warning(f"re-exporting a broken cached artifact ({first_line(exc, 300)})")
            (directory / "manifest.json").unlink(missing_ok=True)
    if not export:
        raise ArtifactError("no exported ONNX artifact for this model and profile; run `headseg export`")
    if loaded.weights_digest is None and not export_in_memory:
        raise ArtifactError("a model built in memory is exported only on request (`headseg export` or backend='onnx')")
    directory = export_to_cache(loaded, profile, prefs[0], device=target, quiet=quiet)
    return open_for_profile(loaded, directory, target, profile, threads)


def open_for_profile(loaded: LoadedModel, directory: Path, device: str, profile: HeadProfile | None,
                     threads: int | None = None) -> OnnxBackend:
    """An :class:`OnnxBackend` on ``directory``, checked to serve every head the profile's segmenter reads."""
    backend = OnnxBackend(loaded, directory, device=device, profile_hash=None if profile is None else profile.hash(),
                          threads=threads)
    if profile is not None:
        missing = sorted(set(profile.capture_heads) - set(backend.heads))
        if missing:
            names = ", ".join(f"L{l}H{h}" for l, h in missing)
            raise ArtifactError(f"{directory}: the artifact lacks head(s) {names} of the profile; run `headseg export` again")
        if profile.needs_output and "last_hidden_state" not in backend.session.output_names:
            raise ArtifactError(f"{directory}: the profile reads the model's last hidden states and the artifact "
                                "stops at the deepest head; run `headseg export --no-truncate`")
    return backend
