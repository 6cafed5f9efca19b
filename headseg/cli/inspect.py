"""``headseg inspect``: one head's context similarity matrix on a text."""

from __future__ import annotations

import json
import os
import re
import sys

import numpy as np

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.io import atomic_save_npz, check_output_path, read_text
from headseg.analysis.model import load_model
from headseg.analysis.norms import norm_weighted_attention
from headseg.analysis.inspect import inspect_text, summarise

from . import options


def _looks_like_file(arg: str) -> bool:
    """A path, existing or not: a missing file must be an error, not a one-word text."""
    if arg == "-" or os.path.exists(arg):
        return True
    return not any(c.isspace() for c in arg) and ("/" in arg or os.sep in arg or re.search(r"\.[A-Za-z]\w{0,4}$", arg) is not None)


def check_args(args) -> None:
    """Argument errors and an unwritable --save, found before the model loads (exit 2)."""
    if args.top < 1:
        raise InputError(f"--top must be at least 1 (got {args.top})")
    if args.window < 0:
        raise InputError(f"--window must be at least 0 (got {args.window})")
    inputs = [args.input] if args.input != "-" and os.path.exists(args.input) else []
    check_output_path(args.save, inputs, what="--save")


def run(args) -> int:
    """``headseg inspect``: print (or ``--json``) one head's matrix summary; ``--save`` writes all heads.

    Returns the exit code.
    """
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
    ins = inspect_text(text, window=args.window, max_tokens=args.max_tokens, cosine=args.cosine, loaded=loaded,
                       device=args.device)
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


def register(sub) -> None:
    """Add the ``inspect`` command and its flags to the ``sub`` parsers."""
    p = sub.add_parser("inspect", help="show one head's context similarity matrix on a text",
                       description="Print the tokens, the context similarity matrix summary and the most similar "
                                   "token pairs for one head; --save writes Z, S, A and norms for all heads.")
    p.add_argument("input", metavar="TEXT|FILE", help="text, or a path to a text file ('-' for stdin)")
    p.add_argument("--layer", type=int, default=-1, help="layer (default: last)")
    p.add_argument("--head", type=int, default=0)
    options.add_model(p)
    options.add_device(p)
    p.add_argument("--window", type=int, default=0, help="which window of a long text (0-based)")
    p.add_argument("--max-tokens", type=int, default=128, help="window size in tokens (default 128)")
    p.add_argument("--top", type=int, default=10, help="how many pairs to list")
    p.add_argument("--cosine", action="store_true", help="cosine instead of the paper's dot product")
    p.add_argument("--save", metavar="OUT.npz", help="write Z, S, A, norms for all heads")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    options.add_input(p)

    def _run(args):
        check_args(args)
        options.require(*options.TORCH_MODULES)
        if args.layer < 0:
            args.layer = load_model(args.model).info.num_layers + args.layer
        return run(args)

    p.set_defaults(func=_run)
