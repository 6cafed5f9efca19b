"""The BERT-family encoders headseg reads, one table row per ``model_type``.

Everything that differs between families is declared here once, and the
loader (:mod:`headseg.analysis.model`), the safetensors reader
(:mod:`headseg.analysis.weights`) and the ONNX graph builder
(:mod:`headseg.export.builder`) read it from the row, so adding a family with
the BERT layer layout (``encoder.layer[i].attention.{self.{query,key,value},
output.dense}``) is one :func:`register_family` call:

* ``prefix``: what a checkpoint saved with a task head puts before the bare
  encoder's tensor names (``bert.``, ``roberta.``, ``electra.``);
* ``padded_positions``: positions start after ``pad_token_id`` (RoBERTa's
  ``create_position_ids_from_input_ids``), which also takes ``pad_token_id + 1``
  rows off the usable length;
* ``projected_embeddings``: an ``embedding_size`` that may differ from
  ``hidden_size``, projected by ``embeddings_project`` (ELECTRA).

The checks of a ``config.json`` live here too (:func:`read_config`), so that
a config is refused in one line, before transformers would fail on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .errors import ModelError, first_line, shown
from .registry import Registry


@dataclass(frozen=True)
class Family:
    """How one ``model_type`` differs from BERT's layout (see the module docstring)."""

    model_type: str
    prefix: str
    padded_positions: bool = False
    projected_embeddings: bool = False


#: the table: every registered family by ``model_type``
FAMILIES: Registry[Family] = Registry("model type", error=ModelError)


def register_family(family: Family) -> Family:
    """Add ``family`` to the table (a ``model_type`` registered twice is refused)."""
    if not isinstance(family, Family):
        raise TypeError(f"register_family takes a Family, not {type(family).__name__}")
    return FAMILIES.add(family.model_type, family)


for _family in (Family("bert", "bert."),
                Family("roberta", "roberta.", padded_positions=True),
                Family("xlm-roberta", "roberta.", padded_positions=True),
                Family("camembert", "roberta.", padded_positions=True),
                Family("electra", "electra.", projected_embeddings=True)):
    register_family(_family)


def family_names() -> tuple[str, ...]:
    """The registered ``model_type`` values, in registration order."""
    return FAMILIES.names()


def find_family(model_type: object) -> Family | None:
    """The row of ``model_type``, or None when it is not a registered family."""
    return FAMILIES.find(model_type)


def get_family(model_type: object, what: str = "model") -> Family:
    """The row of ``model_type``; :class:`ModelError` naming ``what`` and the supported types otherwise."""
    family = find_family(model_type)
    if family is None:
        raise ModelError(f"{what} has model_type '{model_type}', which is not a supported BERT-family encoder "
                         f"(supported: {', '.join(family_names())})")
    return family


def max_positions(cfg: Mapping, tokenizer=None) -> int:
    """The longest input (in tokens, specials included) the encoder of ``cfg`` takes.

    ``max_position_embeddings`` less the rows a padded-positions family
    reserves, and no more than the tokenizer's ``model_max_length`` when that
    is set to a real value (tokenizers store a huge sentinel for "unset").
    """
    n = int(cfg.get("max_position_embeddings") or 512)
    family = find_family(cfg.get("model_type"))
    if family is not None and family.padded_positions:
        n -= int(cfg.get("pad_token_id", 1) or 1) + 1
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and 0 < tok_max < 100_000:
        n = min(n, tok_max)
    return n


def embedding_size(cfg: Mapping) -> int:
    """The width of the embeddings (``embedding_size`` where the family projects them, else ``hidden_size``)."""
    family = find_family(cfg.get("model_type"))
    if family is not None and family.projected_embeddings:
        return int(cfg.get("embedding_size") or cfg["hidden_size"])
    return int(cfg["hidden_size"])


#: config.json entries the encoder's shapes come from: positive integers.
_CONFIG_INTS = ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                "max_position_embeddings", "vocab_size", "type_vocab_size")
_CONFIG_FLOATS = ("layer_norm_eps", "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


def read_config(path: Path, name: str) -> dict:
    """``config.json`` of a model directory, checked to describe a supported encoder."""
    try:
        with open(path / "config.json", encoding="utf-8") as fh:
            cfg = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path / 'config.json'}: {first_line(exc)}") from None
    check_config(cfg, path / "config.json")
    get_family(cfg.get("model_type"), f"model '{name}'")
    for key in ("num_hidden_layers", "num_attention_heads", "hidden_size"):
        v = cfg.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ModelError(f"{path / 'config.json'}: '{key}' must be a positive integer (got {shown(v)})")
    mp = cfg.get("max_position_embeddings", 512)
    if isinstance(mp, bool) or not isinstance(mp, int) or mp < 8:
        raise ModelError(f"{path / 'config.json'}: 'max_position_embeddings' must be an integer >= 8 (got {shown(mp)})")
    return cfg


def check_config(cfg, source: Path | str) -> None:
    """Refuse a config transformers would fail on with a traceback (wrong shape or types)."""
    if not isinstance(cfg, dict):
        raise ModelError(f"{source}: expected a JSON object, found a JSON {type(cfg).__name__}")
    for key in _CONFIG_INTS:
        v = cfg.get(key)
        if key in cfg and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ModelError(f"{source}: '{key}' must be a positive integer, not {shown(v)}")
    for key in _CONFIG_FLOATS:
        v = cfg.get(key)
        if key in cfg and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ModelError(f"{source}: '{key}' must be a number, not {shown(v)}")
    if "model_type" in cfg and not isinstance(cfg["model_type"], str):
        raise ModelError(f"{source}: 'model_type' must be a string, not {cfg['model_type']!r}")
    heads, hidden = cfg.get("num_attention_heads"), cfg.get("hidden_size")
    if isinstance(heads, int) and isinstance(hidden, int) and hidden % heads:
        raise ModelError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
