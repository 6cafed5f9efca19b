"""Token counters: the units of a downstream ``max_tokens`` limit.

A hard limit in the tokens of *another* model (the embedding model a RAG
pipeline feeds) needs that model's tokenizer, not the segmenter's.  A counter is
any callable ``str -> int``; :func:`resolve_token_counter` also builds one from a
local Hugging Face tokenizer directory, a model name in the local cache, or a
tokenizer object.

Tokenizer counts leave out special tokens (``[CLS]``/``[SEP]``, ``<s>``/``</s>``),
as LangChain's and LlamaIndex's tokenizer-based lengths do: for a model that
takes 512 tokens including two specials, ask for ``max_tokens=510``, or pass a
callable that counts them.
"""

from __future__ import annotations

import functools
import numbers
import os
from pathlib import Path
from typing import Callable, Union

from headseg.analysis.errors import HeadsegError, ModelError

#: A counter: the number of tokens in a string.
TokenCounter = Callable[[str], int]
#: What ``token_counter=`` accepts.
TokenCounterSpec = Union[TokenCounter, str, os.PathLike, None]


def resolve_token_counter(spec: TokenCounterSpec) -> TokenCounter | None:
    """A checked ``str -> int`` counter for ``spec``, or None for None.

    ``spec`` is a callable, a ``tokenizers.Tokenizer``, a transformers tokenizer,
    a local directory holding a Hugging Face tokenizer, or the name of a model in
    the local Hugging Face cache (never downloaded).
    """
    if spec is None:
        return None
    if isinstance(spec, (str, os.PathLike)):
        return _checked(_load_counter(str(spec)), str(spec))
    tok = _tokenizer_counter(spec)
    if tok is not None:
        return _checked(tok, type(spec).__name__)
    if callable(spec):
        return _checked(spec, getattr(spec, "__name__", type(spec).__name__))
    raise HeadsegError(f"token_counter must be a callable str -> int, a tokenizer, or a tokenizer directory "
                       f"or cached model name (got {type(spec).__name__})")


def _checked(fn: Callable[[str], object], name: str) -> TokenCounter:
    def count(text: str) -> int:
        n = fn(text)
        # bool is an int subclass, but a counter that returns True is broken
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise HeadsegError(f"token_counter {name} returned {n!r} for a string; it must return an int >= 0")
        return int(n)

    count.__name__ = f"checked_{name}"
    return count


def _tokenizer_counter(obj) -> Callable[[str], int] | None:
    """A counter for a tokenizer object, or None if ``obj`` is not one."""
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - tokenizers is a dependency
        Tokenizer = None
    if Tokenizer is not None and isinstance(obj, Tokenizer):
        return _fast_counter(obj)
    backend = getattr(obj, "backend_tokenizer", None)
    if Tokenizer is not None and isinstance(backend, Tokenizer):
        return _fast_counter(backend)
    if hasattr(obj, "tokenize") and hasattr(obj, "convert_tokens_to_ids"):
        # a slow transformers tokenizer: tokenize() adds no special tokens and never truncates
        return lambda text: len(obj.tokenize(text))
    return None


def _fast_counter(tokenizer) -> Callable[[str], int]:
    # A private copy: a tokenizer.json often carries truncation (e.g. at 128 or
    # 512 tokens), which would cap the count and so break the limit.  Changing
    # the caller's own object is not ours to do.
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_truncation()
    tok.no_padding()
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


@functools.lru_cache(maxsize=8)
def _load_counter(spec: str) -> Callable[[str], int]:
    """Counter for a tokenizer directory or cached model name; loaded once per process."""
    path = Path(spec).expanduser()
    if not path.exists():
        if spec in ("embedded", "default"):
            from headseg.analysis.model import embedded_model_path

            path = embedded_model_path()
        elif spec.startswith((".", "/", "~")):
            raise ModelError(f"token_counter {spec}: no such directory")
        else:
            try:
                from huggingface_hub import snapshot_download

                path = Path(snapshot_download(spec, local_files_only=True))
            except Exception:
                raise ModelError(f"token_counter '{spec}' is not a local directory and is not in the local "
                                 f"Hugging Face cache (nothing is downloaded): pass a tokenizer directory") from None
    if path.is_file() and path.suffix == ".json":
        path, files = path.parent, path
    else:
        files = path / "tokenizer.json"
    if not path.is_dir():
        raise ModelError(f"token_counter {spec}: not a directory")
    if files.is_file():
        from tokenizers import Tokenizer

        try:
            return _fast_counter(Tokenizer.from_file(str(files)))
        except Exception as exc:
            raise ModelError(f"token_counter {spec}: cannot read {files.name}: {exc}") from None
    # No tokenizer.json (e.g. only vocab.txt): transformers builds the tokenizer, offline.
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:
        raise ModelError(f"token_counter {spec}: cannot load a tokenizer from {path}: "
                         f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    counter = _tokenizer_counter(tok)
    if counter is None:
        raise ModelError(f"token_counter {spec}: {type(tok).__name__} is not a tokenizer headseg can count with")
    return counter
