"""An encoder's weights read from its folder's safetensors files with numpy: no torch, no unpickling.

The ONNX graph builder (:mod:`headseg.export.builder`) and the model
fingerprint both read the weights here.  Tensor names are those of the bare
encoder (``embeddings.…``, ``encoder.layer.N.…``, ELECTRA's
``embeddings_project.…``), whatever head the checkpoint was saved with: the
base-model prefix (``bert.``, ``roberta.``, ``electra.``) is stripped and
everything outside the encoder (pooler, LM heads) is left out, as
transformers' ``AutoModel`` does when it loads the folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

import numpy as np

from .errors import ModelError, first_line
from .families import embedding_size, find_family

#: the bare encoder's top-level modules (the pooler is not loaded: ``add_pooling_layer=False``)
ENCODER_MODULES = ("embeddings.", "embeddings_project.", "encoder.")
#: the tensors of one transformer layer, after ``encoder.layer.N.``
LAYER_TENSORS = tuple(
    f"{m}.{p}" for m in ("attention.self.query", "attention.self.key", "attention.self.value",
                         "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                         "output.dense", "output.LayerNorm")
    for p in ("weight", "bias"))


def safetensors_files(path: str | Path) -> list[Path]:
    """The safetensors files of a model folder: ``model.safetensors`` or its shards (``model-*.safetensors``)."""
    d = Path(path)
    single = d / "model.safetensors"
    return [single] if single.is_file() else sorted(d.glob("model-*-of-*.safetensors"))


def expected_names(cfg: Mapping) -> set[str]:
    """Every tensor name the bare encoder described by ``cfg`` has (its ``state_dict`` keys)."""
    names = {f"embeddings.{n}" for n in ("word_embeddings.weight", "position_embeddings.weight",
                                          "LayerNorm.weight", "LayerNorm.bias")}
    if int(cfg.get("type_vocab_size", 2) or 0) > 0:
        names.add("embeddings.token_type_embeddings.weight")
    if embedding_size(cfg) != int(cfg["hidden_size"]):
        names |= {"embeddings_project.weight", "embeddings_project.bias"}
    for i in range(int(cfg["num_hidden_layers"])):
        names |= {f"encoder.layer.{i}.{t}" for t in LAYER_TENSORS}
    return names


def read_encoder_tensors(path: str | Path, cfg: Mapping) -> dict[str, np.ndarray]:
    """The encoder's tensors of the model folder ``path`` as numpy arrays, by bare-encoder name.

    Raises :class:`ModelError` for a folder without safetensors weights (a
    ``pytorch_model.bin`` is never unpickled), an unreadable file, a dtype
    numpy cannot hold (bfloat16) or a missing tensor.
    """
    d = Path(path)
    files = safetensors_files(d)
    if not files:
        if (d / "pytorch_model.bin").is_file() or list(d.glob("pytorch_model-*.bin")):
            raise ModelError(f"{d}: has only pytorch_model.bin, which headseg does not unpickle; convert it to "
                             "model.safetensors (transformers: model.save_pretrained(DIR, safe_serialization=True))")
        raise ModelError(f"{d}: no model.safetensors weights")
    try:
        from safetensors import safe_open
    except ImportError:
        raise ModelError("reading model.safetensors needs the 'safetensors' package (pip install safetensors)") from None
    family = find_family(cfg.get("model_type"))
    prefix = family.prefix if family is not None else ""
    out: dict[str, np.ndarray] = {}
    for f in files:
        try:
            with safe_open(str(f), framework="np") as fh:
                for key in fh.keys():
                    name = key[len(prefix):] if prefix and key.startswith(prefix) else key
                    if not name.startswith(ENCODER_MODULES):
                        continue
                    arr = fh.get_tensor(key)
                    if arr.dtype.kind == "f":  # int buffers (position_ids) are not parameters
                        out[name] = arr
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - safetensors raises several types for one cause
            raise ModelError(f"cannot read {f}: {first_line(exc)} (bfloat16 weights: save them as float32 "
                             "or float16)") from None
    missing = sorted(expected_names(cfg) - set(out))
    if missing:
        raise ModelError(f"{d}: the weights lack {len(missing)} encoder tensor(s), e.g. '{missing[0]}'")
    return out


def tensor_fingerprint(model_type: str, num_layers: int, num_heads: int, hidden: int,
                       tensors: Mapping[str, np.ndarray]) -> str:
    """``{type}-{layers}x{heads}-{16 hex}``: SHA-256 of the architecture and every tensor (floats as float32).

    The one definition of a model's fingerprint: :func:`headseg.analysis.model.fingerprint_model`
    feeds it a torch ``state_dict``, :func:`dir_fingerprint` the safetensors
    tensors, and both give the same value for the same weights.
    """
    h = hashlib.sha256()
    arch = {"model_type": model_type, "layers": num_layers, "heads": num_heads, "hidden": hidden}
    h.update(json.dumps(arch, sort_keys=True).encode())
    for name in sorted(tensors):
        h.update(name.encode())
        a = tensors[name]
        # floats as float32 (the dtype torch computes in); integer buffers as they are
        h.update(np.ascontiguousarray(a, dtype=np.float32 if a.dtype.kind == "f" else a.dtype).tobytes())
    return f"{model_type}-{num_layers}x{num_heads}-{h.hexdigest()[:16]}"


def dir_fingerprint(path: str | Path, cfg: Mapping) -> str | None:
    """The fingerprint of a model folder from its safetensors weights, or None where only torch can tell.

    None when the folder has no safetensors file, or its tensors are not
    exactly the bare encoder's (transformers would then initialise or drop
    some, which only loading it shows).
    """
    try:
        tensors = read_encoder_tensors(path, cfg)
    except ModelError:
        return None
    if set(tensors) != expected_names(cfg):
        return None
    return tensor_fingerprint(str(cfg["model_type"]), int(cfg["num_hidden_layers"]),
                              int(cfg["num_attention_heads"]), int(cfg["hidden_size"]), tensors)
