"""``headseg evaluate``: score segmenters against labelled boundaries.

The methods, their names and the options each takes come from the method
registry (:mod:`headseg.segmenter.evaluation.methods`), the ``--backend``
choices from the backend registry (:mod:`headseg.export.backends`): nothing
here lists them again.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.outputs import check_output_path, output_lock
from headseg.analysis.reading import read_start
from headseg.analysis.writing import atomic_write_bytes

from headseg import evaluation as _headseg_method  # noqa: F401  # registers headseg among the methods
from headseg.config import SegmenterConfig
from headseg.segmenter.evaluation.calibration import (ReliabilityBin, confidence_hits, format_reliability,
                                                      is_reliability_png, reliability, reliability_png)
from headseg.segmenter.evaluation.harness import (RESULTS_FORMAT, ResultStore, check_k_modes, evaluate, format_tables,
                                                 k_mode, load_datasets)
from headseg.segmenter.evaluation.loaders import FORMATS
from headseg.segmenter.evaluation.methods import METHODS, make_method, method_names, parse_methods

from . import options


def build_methods(names: list[str], args: argparse.Namespace) -> list:
    """The methods ``names``, each built with the options it registered, read from ``args`` (e.g. ``--seed``);
    ``config`` is the :class:`SegmenterConfig` of the segmenter flags (``--model``, ``--backend``...)."""
    values = dict(vars(args), config=SegmenterConfig.from_args(args))
    return [make_method(name, **{opt: values[opt] for opt in METHODS[name].options}) for name in names]


def is_results_file(path) -> bool:
    """Whether ``path`` is a results file of ``headseg evaluate --out`` (its ``format`` entry, written first)."""
    return re.match(rb'\s*\{\s*"format":\s*"' + RESULTS_FORMAT.encode() + rb'"', read_start(path, 4096)) is not None


def check_args(args: argparse.Namespace) -> list[str]:
    """The methods to run, and every argument error, found before any data or model is loaded (exit 2)."""
    try:
        names = parse_methods(args.method)
    except HeadsegError as exc:
        raise InputError(f"--method: {exc}") from None
    options.check_positive(args, "limit", "wiki_level")
    options.check_input(args)
    out = check_output_path(args.out, args.data, ours=is_results_file, force=args.force)
    if args.calibration_png is not None:
        options.require("matplotlib")
        png = check_output_path(args.calibration_png, args.data, what="--calibration-png",
                                ours=lambda p: is_reliability_png(read_start(p, 4096)), force=args.force)
        if png is None:
            raise InputError("--calibration-png: give a file name (the diagram is not written to standard output)")
        if out is not None and out.resolve() == png.resolve():
            raise InputError("--calibration-png and --out name the same file")
    if args.force and not (args.out or args.calibration_png):
        raise InputError("--force goes with --out or --calibration-png")
    if args.redo and not args.out:
        raise InputError("--redo goes with --out (without it nothing is stored, so every method runs anyway)")
    if args.backend == "torch" and "headseg" in names:
        options.require(*options.TORCH_MODULES)
    # a method's setup failure is one record per document (and exit 0): a typo in --model or --profile is not
    takes = {opt for name in names for opt in METHODS[name].options}
    if "config" in takes:
        SegmenterConfig.from_args(args)  # a bad segmenter setting is one line now, before the data
    options.check_model_and_profile(args.model if takes & {"model", "config"} else None,
                                    args.profile if "config" in takes else None)
    return names


def run(args: argparse.Namespace) -> int:
    """Run ``headseg evaluate``: score the methods on every data set, print the tables; returns the exit code."""
    names = check_args(args)
    with output_lock(args.out), output_lock(args.calibration_png, what="--calibration-png"):
        return _evaluate(args, names)


def _evaluate(args: argparse.Namespace, names: list[str]) -> int:
    """:func:`run` once ``--out`` is locked."""
    if args.out and args.force and not is_results_file(args.out):
        store = ResultStore()  # --force: a file that is not a results file is replaced, not read
        store.path = Path(args.out)
    else:
        store = ResultStore(args.out)
    datasets = load_datasets(args.data, fmt=args.format, wiki_level=args.wiki_level, limit=args.limit,
                             encoding=args.encoding, max_bytes=args.max_bytes)
    methods = build_methods(names, args)
    no_k = check_k_modes(methods, args.oracle_k)
    if no_k and not args.quiet:
        print(f"headseg: note: {', '.join(no_k)} cannot be told the number of segments; run without it",
              file=sys.stderr)
    summaries = evaluate(datasets, methods, oracle_k=args.oracle_k, store=store, quiet=args.quiet, redo=args.redo)
    wanted = args.calibration or args.calibration_png is not None
    calibration = _calibration(store, datasets, methods, args.oracle_k) if wanted else None
    if args.json:
        out = [s.to_dict() for s in summaries]
        print(json.dumps(out if calibration is None else {"summaries": out, "calibration": {
            name: {"documents": with_conf, "documents_without": without, "bins": [b._asdict() for b in table]}
            for name, (with_conf, without, table) in calibration.items()}}, indent=2, ensure_ascii=False))
    else:
        print(format_tables(summaries))
        for name, (with_conf, without, table) in (calibration or {}).items():
            print(f"\nconfidence of {name}'s boundaries, all data sets together: a boundary is right when a "
                  f"reference boundary lies within one unit ({with_conf} documents with confidences"
                  + (f", {without} without" if without else "") + ")\n")
            print(format_reliability(table) if table else "(no boundaries)")
    if args.calibration_png is not None:
        tables = {f"{name}'s boundaries": table for name, (_, _, table) in calibration.items() if table}
        if tables:
            atomic_write_bytes(args.calibration_png, reliability_png(tables, "Boundary confidence on your data"))
            if not args.quiet:
                print(f"headseg: reliability diagram written to {args.calibration_png}", file=sys.stderr)
        elif not args.quiet:
            print("headseg: note: no boundary has a confidence: no diagram written", file=sys.stderr)
    if args.out and not args.quiet:
        print(f"headseg: results written to {args.out}", file=sys.stderr)
    return 0


def _calibration(store, datasets, methods, oracle_k: bool) -> dict[str, tuple[int, int, list[ReliabilityBin]]]:
    """Per method that gave its boundaries confidences: the documents with and without them, and the
    reliability table over every data set."""
    out = {}
    for m in methods:
        pairs, with_conf, without = confidence_hits(store, datasets, m.name, k_mode(oracle_k, m))
        if with_conf:
            out[m.name] = (with_conf, without, reliability(pairs))
    return out


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
    options.add_force(p, "--out or --calibration-png")
    p.add_argument("--limit", type=int, metavar="N", help="at most N documents per data set")
    p.add_argument("--wiki-level", type=int, metavar="L", help="Wiki format: only sections of level <= L open segments")
    p.add_argument("--seed", type=int, default=0, help="seed of the random baseline")
    options.add_model(p)
    options.add_profile(p, "head profile for the headseg method")
    options.add_engine(p, "for the headseg method")
    p.add_argument("--calibration", action="store_true",
                   help="also print how often the boundaries of each confidence bin are right (within one unit "
                        "of a reference boundary), for the methods that give confidences; with --json the "
                        "output is {\"summaries\": [...], \"calibration\": {...}}")
    p.add_argument("--calibration-png", metavar="FILE.png",
                   help="also draw that table as a reliability diagram into this PNG (implies --calibration in "
                        "the output; needs the plots extra; replaces only a diagram headseg drew, unless --force)")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")
    options.add_quiet(p)
    options.add_input(p)
    p.set_defaults(func=run)
