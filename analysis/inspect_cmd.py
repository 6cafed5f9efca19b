"""``headseg inspect``: one head's context similarity matrix on a text."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass

import numpy as np

from .capture import TorchBackend
from .errors import HeadsegError, InputError
from .io import DEFAULT_MAX_BYTES, atomic_save_npz, read_text
from .model import load_model
from .norms import norm_weighted_attention
from .similarity import context_similarity
from .text import windows_from_text


@dataclass
class Inspection:
    """Everything ``inspect`` computes for one window, all heads.

    ``z [L, H, T, d]``, ``s [L, H, T, T]``, ``attn [L, H, T, T]``, ``fnorm [L, H, T]``.
    """

    window: object
    z: np.ndarray
    s: np.ndarray
    attn: np.ndarray
    fnorm: np.ndarray
    fingerprint: str
    n_windows: int


def inspect_text(text: str, model=None, window: int = 0, max_tokens: int = 128, cosine: bool = False, loaded=None) -> Inspection:
    loaded = loaded or load_model(model)
    windows = windows_from_text(text, loaded.tokenizer, max_tokens=max_tokens)
    if not windows:
        raise InputError("the text has no tokens")
    if not 0 <= window < len(windows):
        raise InputError(f"--window {window} is out of range: the text has {len(windows)} window(s)")
    w = windows[window]
    acts = TorchBackend(loaded).capture([w], heads=None, attention=True, norms=True)
    L, H = loaded.info.num_layers, loaded.info.num_heads
    t = len(w)
    z = acts.z[0].reshape(L, H, t, -1)
    return Inspection(
        window=w,
        z=z,
        s=context_similarity(z, cosine=cosine),
        attn=acts.attn[0].reshape(L, H, t, t),
        fnorm=acts.fnorm[0].reshape(L, H, t),
        fingerprint=loaded.info.fingerprint,
        n_windows=len(windows),
    )


def top_pairs(s: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    """The ``k`` largest off-diagonal entries of a symmetric matrix, each pair once (i < j)."""
    iu, ju = np.triu_indices(s.shape[0], k=1)
    vals = s[iu, ju]
    order = np.argsort(-vals, kind="stable")[:k]
    return [(int(iu[o]), int(ju[o]), float(vals[o])) for o in order]


def summarise(s: np.ndarray, window, k: int) -> dict:
    t = s.shape[0]
    iu, ju = np.triu_indices(t, k=1)
    vals = s[iu, ju]
    pairs = top_pairs(s, k)
    sent = window.sentence_ids
    same = [sent[i] == sent[j] and sent[i] >= 0 for i, j, _ in pairs]
    return {
        "tokens": t,
        "min": float(vals.min()) if vals.size else 0.0,
        "max": float(vals.max()) if vals.size else 0.0,
        "mean": float(vals.mean()) if vals.size else 0.0,
        "std": float(vals.std()) if vals.size else 0.0,
        "mean_distance_top": float(np.mean([j - i for i, j, _ in pairs])) if pairs else 0.0,
        "mean_distance_all": float(np.mean(ju - iu)) if vals.size else 0.0,
        "same_sentence_top": float(np.mean(same)) if pairs else 0.0,
        "top_pairs": pairs,
    }


def _looks_like_file(arg: str) -> bool:
    """A path, existing or not: a missing file must be an error, not a one-word text."""
    if arg == "-" or os.path.exists(arg):
        return True
    return not any(c.isspace() for c in arg) and ("/" in arg or os.sep in arg or re.search(r"\.[A-Za-z]\w{0,4}$", arg) is not None)


def run(args) -> int:
    if _looks_like_file(args.input):
        text = read_text(args.input, encoding=args.encoding, max_bytes=args.max_bytes)
    else:
        text = args.input
        if not text.strip():
            raise InputError("empty input text")
    loaded = load_model(args.model)
    info = loaded.info
    if not 0 <= args.layer < info.num_layers:
        raise HeadsegError(f"--layer {args.layer} is out of range: the model has layers 0..{info.num_layers - 1}")
    if not 0 <= args.head < info.num_heads:
        raise HeadsegError(f"--head {args.head} is out of range: the model has heads 0..{info.num_heads - 1}")
    ins = inspect_text(text, window=args.window, max_tokens=args.max_tokens, cosine=args.cosine, loaded=loaded)
    w = ins.window
    s = ins.s[args.layer, args.head]
    summary = summarise(s, w, args.top)
    if args.json:
        out = {
            "model": info.name,
            "fingerprint": info.fingerprint,
            "window": w.index,
            "windows": ins.n_windows,
            "layer": args.layer,
            "head": args.head,
            "similarity": "cosine" if args.cosine else "dot",
            "tokens": [{"i": i, "token": tok, "start": int(a), "end": int(b), "special": bool(sp), "sentence": int(sid)}
                       for i, (tok, (a, b), sp, sid) in enumerate(zip(w.tokens, w.offsets, w.special, w.sentence_ids))],
            "summary": {k: v for k, v in summary.items() if k != "top_pairs"},
            "top_pairs": [{"i": i, "j": j, "value": v, "tokens": [w.tokens[i], w.tokens[j]]} for i, j, v in summary["top_pairs"]],
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        kind = "cosine" if args.cosine else "dot product"
        print(f"model {info.name} ({info.fingerprint}); window {w.index + 1}/{ins.n_windows}, "
              f"{len(w)} tokens, chars {w.start_char}-{w.end_char}")
        print("tokens:")
        print("  " + " ".join(f"{i}:{tok}" for i, tok in enumerate(w.tokens)))
        print(f"context similarity S = Z Zᵀ ({kind}, diagonal zeroed), layer {args.layer} head {args.head}:")
        print(f"  off-diagonal min {summary['min']:.4g}  max {summary['max']:.4g}  "
              f"mean {summary['mean']:.4g}  std {summary['std']:.4g}")
        print(f"  top-{args.top} pairs: mean distance {summary['mean_distance_top']:.1f} tokens "
              f"(all pairs {summary['mean_distance_all']:.1f}); same sentence {summary['same_sentence_top']:.0%}")
        print(f"top {args.top} similar token pairs:")
        for i, j, v in summary["top_pairs"]:
            print(f"  {v:10.4f}  {i:4d} {w.tokens[i]!r:>14}  ~ {j:4d} {w.tokens[j]!r}")
    if args.save:
        atomic_save_npz(
            args.save,
            Z=ins.z,
            S=ins.s,
            A=ins.attn,
            fnorm=ins.fnorm,
            norm_attention=norm_weighted_attention(ins.attn, ins.fnorm),
            tokens=np.asarray(w.tokens),
            offsets=w.offsets,
            special=w.special,
            sentence_ids=w.sentence_ids,
            fingerprint=np.asarray(info.fingerprint),
            model=np.asarray(info.name),
        )
        print(f"saved Z {ins.z.shape}, S, A, fnorm and norm_attention for all heads to {args.save}", file=sys.stderr)
    return 0


def add_model_args(p) -> None:
    p.add_argument("--model", default=None, metavar="PATH",
                   help="local Hugging Face model directory or cached hub id (default: embedded all-MiniLM-L6-v2)")


def register(sub) -> None:
    p = sub.add_parser("inspect", help="show one head's context similarity matrix on a text",
                       description="Print the tokens, the context similarity matrix summary and the most similar "
                                   "token pairs for one head; --save writes Z, S, A and norms for all heads.")
    p.add_argument("input", metavar="TEXT|FILE", help="text, or a path to a text file ('-' for stdin)")
    p.add_argument("--layer", type=int, default=-1, help="layer (default: last)")
    p.add_argument("--head", type=int, default=0)
    add_model_args(p)
    p.add_argument("--window", type=int, default=0, help="which window of a long text (0-based)")
    p.add_argument("--max-tokens", type=int, default=128, help="window size in tokens (default 128)")
    p.add_argument("--top", type=int, default=10, help="how many pairs to list")
    p.add_argument("--cosine", action="store_true", help="cosine instead of the paper's dot product")
    p.add_argument("--save", metavar="OUT.npz", help="write Z, S, A, norms for all heads")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--encoding", default="utf-8")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES)

    def _run(args):
        if args.layer < 0:
            args.layer = load_model(args.model).info.num_layers + args.layer
        return run(args)

    p.set_defaults(func=_run)
