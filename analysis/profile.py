"""The head profile: which heads segmentation uses, with their scores and weights.

Written by ``headseg study`` (``heads.json``), read by the segmenter, the ONNX
export and the TUI.  It records the fingerprint of the model it was made for;
using it with another model is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ProfileError, shown
from .reading import read_json_object
from .writing import atomic_write_json

PROFILE_VERSION = 1

#: weight of each first-layer head beside each last-layer head in the default topic
#: selection: the first layer's context vectors keep the words themselves (similarity
#: at long range), the last layer's the sentence's meaning; a quarter was best on the
#: full dev sets (docs/segmenter.md, *Which heads*)
FIRST_LAYER_TOPIC_WEIGHT = 0.25


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
    #: heads whose unit-pooled vectors are compared for *topic* segmentation
    #: (None: every head of the last layer, and of the first at a quarter of the
    #: weight); ``heads`` serve unit detection.
    topic_heads: list[tuple[int, int]] | None = None
    topic_weights: list[float] | None = None
    #: share (0 <= share < 1) of each topic unit vector's squared length given to the
    #: model's own output embedding, the unit's last hidden states mean-pooled; the
    #: heads keep the rest.  0 (the default) reads the heads alone and lets an export
    #: stop at the deepest head.  The shipped profile of the embedded model, whose
    #: output was trained for sentence similarity, sets 0.4 (docs/segmenter.md,
    #: *The model's own embedding beside the heads*).
    topic_output_weight: float = 0.0

    def __post_init__(self):
        self.heads = [(int(l), int(h)) for l, h in self.heads]
        if self.topic_heads is not None:
            self.topic_heads = [(int(l), int(h)) for l, h in self.topic_heads]
            if not self.topic_heads:
                raise ProfileError("topic_heads, when given, needs at least one head")
            if self.topic_weights is None:
                self.topic_weights = [1.0 / len(self.topic_heads)] * len(self.topic_heads)
            self.topic_weights = [float(w) for w in self.topic_weights]
            if len(self.topic_weights) != len(self.topic_heads):
                raise ProfileError("a head profile needs one topic weight per topic head")
        self.weights = [float(w) for w in self.weights]
        try:
            self.topic_output_weight = float(self.topic_output_weight)
        except (TypeError, ValueError):
            raise ProfileError(f"topic_output_weight must be a number (got {shown(self.topic_output_weight)})") from None
        if not 0.0 <= self.topic_output_weight < 1.0:
            # 1 would leave the topic heads no say (and NaN compares false to everything)
            raise ProfileError(f"topic_output_weight must be at least 0 and below 1 (got {self.topic_output_weight})")
        self.scores = [float(s) for s in self.scores] if self.scores else [0.0] * len(self.heads)
        if not self.heads:
            raise ProfileError("a head profile needs at least one head")
        if len(self.weights) != len(self.heads) or len(self.scores) != len(self.heads):
            raise ProfileError("a head profile needs one weight and one score per head")
        if len(set(self.heads)) != len(self.heads):
            raise ProfileError("a head profile lists a head twice")
        for label, ws in (("weight", self.weights), ("topic weight", self.topic_weights or [])):
            # NaN or infinity would turn every contrast into NaN: one segment, silently.
            bad = [w for w in ws if not math.isfinite(w) or w < 0]
            if bad:
                raise ProfileError(f"a head profile {label} must be a finite non-negative number (got {bad[0]})")
            if ws and sum(ws) <= 0:
                raise ProfileError(f"a head profile's {label}s are all zero")

    def topic_selection(self, num_layers: int | None = None, num_heads: int | None = None
                        ) -> tuple[list[tuple[int, int]], list[float]]:
        """Topic heads and weights; defaults to every head of the last layer, and every head
        of the first layer at :data:`FIRST_LAYER_TOPIC_WEIGHT` of their weight."""
        if self.topic_heads is not None:
            return list(self.topic_heads), list(self.topic_weights)
        L = num_layers or self.num_layers
        H = num_heads or self.num_heads
        if not L or not H:
            raise ProfileError("the profile has no topic heads and no model size to default them from")
        heads, weights = [(L - 1, h) for h in range(H)], [1.0 / H] * H
        if L > 1:
            heads += [(0, h) for h in range(H)]
            weights += [FIRST_LAYER_TOPIC_WEIGHT / H] * H
        return heads, weights

    @property
    def capture_heads(self) -> list[tuple[int, int]]:
        """Every head a segmenter reads with this profile (unit and topic heads), sorted."""
        topic, _ = self.topic_selection() if (self.topic_heads is not None or self.num_layers) else ([], [])
        return sorted(set(self.heads) | set(topic))

    @property
    def deepest_layer(self) -> int:
        """The deepest layer of any head read with this profile: an export keeps the encoder up to it."""
        return max(l for l, _ in self.capture_heads)

    @property
    def needs_output(self) -> bool:
        """Whether a segmenter reads the model's last hidden states (``topic_output_weight > 0``):
        then an export keeps the whole encoder."""
        return self.topic_output_weight > 0

    def to_dict(self) -> dict:
        """The ``heads.json`` form (what :meth:`from_dict` reads)."""
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
            "topic_heads": None if self.topic_heads is None else [
                {"layer": l, "head": h, "weight": w} for (l, h), w in zip(self.topic_heads, self.topic_weights)
            ],
            "corpus": self.corpus,
            "parameters": self.parameters,
            "statistics": self.statistics,
            **({"topic_output_weight": self.topic_output_weight} if self.topic_output_weight else {}),
        }

    @classmethod
    def from_dict(cls, d: dict, source: str = "profile") -> "HeadProfile":
        """A profile from its ``heads.json`` form; :class:`ProfileError` (naming ``source``) when it is not one."""
        try:
            version = int(d.get("version", PROFILE_VERSION))
            if version > PROFILE_VERSION:
                raise ProfileError(f"{source}: profile version {version} is newer than this headseg ({PROFILE_VERSION})")
            heads = [(int(x["layer"]), int(x["head"])) for x in d["heads"]]
            topic = d.get("topic_heads")
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
                topic_heads=None if topic is None else [(int(x["layer"]), int(x["head"])) for x in topic],
                topic_weights=None if topic is None else [float(x.get("weight", 1.0)) for x in topic],
                topic_output_weight=d.get("topic_output_weight", 0.0),
            )
        except ProfileError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProfileError(f"{source}: not a valid head profile ({type(exc).__name__}: {exc})") from None

    def save(self, path: str | os.PathLike) -> None:
        """Write the profile to ``path`` as JSON, atomically."""
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "HeadProfile":
        """Read a profile written by :meth:`save`.

        :class:`ProfileError` when the file is missing, unreadable or not a profile.
        """
        d = read_json_object(
            path, ProfileError,
            missing="{path}: no such head profile file",
            unreadable="{path}: cannot read head profile ({exc})",
            not_object="{path}: not a valid head profile (expected a JSON object)",
        )
        return cls.from_dict(d, source=str(path))

    def hash(self) -> str:
        """Hash of what affects outputs (model, heads, weights), for artifact manifests."""
        key = {"fp": self.model_fingerprint, "heads": self.heads, "weights": self.weights}
        if self.topic_heads is not None or (self.num_layers and self.num_heads):
            # the default selection too: an artifact exported for another default lacks heads
            key["topic"] = list(self.topic_selection())
        if self.topic_output_weight:
            # left out at 0, so that the artifacts of profiles written before it keep their key
            key["output"] = self.topic_output_weight
        key = json.dumps(key, sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def check_model(self, info) -> None:
        """Refuse a profile made for another model (``info``: :class:`ModelInfo`)."""
        if self.model_fingerprint != info.fingerprint:
            raise ProfileError(
                f"head profile was made for model {self.model_name or '?'} ({self.model_fingerprint}), "
                f"not for {info.name} ({info.fingerprint}); run `headseg study --model ...` to make one"
            )
        for l, h in list(self.heads) + list(self.topic_heads or []):
            if not (0 <= l < info.num_layers and 0 <= h < info.num_heads):
                raise ProfileError(f"head profile names head L{l}H{h}, which {info.name} does not have")


def default_profile_path() -> Path:
    """The profile shipped for the embedded model."""
    return Path(__file__).resolve().parent / "data" / "heads_minilm.json"


def fallback_profile(info) -> HeadProfile:
    """Every head of the last layer, equal weights (the paper's sentence-block layer),
    for units; topics read the default selection (:meth:`HeadProfile.topic_selection`).

    ``info`` is a :class:`~headseg.analysis.model.ModelInfo` (or anything with
    ``name``, ``fingerprint``, ``num_layers`` and ``num_heads``).
    """
    last = info.num_layers - 1
    heads = [(last, h) for h in range(info.num_heads)]
    return HeadProfile(
        model_fingerprint=info.fingerprint,
        heads=heads,
        weights=[1.0 / len(heads)] * len(heads),
        model_name=info.name,
        num_layers=info.num_layers,
        num_heads=info.num_heads,
        corpus=FALLBACK_CORPUS,
    )


#: the ``corpus`` of :func:`fallback_profile`, which marks a profile nobody selected
FALLBACK_CORPUS = "(none: fallback profile, last layer)"


def resolve_profile(info, profile: "HeadProfile | str | os.PathLike | None" = None) -> HeadProfile:
    """The one policy for choosing a head profile, used by every command.

    * a :class:`HeadProfile` or a path to one: used, and refused
      (:class:`ProfileError`) if it was made for another model;
    * ``None``: the profile shipped for the embedded model if it was made for
      this model, else :func:`fallback_profile` (every head of the last layer for units).
    """
    if profile is None:
        path = default_profile_path()
        if path.is_file():
            try:
                prof = HeadProfile.load(path)
                prof.check_model(info)
                return prof
            except ProfileError:
                pass
        return fallback_profile(info)
    if not isinstance(profile, (HeadProfile, str, os.PathLike)):
        raise ProfileError(f"profile must be a HeadProfile or a path to one (got {type(profile).__name__})")
    prof = profile if isinstance(profile, HeadProfile) else HeadProfile.load(profile)
    prof.check_model(info)
    return prof
