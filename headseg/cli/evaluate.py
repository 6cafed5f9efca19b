"""``headseg evaluate``: score segmenters against labelled boundaries.

The methods, their names and the options each takes come from the method
registry (:mod:`headseg.segmenter.evaluation.methods`), the ``--backend``
choices from the backend registry (:mod:`headseg.export.backends`): nothing
here lists them again.
"""

from __future__ import annotations

import argparse
import json
import sys

from headseg.analysis.errors import InputError
from headseg.analysis.io import check_output_path

from headseg.segmenter.evaluation.harness import ResultStore, check_k_modes, evaluate, format_tables, load_datasets
from headseg.segmenter.evaluation.loaders import FORMATS
from headseg.segmenter.evaluation.methods import METHODS, make_method, method_names, parse_methods

from . import options


def build_methods(names: list[str], args: argparse.Namespace) -> list:
    """The methods ``names``, each built with the options it registered, read from ``args`` (e.g. ``--model``)."""
    return [make_method(name, **{opt: getattr(args, opt) for opt in METHODS[name].options}) for name in names]


def run(args: argparse.Namespace) -> int:
    """Run ``headseg evaluate``: score the methods on every data set, print the tables; returns the exit code."""
    names = parse_methods(args.method)
    if args.backend == "torch" and "headseg" in names:
        options.require(*options.TORCH_MODULES)
    if args.limit is not None and args.limit < 1:
        raise InputError("--limit must be at least 1")
    if args.wiki_level is not None and args.wiki_level < 1:
        raise InputError("--wiki-level must be at least 1")
    check_output_path(args.out, args.data)
    datasets = load_datasets(args.data, fmt=args.format, wiki_level=args.wiki_level, limit=args.limit,
                             encoding=args.encoding, max_bytes=args.max_bytes)
    methods = build_methods(names, args)
    store = ResultStore(args.out)
    no_k = check_k_modes(methods, args.oracle_k)
    if no_k and not args.quiet:
        print(f"note: {', '.join(no_k)} cannot be told the number of segments; run without it", file=sys.stderr)
    summaries = evaluate(datasets, methods, oracle_k=args.oracle_k, store=store, quiet=args.quiet, redo=args.redo)
    if args.json:
        print(json.dumps([s.to_dict() for s in summaries], indent=2, ensure_ascii=False))
    else:
        print(format_tables(summaries))
    if args.out and not args.quiet:
        print(f"results written to {args.out}", file=sys.stderr)
    return 0


def register(sub) -> None:
    """Add the ``evaluate`` command to the subparsers ``sub``."""
    p = sub.add_parser(
        "evaluate", help="score segmenters against labelled boundaries (Pk, WindowDiff, B, P/R/F1)",
        description="Run segmentation methods on labelled data and print, per data set and method, Pk, "
                    "WindowDiff, boundary similarity B, boundary precision/recall/F1 (exact and within one "
                    "unit), predicted vs reference segments (mean ± std over documents) and documents/s. "
                    "Each DATA is a file or a directory of files; a directory is one data set.")
    p.add_argument("data", nargs="+", metavar="DATA", help="data file or directory (one data set each)")
    p.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detect per file)")
    p.add_argument("--method", default=",".join(method_names()), metavar="M[,M...]",
                   help=f"methods to run, comma-separated, or 'all' (from: {', '.join(method_names())})")
    p.add_argument("--oracle-k", action="store_true",
                   help="tell each method that can take it the reference number of segments")
    p.add_argument("--out", metavar="RESULTS.json",
                   help="keep every per-document result here (rewritten as it goes; a re-run skips what is done)")
    p.add_argument("--redo", action="store_true", help="with --out: run the methods again even where results exist")
    p.add_argument("--limit", type=int, metavar="N", help="at most N documents per data set")
    p.add_argument("--wiki-level", type=int, metavar="L", help="Wiki format: only sections of level <= L open segments")
    p.add_argument("--seed", type=int, default=0, help="seed of the random baseline")
    options.add_model(p)
    options.add_profile(p, "head profile for the headseg method")
    options.add_engine(p, "for the headseg method")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")
    options.add_quiet(p)
    options.add_input(p)
    p.set_defaults(func=run)
