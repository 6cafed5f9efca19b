"""A Hugging Face hub cache holding the default model, built from a model folder (no network).

The layout is the hub's own (``models--ORG--NAME/{blobs,refs/main,snapshots/REV/...}``,
snapshot files linking to content-addressed blobs), so ``huggingface_hub``
resolves it offline exactly as a cache it filled itself.  Used by the light
tests and by CI's light environment::

    python tests/light/hubcache.py MODEL_DIR HF_HUB_CACHE
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

#: the hub id of headseg's default model and the files the light install fetches
#: (kept equal to headseg.analysis.model's; a test checks)
REPO = "sentence-transformers/all-MiniLM-L6-v2"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
#: a made-up commit: the cache only needs refs/main to name the snapshot folder
REVISION = "0123456789abcdef0123456789abcdef01234567"


def fill_hub_cache(model_dir: str | os.PathLike, cache: str | os.PathLike, files=FILES) -> Path:
    """Copy ``files`` of ``model_dir`` into the hub cache ``cache`` as a snapshot of :data:`REPO`; returns the snapshot."""
    src = Path(model_dir)
    repo = Path(cache) / ("models--" + REPO.replace("/", "--"))
    snap = repo / "snapshots" / REVISION
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    for name in files:
        data = (src / name).read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        if not blob.exists():
            shutil.copyfile(src / name, blob)
        link = snap / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snap))
    return snap


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: hubcache.py MODEL_DIR HF_HUB_CACHE")
    print(fill_hub_cache(sys.argv[1], sys.argv[2]))
