"""``headseg inspect``: one head's context similarity matrix on a text."""

from __future__ import annotations

import json
import os
import re
import sys

import numpy as np

from headseg.analysis.text import WINDOW_TOKENS
from headseg.analysis.errors import InputError
from headseg.analysis.outputs import check_output_path, output_lock
from headseg.analysis.reading import read_text
from headseg.analysis.writing import atomic_save_npz
from headseg.analysis.model import load_model
from headseg.analysis.norms import norm_weighted_attention
from headseg.analysis.inspect import inspect_text, summarise

from . import options


def _looks_like_file(arg: str) -> bool:
    """A path, existing or not: a missing file must be an error, not a one-word text."""
    if arg == "-" or os.path.exists(arg):
        return True
    return not any(c.isspace() for c in arg) and ("/" in arg or os.sep in arg or re.search(r"\.[A-Za-z]\w{0,4}$", arg) is not None)


#: what ``--save`` writes (and how an earlier save is recognised, so that it may be replaced)
SAVED_ARRAYS = ("Z", "S", "A", "fnorm", "norm_attention", "tokens", "offsets", "special", "sentence_ids",
                "fingerprint", "model")


def is_saved_inspection(path) -> bool:
    """Whether ``path`` is an ``inspect --save`` file: a NumPy ``.npz`` holding exactly :data:`SAVED_ARRAYS`."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            return sorted(zf.namelist()) == sorted(f"{name}.npy" for name in SAVED_ARRAYS)
    except (OSError, zipfile.BadZipFile):
        return False


def check_args(args) -> None:
    """Argument errors, an unwritable --save, and a layer, head or window size the model does not have,
    found before the model's weights load (exit 2)."""
    if args.top < 1:
        raise InputError(f"--top must be at least 1 (got {args.top})")
    if args.window < 0:
        raise InputError(f"--window must be at least 0 (got {args.window})")
    if args.max_tokens < 3:
        raise InputError(f"--max-tokens must be at least 3 (got {args.max_tokens})")
    options.check_input(args)
    inputs = [args.input] if args.input != "-" and os.path.exists(args.input) else []
    check_output_path(args.save, inputs, what="--save", ours=is_saved_inspection, force=args.force)
    if args.force and not args.save:
        raise InputError("--force goes with --save")
    options.require(*options.TORCH_MODULES)  # a missing extra is named before the model is looked for
    # the model's shape from its config.json: a bad --layer or --head costs no weight loading
    layers, heads, max_positions = options.model_limits(args.model)
    if not -layers <= args.layer < layers:
        raise InputError(f"--layer {args.layer} is out of range: the model has layers 0..{layers - 1} "
                         f"(or -1..-{layers} from the last)")
    if not 0 <= args.head < heads:
        raise InputError(f"--head {args.head} is out of range: the model has heads 0..{heads - 1}")
    if args.max_tokens > max_positions:
        raise InputError(f"--max-tokens {args.max_tokens} is over the model's limit of {max_positions} tokens")


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
    with output_lock(args.save, what="--save"):
        return _inspect(args, text)


def _inspect(args, text: str) -> int:
    """:func:`run` once the text is read and ``--save`` is locked."""
    loaded = load_model(args.model)
    info = loaded.info
    layer = args.layer % info.num_layers  # checked by check_args: -1 is the last layer
    ins = inspect_text(text, window=args.window, max_tokens=args.max_tokens, cosine=args.cosine, loaded=loaded,
                       device=args.device)
    w = ins.window
    s = ins.s[layer, args.head]
    summary = summarise(s, w, args.top)
    if args.json:
        out = {
            "model": info.name,
            "fingerprint": info.fingerprint,
            "window": w.index,
            "windows": ins.n_windows,
            "layer": layer,
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
        print(f"context similarity S = Z Zᵀ ({kind}, diagonal zeroed), layer {layer} head {args.head}:")
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
        print(f"headseg: saved Z {ins.z.shape}, S, A, fnorm and norm_attention for all heads to {args.save}", file=sys.stderr)
    return 0


def register(sub) -> None:
    """Add the ``inspect`` command and its flags to the ``sub`` parsers."""
    p = sub.add_parser("inspect", help="show one head's context similarity matrix on a text",
                       description="Print the tokens, the context similarity matrix summary and the most similar "
                                   "token pairs for one head; --save writes Z, S, A and norms for all heads.")
    p.add_argument("input", metavar="TEXT|FILE", help="text, or a path to a text file ('-' for stdin)")
    p.add_argument("--layer", type=int, default=-1, help="layer, from 0, or from the last: -1 (default)")
    p.add_argument("--head", type=int, default=0)
    options.add_model(p)
    options.add_device(p)
    p.add_argument("--window", type=int, default=0, help="which window of a long text (0-based)")
    p.add_argument("--max-tokens", type=int, default=WINDOW_TOKENS,
                   help=f"window size in tokens (default {WINDOW_TOKENS})")
    p.add_argument("--top", type=int, default=10, help="how many pairs to list")
    p.add_argument("--cosine", action="store_true", help="cosine instead of the paper's dot product")
    p.add_argument("--save", metavar="OUT.npz", help="write Z, S, A, norms for all heads")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    options.add_force(p, "--save")
    options.add_input(p)
    p.set_defaults(func=run)
