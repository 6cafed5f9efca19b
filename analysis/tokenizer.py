"""The tokenizer every path shares: ids and character offsets from a ``tokenizer.json``.

It wraps a :class:`tokenizers.Tokenizer` (the Rust library behind transformers'
fast tokenizers) and needs neither torch nor transformers, so the ONNX serving
path starts quickly.  The torch path uses the same class (built from the
transformers tokenizer with :meth:`Tokenizer.from_hf`), so both engines see
exactly the same tokens.
"""

from __future__ import annotations

import json
import os
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import InputError, ModelError, first_line
from .reading import read_json

#: the files a model directory's tokenizer is read from (copied into ONNX artifacts)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

_PROBE = "a"


class Tokenizer:
    """Token ids and character offsets of a text, plus the special tokens a window needs.

    ``before`` / ``after`` are the special token ids the model expects around
    one sequence (``[CLS]`` … ``[SEP]`` for BERT, ``<s>`` … ``</s>`` for RoBERTa).
    """

    def __init__(self, backend, pad_token_id: int | None = None, model_max_length: int | None = None):
        # A tokenizer.json may carry truncation and padding for some other use
        # (sentence-transformers saves max_length 128): never truncate or pad here.
        backend.no_truncation()
        backend.no_padding()
        self.backend = backend
        with_specials = backend.encode(_PROBE, add_special_tokens=True).ids
        plain = backend.encode(_PROBE, add_special_tokens=False).ids
        self.before, self.after = _split_specials(with_specials, plain)
        self.pad_token_id = pad_token_id
        self.model_max_length = model_max_length
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> "Tokenizer":
        """From a model (or artifact) directory holding ``tokenizer.json``."""
        from tokenizers import Tokenizer as RustTokenizer

        d = Path(path)
        try:
            backend = RustTokenizer.from_file(str(d / "tokenizer.json"))
        except Exception as exc:  # the Rust library raises plain Exceptions
            raise ModelError(f"{d / 'tokenizer.json'}: cannot read the tokenizer ({first_line(exc)})") from None
        cfg = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            p = d / name
            if p.is_file():
                data = read_json(p, ModelError, unreadable="{path}: unreadable ({exc_type})")
                if isinstance(data, dict):
                    cfg.update(data)
        pad = _token_id(backend, cfg.get("pad_token"))
        if pad is None and backend.padding:
            pad = backend.padding.get("pad_id")
        max_len = cfg.get("model_max_length")
        max_len = int(max_len) if isinstance(max_len, (int, float)) and 0 < max_len < 1e9 else None
        return cls(backend, pad_token_id=pad, model_max_length=max_len)

    @classmethod
    def from_hf(cls, hf_tokenizer) -> "Tokenizer":
        """From a transformers fast tokenizer (a copy of its Rust backend: its state is left alone)."""
        if isinstance(hf_tokenizer, Tokenizer):
            return hf_tokenizer
        if not getattr(hf_tokenizer, "is_fast", False):
            raise ModelError("a fast tokenizer (tokenizer.json) is needed: character offsets come from it")
        from tokenizers import Tokenizer as RustTokenizer

        backend = RustTokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
        max_len = getattr(hf_tokenizer, "model_max_length", None)
        max_len = int(max_len) if isinstance(max_len, int) and 0 < max_len < 10**9 else None
        return cls(backend, pad_token_id=hf_tokenizer.pad_token_id, model_max_length=max_len)

    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """``ids [N]`` (int64) and ``offsets [N, 2]`` (character spans in ``text``), no special tokens.

        A text that is not valid Unicode (a lone surrogate) raises :class:`InputError`.
        """
        try:
            enc = self.backend.encode(text, add_special_tokens=False)
        except TypeError:
            # the Rust tokenizer takes only valid Unicode: say why instead of its "must be str"
            raise _not_unicode(text) from None
        ids = np.asarray(enc.ids, dtype=np.int64)
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
        return ids, offsets

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """The token strings of ``ids`` (``""`` for an id the vocabulary lacks)."""
        return [self.backend.id_to_token(int(i)) or "" for i in ids]

    def save(self, directory: str | os.PathLike) -> None:
        """Write ``tokenizer.json`` and a ``tokenizer_config.json`` that :meth:`from_dir` reads back."""
        d = Path(directory)
        self.backend.save(str(d / "tokenizer.json"))
        cfg = {"model_max_length": self.model_max_length}
        if self.pad_token_id is not None:
            cfg["pad_token"] = self.backend.id_to_token(int(self.pad_token_id))
        (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")


def _not_unicode(text) -> InputError:
    """The error for a text the tokenizer refused: not a str, or a str with a lone surrogate."""
    if not isinstance(text, str):
        return InputError(f"expected text as str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return InputError(f"the text is not valid Unicode: a lone surrogate U+{ord(text[exc.start]):04X} at "
                          f"character {exc.start} (decode bytes with errors='replace', not 'surrogateescape')")
    return InputError("the tokenizer refused the text")


def _token_id(backend, token) -> int | None:
    if isinstance(token, dict):
        token = token.get("content")
    if not isinstance(token, str):
        return None
    return backend.token_to_id(token)


def _split_specials(with_specials: list[int], plain: list[int]) -> tuple[list[int], list[int]]:
    """The special ids before and after ``plain`` inside ``with_specials``."""
    n = len(plain)
    for i in range(len(with_specials) - n + 1):
        if with_specials[i : i + n] == plain:
            return list(with_specials[:i]), list(with_specials[i + n :])
    # A post-processor that rewrites the content too: treat everything it adds as a prefix.
    return list(with_specials[: max(len(with_specials) - n, 0)]), []


_WRAPPED: "weakref.WeakKeyDictionary[object, Tokenizer]" = weakref.WeakKeyDictionary()


def as_tokenizer(tokenizer) -> Tokenizer:
    """A :class:`Tokenizer` for either one or a transformers fast tokenizer (wrapped once per object)."""
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    try:
        return _WRAPPED[tokenizer]
    except (KeyError, TypeError):
        pass
    wrapped = Tokenizer.from_hf(tokenizer)
    try:
        _WRAPPED[tokenizer] = wrapped
    except TypeError:  # not weak-referenceable: wrap each time
        pass
    return wrapped
