"""Corpus reading and sample planning for ``headseg study``.

A corpus is a list of paths: text files, folders (walked recursively, files
with a text-like suffix, in sorted order) and JSONL files (one JSON object per
line with a ``"text"`` field).  Lines consisting only of ``==========`` (the
Choi / manifesto segment markers) are removed: the study reads these files as
running text, and the markers would otherwise become tokens.

Samples are windows of ``seq_len`` tokens, planned as ``(document, start)``
pairs so that memory does not depend on ``--samples`` (windows are built one
batch at a time).  How they are drawn is documented in :func:`plan_samples`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..reading import AUTO_ENCODING, DEFAULT_MAX_BYTES, read_text
from ..text import TokenizedText, Window, make_window, tokenize, window_width

#: suffixes read when a folder is given (a file named explicitly is always read).
TEXT_SUFFIXES = (".txt", ".ref", ".text", ".md", ".jsonl")
SEGMENT_MARKER = "=========="


@dataclass
class CorpusDocument:
    """One document of the corpus: its text and where it came from (``source``: path, or path and line)."""

    source: str
    text: str


def strip_markers(text: str) -> str:
    """Normalise line ends to ``\\n`` and drop ``==========`` marker lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line for line in text.split("\n") if line.strip() != SEGMENT_MARKER)


def _read_jsonl(path: Path, encoding: str, max_bytes: int) -> list[CorpusDocument]:
    raw = read_text(path, encoding=encoding, max_bytes=max_bytes, allow_empty=True)
    docs = []
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise InputError(f"{path}:{n}: a JSONL corpus line needs a string field \"text\"")
        docs.append(CorpusDocument(f"{path}:{n}", strip_markers(obj["text"])))
    return docs


def _files_under(folder: Path) -> list[Path]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if not f.startswith(".") and f.lower().endswith(TEXT_SUFFIXES):
                out.append(Path(root) / f)
    return out


def corpus_files(paths: list[str]) -> list[Path]:
    """The files of the corpus ``paths`` (a folder's text files, recursively), without reading them.

    :class:`InputError` for no path, a missing path or a folder with no text
    file: cheap enough to check before the model loads.
    """
    if not paths:
        raise InputError("no corpus given")
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise InputError(f"{p}: no such file or directory")
        if path.is_dir():
            found = _files_under(path)
            if not found:
                raise InputError(f"{p}: folder has no text files ({', '.join(TEXT_SUFFIXES)})")
            files.extend(found)
        else:
            files.append(path)
    return files


def read_corpus(
    paths: list[str],
    encoding: str = AUTO_ENCODING,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[CorpusDocument]:
    """Read every document of the corpus; raise :class:`InputError` if none has text."""
    docs: list[CorpusDocument] = []
    for f in corpus_files(paths):
        if f.suffix.lower() == ".jsonl":
            docs.extend(_read_jsonl(f, encoding, max_bytes))
        else:
            docs.append(CorpusDocument(str(f), strip_markers(read_text(f, encoding=encoding, max_bytes=max_bytes, allow_empty=True))))
    docs = [d for d in docs if d.text.strip()]
    if not docs:
        raise InputError("the corpus is empty: no file has any text")
    return docs


def corpus_fingerprint(docs: list[CorpusDocument]) -> str:
    """A 16-hex-digit digest of the documents' texts, in order: a resumed run must see the same corpus."""
    h = hashlib.sha256()
    for d in docs:
        h.update(d.text.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def van_der_corput(k: int) -> float:
    """k-th term of the base-2 van der Corput sequence: 0, 1/2, 1/4, 3/4, 1/8, ..."""
    x, denom = 0.0, 1.0
    while k:
        denom *= 2
        k, bit = divmod(k, 2)
        x += bit / denom
    return x


def pass_offsets(width: int) -> list[int]:
    """Distinct start offsets for successive passes over the corpus, coarse to fine."""
    out, seen, k = [], set(), 0
    while len(out) < width:
        o = int(round(van_der_corput(k) * width)) % width
        if o not in seen:
            seen.add(o)
            out.append(o)
        k += 1
    return out


def plan_samples(doc_lengths: list[int], width: int, samples: int, seed: int) -> tuple[list[tuple[int, int]], dict]:
    """Choose ``samples`` windows as ``(doc, start)`` pairs; returns them and a description.

    Pass ``k`` cuts every document into consecutive full windows of ``width``
    content tokens starting at offset ``o_k`` (offsets 0, W/2, W/4, 3W/4, ...:
    the van der Corput sequence times W).  A document shorter than W gives one
    (short) window, in pass 0 only.  Passes are added until the pool holds at
    least ``samples`` windows; all windows of the earlier passes are used, and
    the rest are drawn uniformly without replacement from the last pass with
    ``numpy.random.default_rng(seed)``.  If every offset is used and the pool is
    still smaller, all of it is used (the report records the actual count).
    The plan is sorted by (document, start).
    """
    if samples < 1:
        raise InputError("--samples must be at least 1")
    chosen: list[tuple[int, int]] = []
    passes = 0
    exhausted = True
    for o in pass_offsets(width):
        this = []
        for d, n in enumerate(doc_lengths):
            if n == 0:
                continue
            if n <= width:
                if o == 0:
                    this.append((d, 0))
                continue
            this.extend((d, s) for s in range(o, n - width + 1, width))
        passes += 1
        need = samples - len(chosen)
        if len(this) >= need:
            if len(this) > need:
                rng = np.random.default_rng(seed)
                pick = np.sort(rng.choice(len(this), size=need, replace=False))
                this = [this[i] for i in pick]
            chosen.extend(this)
            exhausted = False
            break
        chosen.extend(this)
    chosen.sort()
    info = {
        "requested": samples,
        "drawn": len(chosen),
        "passes": passes,
        "offsets": pass_offsets(width)[:passes],
        "exhausted": exhausted,
    }
    return chosen, info


def build_window(doc: TokenizedText, start: int, width: int, tokenizer, max_tokens: int) -> Window:
    """The window of ``doc`` with content tokens ``[start, start + width)``."""
    if width > window_width(tokenizer, max_tokens):
        raise InputError(f"internal: {width} tokens do not fit a window of {max_tokens}")
    return make_window(doc, start, min(start + width, len(doc)), tokenizer)


def tokenize_corpus(docs: list[CorpusDocument], tokenizer) -> list[TokenizedText]:
    """Every document tokenized with ``tokenizer`` (ids and character offsets), in order."""
    return [tokenize(d.text, tokenizer) for d in docs]
