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


def expected_shapes(cfg: Mapping) -> dict[str, tuple[int, ...]]:
    """Every tensor of the bare encoder described by ``cfg`` (its ``state_dict`` keys) with its shape.

    ``E`` is the embedding width, ``H`` the hidden size and ``I`` the feed-forward size;
    a ``torch.nn.Linear`` stores its weight as ``(out, in)``.  A size config.json
    leaves out (the vocabulary's, the feed-forward's) is ``-1``: any.
    """
    e, h = embedding_size(cfg), int(cfg["hidden_size"])
    i = int(cfg.get("intermediate_size") or -1)
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (int(cfg.get("vocab_size") or -1), e),
        "embeddings.position_embeddings.weight": (int(cfg.get("max_position_embeddings", 512)), e),
        "embeddings.LayerNorm.weight": (e,), "embeddings.LayerNorm.bias": (e,),
    }
    if int(cfg.get("type_vocab_size", 2) or 0) > 0:
        shapes["embeddings.token_type_embeddings.weight"] = (int(cfg.get("type_vocab_size", 2)), e)
    if e != h:
        shapes |= {"embeddings_project.weight": (h, e), "embeddings_project.bias": (h,)}
    per_layer = {f"attention.self.{m}.{p}": (h, h) if p == "weight" else (h,)
                 for m in ("query", "key", "value") for p in ("weight", "bias")}
    per_layer |= {"attention.output.dense.weight": (h, h), "attention.output.dense.bias": (h,),
                  "attention.output.LayerNorm.weight": (h,), "attention.output.LayerNorm.bias": (h,),
                  "intermediate.dense.weight": (i, h), "intermediate.dense.bias": (i,),
                  "output.dense.weight": (h, i), "output.dense.bias": (h,),
                  "output.LayerNorm.weight": (h,), "output.LayerNorm.bias": (h,)}
    for n in range(int(cfg["num_hidden_layers"])):
        shapes |= {f"encoder.layer.{n}.{t}": s for t, s in per_layer.items()}
    return shapes


def expected_names(cfg: Mapping) -> set[str]:
    """Every tensor name the bare encoder described by ``cfg`` has (its ``state_dict`` keys)."""
    return set(expected_shapes(cfg))


#: a safetensors header larger than this is not one headseg reads (the format's own limit is 100 MB)
_MAX_HEADER = 100_000_000


def read_header(f: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of one safetensors file, from its JSON header alone (no tensor is read).

    The format (https://github.com/huggingface/safetensors): an 8-byte little-endian
    header length, the JSON header, then the data; every tensor's byte range is
    checked to lie inside the file, so a truncated file is refused here.
    """
    try:
        size = f.stat().st_size
        with open(f, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if size < 8 or n > min(_MAX_HEADER, size - 8):
                raise ModelError(f"{f}: not a safetensors file (header length {n} in a file of {size} bytes)")
            header = json.loads(fh.read(n))
    except OSError as exc:
        raise ModelError(f"cannot read {f}: {first_line(exc)}") from None
    except ValueError:
        raise ModelError(f"{f}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise ModelError(f"{f}: not a safetensors file (its header is not a JSON object)")
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], tuple(int(d) for d in entry["shape"]), entry["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise ModelError(f"{f}: malformed safetensors header entry for '{name}'") from None
        if not 0 <= begin <= end or 8 + n + end > size:
            raise ModelError(f"{f}: tensor '{name}' lies outside the file (truncated?)")
        out[name] = (str(dtype), shape)
    return out


def check_weights(path: str | Path, cfg: Mapping, vocab: int | None = None) -> None:
    """Refuse a model folder whose safetensors weights do not fit its ``config.json``, before anything is built.

    Every bare-encoder tensor the config describes must be there with the shape the
    config implies (so the layer count, heads versus hidden size and vocabulary
    versus the embedding matrix agree), and the weights may hold no layer the config
    does not have.  ``vocab``: the tokenizer's vocabulary size, whose every id must
    have a row of the embedding matrix.  A folder without safetensors files is checked by transformers'
    loading report instead (:func:`headseg.analysis.model.load_model`).  Raises
    :class:`ModelError` (exit 3); reads only the files' headers.
    """
    d = Path(path)
    family = find_family(cfg.get("model_type"))
    prefix = family.prefix if family is not None else ""
    found: dict[str, tuple[int, ...]] = {}
    for f in safetensors_files(d):
        for key, (_, shape) in read_header(f).items():
            name = key[len(prefix):] if prefix and key.startswith(prefix) else key
            if name.startswith(ENCODER_MODULES):
                found[name] = shape
    if found:
        check_shapes(found, cfg, str(d), vocab)


def check_shapes(found: Mapping[str, tuple[int, ...]], cfg: Mapping, where: str, vocab: int | None = None) -> None:
    """Refuse encoder tensors (bare-encoder name → shape) that are not exactly what ``cfg`` describes.

    The one comparison of weights with a config, made on safetensors headers by
    :func:`check_weights` and on the arrays given to the ONNX builder.  ``where``
    names the weights in the :class:`ModelError`.
    """
    wanted = expected_shapes(cfg)
    layers = int(cfg["num_hidden_layers"])
    have = {int(n.split(".")[2]) for n in found if n.startswith("encoder.layer.") and n.split(".")[2].isdigit()}
    if have and max(have) + 1 != layers:
        raise ModelError(f"{where}: config.json says {layers} layer(s) but the weights hold {max(have) + 1}")
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise ModelError(f"{where}: the weights lack {len(missing)} encoder tensor(s) config.json describes, "
                         f"e.g. '{missing[0]}'")
    for name, shape in wanted.items():
        got = tuple(found[name])
        if len(got) != len(shape) or any(w not in (-1, g) for w, g in zip(shape, got)):
            implied = "x".join("?" if w == -1 else str(w) for w in shape)
            raise ModelError(f"{where}: tensor '{name}' is {'x'.join(map(str, got))} but config.json implies {implied}")
    rows = found["embeddings.word_embeddings.weight"][0]
    if vocab is not None and vocab > rows:
        raise ModelError(f"{where}: the tokenizer has {vocab} token ids but the embedding matrix only {rows} rows")


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
