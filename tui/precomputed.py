"""A TUI document saved with all its head activations (``.npz``), and the source that replays it.

The snapshot tests and ``headseg tui --document`` read such files, so what
they show never depends on floating-point details of a torch build.  Loading
checks every window's shapes: a foreign or truncated file is one
:class:`~headseg.analysis.errors.InputError`, not an IndexError while drawing.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.text import Window
from headseg.analysis.writing import atomic_save_npz

from .data import DocumentModel, WindowMatrices


class PrecomputedSource:
    """Replays saved windows and activations (see :func:`save_precomputed`)."""

    def __init__(self, name: str, num_layers: int, num_heads: int, fingerprint: str, matrices: list[WindowMatrices]):
        self.name = name
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.fingerprint = fingerprint
        self._matrices = matrices
        self.tokenizer = None

    def compute(self, window: Window) -> WindowMatrices:
        """The saved matrices of ``window`` (by its index)."""
        m = self._matrices[window.index]
        # A fresh object, so derived caches never leak between documents.
        return WindowMatrices(z=m.z, attn=m.attn, fnorm=m.fnorm)


def save_precomputed(path: str | os.PathLike, doc: DocumentModel) -> None:
    """Save a document's text, windows and all activations to ``.npz`` (compressed, atomic)."""
    arrays: dict[str, np.ndarray] = {
        "text": np.asarray(doc.text),
        "name": np.asarray(doc.source.name),
        "fingerprint": np.asarray(doc.source.fingerprint),
        "shape": np.asarray([doc.source.num_layers, doc.source.num_heads, len(doc.windows)], np.int64),
        "total_windows": np.asarray(doc.total_windows, np.int64),
        "note": np.asarray(doc.note),
    }
    for w in doc.windows:
        m = doc.matrices(w.index)
        p = f"w{w.index}_"
        arrays[p + "input_ids"] = w.input_ids
        arrays[p + "offsets"] = w.offsets
        arrays[p + "special"] = w.special
        arrays[p + "sentence_ids"] = w.sentence_ids
        arrays[p + "tokens"] = np.asarray(w.tokens)
        arrays[p + "pos"] = np.asarray([w.doc_start, w.start_char, w.end_char], np.int64)
        arrays[p + "z"] = m.z.astype(np.float32)
        arrays[p + "attn"] = m.attn.astype(np.float32)
        arrays[p + "fnorm"] = m.fnorm.astype(np.float32)
    atomic_save_npz(path, **arrays)


def load_precomputed(path: str | os.PathLike) -> DocumentModel:
    """Load a document saved by :func:`save_precomputed`."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such precomputed document")
    try:
        with np.load(p, allow_pickle=False) as f:
            L, H, n = (int(x) for x in f["shape"])
            windows, matrices = [], []
            for i in range(n):
                k = f"w{i}_"
                pos = f[k + "pos"]
                windows.append(
                    Window(
                        index=i,
                        input_ids=f[k + "input_ids"],
                        offsets=f[k + "offsets"],
                        special=f[k + "special"].astype(bool),
                        sentence_ids=f[k + "sentence_ids"],
                        tokens=[str(t) for t in f[k + "tokens"]],
                        doc_start=int(pos[0]),
                        start_char=int(pos[1]),
                        end_char=int(pos[2]),
                    )
                )
                matrices.append(_checked_matrices(windows[-1], (L, H), f[k + "z"], f[k + "attn"], f[k + "fnorm"]))
            text = str(f["text"])
            source = PrecomputedSource(str(f["name"]), L, H, str(f["fingerprint"]), matrices)
            return DocumentModel(text, windows, source, total_windows=int(f["total_windows"]), note=str(f["note"]))
    except HeadsegError:
        raise
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, ValueError, IndexError, TypeError) as exc:
        # a truncated or foreign file fails in numpy or zipfile with any of these: one line, no traceback
        raise InputError(f"{path}: not a headseg TUI document ({type(exc).__name__}: {exc})") from None


def _checked_matrices(window: Window, heads: tuple[int, int], z: np.ndarray, attn: np.ndarray,
                      fnorm: np.ndarray) -> WindowMatrices:
    """A saved window's matrices, shapes checked (a mismatch failed later, drawing, as an IndexError)."""
    t = len(window.input_ids)
    if (z.ndim != 4 or z.shape[:3] != (*heads, t) or attn.shape != (*heads, t, t) or fnorm.shape != (*heads, t)
            or window.offsets.shape != (t, 2) or len(window.tokens) != t or len(window.special) != t):
        raise ValueError(f"window {window.index}: its matrices do not fit {heads} heads and {t} tokens")
    return WindowMatrices(z=z, attn=attn, fnorm=fnorm)
