"""Exported artifacts on disk: the directory layout, the manifest, the cache.

An artifact is a directory holding everything serving needs: ``model.onnx``,
the tokenizer (``tokenizer.json`` …), the head profile (``profile.json``) and
``manifest.json``, which records the model's fingerprint and the digest of its
weight files (so a model directory is checked by hashing files, not by loading
them).  The manifest is written last, so a directory without one is an
interrupted export, never a usable artifact; while an export moves its files
into a folder, the manifest says only that (:data:`INCOMPLETE`), so a folder
left by a killed export is still known as headseg's and exported into again.

The cache (:func:`headseg.analysis.cache.cache_root`) holds artifacts under
``onnx/<model fingerprint>-<profile hash>-<precision>/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from headseg.analysis.cache import cache_root, cached_digest
from headseg.analysis.errors import ArtifactError, InputError
from headseg.analysis.reading import read_json_object

MANIFEST_NAME = "manifest.json"
GRAPH_NAME = "model.onnx"
PROFILE_NAME = "profile.json"
#: 2: the artifact carries its tokenizer and profile, and the weights digest
MANIFEST_VERSION = 2
PRECISIONS = ("fp32", "fp16", "int8")
#: every file an export writes into its folder (the manifest last)
ARTIFACT_FILES = (GRAPH_NAME, PROFILE_NAME, "tokenizer.json", "tokenizer_config.json", MANIFEST_NAME)
#: the manifest's only entry while an export moves its files in: the folder is headseg's, and not usable
INCOMPLETE = "export_in_progress"


def cache_dir(fingerprint: str, profile_hash: str, precision: str, weights_digest: str | None = None) -> Path:
    """Where the cached artifact of one model, profile and precision lives.

    The key holds what decides the graph: the parameters (``fingerprint``) and,
    for a model folder, the digest of its config and weight files
    (:func:`headseg.analysis.cache.weights_digest`), so folders with the same
    files share one artifact and folders that differ (an activation in
    config.json, say) never replace each other's.
    """
    if precision not in PRECISIONS:
        raise ArtifactError(f"unknown precision '{precision}' (use {', '.join(PRECISIONS)})")
    model = f"{fingerprint}-{weights_digest[:12]}" if weights_digest else fingerprint
    return cache_root() / "onnx" / f"{model}-{profile_hash}-{precision}"


def _is_headseg_manifest(path: Path) -> bool:
    """Whether ``path`` is a manifest headseg wrote (any version): the folder is then an artifact of ours."""
    import json

    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(d, dict) and (d.get(INCOMPLETE) is True
                                    or all(k in d for k in ("model_fingerprint", "profile_hash", "graph_sha256")))


def check_out_dir(out: str | os.PathLike, force: bool = False) -> None:
    """Refuse (:class:`InputError`, exit 2) an export folder whose files headseg could clobber.

    Accepted: a missing or empty folder, or an artifact headseg wrote (its
    manifest says so).  Any other folder only with ``force``, and even then
    never when it holds a file of an artifact's names (``tokenizer.json`` …)
    that headseg did not write: that file would be replaced.
    """
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    try:
        names = {e.name for e in out.iterdir()}
    except OSError as exc:
        raise InputError(f"--out {out}: cannot be read ({exc.strerror or exc})") from None
    if not names or _is_headseg_manifest(out / MANIFEST_NAME):
        return
    clash = sorted(names & set(ARTIFACT_FILES))
    if clash:
        raise InputError(f"--out {out}: holds {clash[0]}, which headseg did not write and would replace; "
                         "export into an empty or new folder")
    if not force:
        raise InputError(f"--out {out}: folder is not empty and is not a headseg artifact; export into an empty "
                         "or new folder, or pass --force to add the artifact beside its files")


@dataclass
class Manifest:
    """What an artifact was made from and how well it matched torch at export time."""

    model_name: str
    model_fingerprint: str
    profile_hash: str
    heads: list[tuple[int, int]]
    precision: str
    opset: int
    outputs: list[str]
    truncated: bool
    layers_exported: int
    num_layers: int
    head_dim: int
    graph_sha256: str
    graph_bytes: int
    versions: dict = field(default_factory=dict)
    parity: dict = field(default_factory=dict)
    version: int = MANIFEST_VERSION
    #: :func:`headseg.analysis.cache.weights_digest` of the model directory exported from
    weights_digest: str = ""
    #: the model's architecture numbers, for serving without its config
    num_heads: int = 0
    hidden_size: int = 0
    max_positions: int = 0
    model_type: str = ""

    def to_dict(self) -> dict:
        """The manifest as written to ``manifest.json`` (heads as ``[layer, head]`` pairs)."""
        d = dict(self.__dict__)
        d["heads"] = [[l, h] for l, h in self.heads]
        return d

    @classmethod
    def from_dict(cls, d: dict, source: str) -> "Manifest":
        """A manifest read from ``d`` (``source`` names the file in errors); raises :class:`ArtifactError`."""
        try:
            version = int(d.get("version", MANIFEST_VERSION))
            if version > MANIFEST_VERSION:
                raise ArtifactError(f"{source}: manifest version {version} is newer than this headseg supports")
            if version < MANIFEST_VERSION:
                raise ArtifactError(f"{source}: artifact of an older headseg (manifest version {version}); "
                                    "run `headseg export` again")
            m = cls(
                model_name=str(d["model_name"]),
                model_fingerprint=str(d["model_fingerprint"]),
                profile_hash=str(d["profile_hash"]),
                heads=[(int(l), int(h)) for l, h in d["heads"]],
                precision=str(d["precision"]),
                opset=int(d["opset"]),
                outputs=[str(o) for o in d["outputs"]],
                truncated=bool(d["truncated"]),
                layers_exported=int(d["layers_exported"]),
                num_layers=int(d["num_layers"]),
                head_dim=int(d["head_dim"]),
                graph_sha256=str(d["graph_sha256"]),
                graph_bytes=int(d["graph_bytes"]),
                versions=dict(d.get("versions", {})),
                parity=dict(d.get("parity", {})),
                version=version,
                weights_digest=str(d["weights_digest"]),
                num_heads=int(d["num_heads"]),
                hidden_size=int(d["hidden_size"]),
                max_positions=int(d["max_positions"]),
                model_type=str(d["model_type"]),
            )
        except ArtifactError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ArtifactError(f"{source}: not a valid artifact manifest ({type(exc).__name__}: {exc})") from None
        if m.precision not in PRECISIONS:
            raise ArtifactError(f"{source}: unknown precision '{m.precision}' in manifest")
        if not m.heads or "head_z" not in m.outputs:
            raise ArtifactError(f"{source}: manifest lists no heads or no head_z output")
        return m


def read_manifest(artifact_dir: str | os.PathLike) -> Manifest:
    """Read and validate ``manifest.json`` of an artifact directory (not the graph itself)."""
    d = Path(artifact_dir)
    if not d.exists():
        raise ArtifactError(f"{d}: no such artifact directory; run `headseg export` to make one")
    if not d.is_dir():
        raise ArtifactError(f"{d}: not a directory (an artifact is a directory with model.onnx and manifest.json)")
    mpath = d / MANIFEST_NAME
    if not mpath.is_file():
        raise ArtifactError(f"{d}: no {MANIFEST_NAME} (not an artifact, or an interrupted export); run `headseg export` again")
    raw = read_json_object(
        mpath, ArtifactError,
        unreadable="{path}: unreadable manifest ({exc_type})",
        not_object="{path}: not a valid artifact manifest (expected a JSON object)",
    )
    if raw.get(INCOMPLETE) is True:
        raise ArtifactError(f"{d}: an interrupted export (its files are a mix of two exports); "
                            "run `headseg export` again")
    return Manifest.from_dict(raw, str(mpath))


def check_graph_file(artifact_dir: str | os.PathLike, manifest: Manifest) -> Path:
    """The graph path, after checking that it exists and is the file the manifest describes."""
    g = Path(artifact_dir) / GRAPH_NAME
    if not g.is_file():
        raise ArtifactError(f"{g}: missing ONNX graph; run `headseg export` again")
    size = g.stat().st_size
    # Size first: a truncated copy is caught without hashing the whole file; the
    # digest is remembered per file version, so a cached graph is hashed once.
    if size != manifest.graph_bytes or cached_digest(g) != manifest.graph_sha256:
        raise ArtifactError(f"{g}: corrupt ONNX graph (checksum does not match the manifest); run `headseg export` again")
    return g


def check_matches(manifest: Manifest, fingerprint: str | None, profile_hash: str | None, source: str,
                  weights_digest: str | None = None) -> None:
    """Refuse an artifact made for another model (by fingerprint or weight-file digest) or head profile."""
    if weights_digest is not None and manifest.weights_digest != weights_digest:
        raise ArtifactError(
            f"{source}: artifact was exported from model {manifest.model_name}, whose weight files differ "
            f"from the model in use; pass the same --model, or run `headseg export` for this model"
        )
    if fingerprint is not None and manifest.model_fingerprint != fingerprint:
        raise ArtifactError(
            f"{source}: artifact was exported from model {manifest.model_name} ({manifest.model_fingerprint}), "
            f"not from the loaded model ({fingerprint}); run `headseg export` for this model"
        )
    if profile_hash is not None and manifest.profile_hash != profile_hash:
        raise ArtifactError(
            f"{source}: artifact was exported for head profile {manifest.profile_hash}, "
            f"not for the profile in use ({profile_hash}); run `headseg export --profile ...` again"
        )
