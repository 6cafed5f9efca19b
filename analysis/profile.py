"""The head profile: which heads segmentation uses, with their scores and weights.

Written by ``headseg study`` (``heads.json``), read by the segmenter, the ONNX
export and the TUI.  It records the fingerprint of the model it was made for;
using it with another model is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ProfileError
from .io import atomic_write_json

PROFILE_VERSION = 1


@dataclass
class HeadProfile:
    """Selected heads ``[(layer, head), ...]`` with per-head ``weights`` and ``scores``."""

    model_fingerprint: str
    heads: list[tuple[int, int]]
    weights: list[float]
    scores: list[float] = field(default_factory=list)
    model_name: str = ""
    num_layers: int = 0
    num_heads: int = 0
    corpus: str = ""
    parameters: dict = field(default_factory=dict)
    statistics: dict = field(default_factory=dict)
    version: int = PROFILE_VERSION

    def __post_init__(self):
        self.heads = [(int(l), int(h)) for l, h in self.heads]
        self.weights = [float(w) for w in self.weights]
        self.scores = [float(s) for s in self.scores] if self.scores else [0.0] * len(self.heads)
        if not self.heads:
            raise ProfileError("a head profile needs at least one head")
        if len(self.weights) != len(self.heads) or len(self.scores) != len(self.heads):
            raise ProfileError("a head profile needs one weight and one score per head")
        if len(set(self.heads)) != len(self.heads):
            raise ProfileError("a head profile lists a head twice")

    @property
    def deepest_layer(self) -> int:
        return max(l for l, _ in self.heads)

    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "model_fingerprint": self.model_fingerprint,
            "model_name": self.model_name,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "heads": [
                {"layer": l, "head": h, "weight": w, "score": s}
                for (l, h), w, s in zip(self.heads, self.weights, self.scores)
            ],
            "corpus": self.corpus,
            "parameters": self.parameters,
            "statistics": self.statistics,
        }

    @classmethod
    def from_dict(cls, d: dict, source: str = "profile") -> "HeadProfile":
        try:
            version = int(d.get("version", PROFILE_VERSION))
            if version > PROFILE_VERSION:
                raise ProfileError(f"{source}: profile version {version} is newer than this headseg ({PROFILE_VERSION})")
            heads = [(int(x["layer"]), int(x["head"])) for x in d["heads"]]
            return cls(
                model_fingerprint=str(d["model_fingerprint"]),
                heads=heads,
                weights=[float(x.get("weight", 1.0)) for x in d["heads"]],
                scores=[float(x.get("score", 0.0)) for x in d["heads"]],
                model_name=str(d.get("model_name", "")),
                num_layers=int(d.get("num_layers", 0)),
                num_heads=int(d.get("num_heads", 0)),
                corpus=str(d.get("corpus", "")),
                parameters=dict(d.get("parameters", {})),
                statistics=dict(d.get("statistics", {})),
                version=version,
            )
        except ProfileError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProfileError(f"{source}: not a valid head profile ({type(exc).__name__}: {exc})") from None

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "HeadProfile":
        p = Path(path)
        if not p.is_file():
            raise ProfileError(f"{path}: no such head profile file")
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ProfileError(f"{path}: cannot read head profile ({exc})") from None
        if not isinstance(d, dict):
            raise ProfileError(f"{path}: not a valid head profile (expected a JSON object)")
        return cls.from_dict(d, source=str(path))

    def hash(self) -> str:
        """Hash of what affects outputs (model, heads, weights), for artifact manifests."""
        key = json.dumps({"fp": self.model_fingerprint, "heads": self.heads, "weights": self.weights}, sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def check_model(self, info) -> None:
        """Refuse a profile made for another model (``info``: :class:`ModelInfo`)."""
        if self.model_fingerprint != info.fingerprint:
            raise ProfileError(
                f"head profile was made for model {self.model_name or '?'} ({self.model_fingerprint}), "
                f"not for {info.name} ({info.fingerprint}); run `headseg study --model ...` to make one"
            )
        for l, h in self.heads:
            if not (0 <= l < info.num_layers and 0 <= h < info.num_heads):
                raise ProfileError(f"head profile names head L{l}H{h}, which {info.name} does not have")


def default_profile_path() -> Path:
    """The profile shipped for the embedded model."""
    return Path(__file__).resolve().parent / "data" / "heads_minilm.json"
