"""``headseg study``: the similarity-matrix study over a corpus, its report and the head profile."""

from __future__ import annotations

import shlex
import sys
from dataclasses import fields
from pathlib import Path

from headseg.analysis.outputs import check_output_dir, output_lock
from headseg.analysis.ray import probe_address
from headseg.analysis.errors import InputError
from headseg.analysis.model import load_model
from headseg.analysis.study import Study, StudyConfig, run_study
from headseg.analysis.study.corpus import CorpusDocument, read_corpus
from headseg.analysis.study.runner import CHECKPOINT, OUTPUT_FILES, check_out_dir
from headseg.analysis.text import WINDOW_TOKENS

from . import options

#: the figures the report writes beside OUTPUT_FILES
FIGURES = ("fig_distance.png", "fig_sentence_repetition.png", "fig_separator_focus.png", "fig_selection.png")


def study_config(args) -> StudyConfig:
    """The :class:`StudyConfig` of a parsed command line.

    Every field comes from the flag of the same name (``--seq-len`` → ``seq_len``),
    or keeps its default where there is none; the exceptions are set below.
    """
    values = {f.name: getattr(args, f.name) for f in fields(StudyConfig) if hasattr(args, f.name)}
    values.update(
        corpus=list(args.corpus),
        corpus_name=args.corpus_name or "",
        figures=not args.no_figures,
        command="headseg study " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else "",
    )
    return StudyConfig(**values)


def check_args(args) -> StudyConfig:
    """The study's settings, and every argument error, found before the model loads (exit 2)."""
    cfg = study_config(args)
    options.check_finite(args, "top_fraction", "attention_threshold")
    options.check_input(args)
    options.check_positive(args, "workers", "stop_after_batches")
    if args.engine == "ray" and (args.report_only or args.stop_after_batches is not None):
        raise InputError("--report-only and --stop-after-batches are for the local engine")
    if args.engine != "ray" and (args.address or args.workers):
        raise InputError("--address and --workers go with --engine ray")
    if args.engine == "ray" and args.address:
        probe_address(args.address)  # an unreachable cluster: one line now, not Ray retrying for minutes
    options.require(*options.TORCH_MODULES, *(("matplotlib",) if cfg.figures else ()))
    check_output_dir(args.out, cfg.corpus, files=OUTPUT_FILES + FIGURES)
    check_out_dir(Path(args.out), cfg.resume or args.report_only, cfg.force)
    if args.report_only and not (Path(args.out) / CHECKPOINT).is_file():
        raise InputError(f"--report-only: no {CHECKPOINT} in {args.out}")
    # the model's window limit from its config.json: a bad --seq-len costs no weight loading
    cfg.validate(options.model_limits(args.model)[2])
    return cfg


def run(args) -> int:
    """``headseg study``: run (or resume, or report from the checkpoint) and print a summary; returns the exit code."""
    cfg = check_args(args)
    # the corpus is read before the model loads: a missing, binary or empty file is one line now, not after it
    docs = read_corpus(cfg.corpus, encoding=cfg.encoding, max_bytes=cfg.max_bytes)
    with output_lock(args.out):
        return _study(args, cfg, docs)


def _study(args, cfg: StudyConfig, docs: list[CorpusDocument]) -> int:
    """:func:`run` once ``--out`` is locked; ``docs`` the corpus, read (the Ray engine's workers read their own)."""
    loaded = load_model(args.model)
    if args.engine == "ray":
        from headseg.analysis.study.distributed import run_study_ray

        report = run_study_ray(cfg, model=args.model, loaded=loaded, shards=args.workers, address=args.address,
                               docs=docs)
    elif args.report_only:
        cfg.resume = True
        report = Study(cfg, loaded, docs).report_from_checkpoint()
        print(f"headseg: interim report from {report['batches_done']} batches ({report['windows']:,} windows) in {args.out}",
              file=sys.stderr)
    else:
        report = run_study(cfg, loaded, stop_after_batches=args.stop_after_batches, docs=docs)
    if report is None:
        print(f"headseg: stopped after {args.stop_after_batches} batches; continue with --resume", file=sys.stderr)
        return 0
    if not args.quiet:
        print(f"{report['windows']:,} windows; wrote report.json, report.md, heads.json to {args.out}")
        for c in report["claims"]:
            print(f"  {c['verdict']:>15}: {c['claim']}")
        sel = ", ".join(f"L{s['layer']}H{s['head']} ({s['weight']:.2f})" for s in report["selection"]["selected"])
        print(f"selected heads: {sel}")
    return 0


def register(sub) -> None:
    """Add the ``study`` command and its flags to the ``sub`` parsers."""
    p = sub.add_parser(
        "study",
        help="run the similarity-matrix study on a corpus and select heads",
        description="Stream windows of a corpus through the model, accumulate per-head statistics of the "
                    "context similarity matrices, and write report.json, report.md, PNG figures and heads.json "
                    "(the head profile) to --out.  Interrupted runs continue with --resume.",
    )
    p.add_argument("corpus", nargs="+", metavar="CORPUS",
                   help="text files, folders (*.txt, *.ref, *.text, *.md, *.jsonl inside, recursively) or JSONL files "
                        "with a \"text\" field; '==========' lines are removed")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    options.add_model(p)
    p.add_argument("--samples", type=int, default=20000, help="number of windows (default 20000)")
    p.add_argument("--seq-len", type=int, default=WINDOW_TOKENS,
                   help=f"window length in tokens incl. special tokens (default {WINDOW_TOKENS})")
    p.add_argument("--seed", type=int, default=0, help="seed for sample drawing and the permutation null")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--top-fraction", type=float, default=0.05,
                   help="share of pairs per matrix that count as high-similarity elements (default 0.05)")
    p.add_argument("--attention-threshold", type=float, default=1.0,
                   help="attention variant: symmetrised attention at least this multiple of uniform (default 1)")
    p.add_argument("--short-range", type=int, default=8, help="distance up to which a pair is short-range (default 8)")
    p.add_argument("--null-permutations", type=int, default=4, help="permutations per window for the focus null")
    p.add_argument("--max-heads", type=int, default=12, help="at most this many heads in heads.json")
    p.add_argument("--min-heads", type=int, default=8, help="at least this many heads in heads.json")
    p.add_argument("--corpus-name", help="description of the corpus recorded in the outputs")
    p.add_argument("--checkpoint-every", type=int, default=20, help="checkpoint every N batches (default 20)")
    p.add_argument("--resume", action="store_true", help="continue from DIR/checkpoint.npz")
    p.add_argument("--force", action="store_true", help="write into a non-empty DIR, starting over")
    p.add_argument("--stop-after-batches", type=int, default=None, help=argparse_suppress())
    p.add_argument("--report-only", action="store_true",
                   help="write the outputs from DIR/checkpoint.npz as it stands (interim report), processing nothing")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local, or ray: batches of windows sharded over Ray tasks, accumulators merged here")
    p.add_argument("--address", default=None, help="ray: cluster address (default: start a local Ray)")
    p.add_argument("--workers", type=int, default=None, help="ray: number of shards (default: the cluster's CPUs)")
    options.add_device(p)
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    options.add_quiet(p, "no progress bar or summary")
    options.add_input(p)
    p.set_defaults(func=run)


def argparse_suppress():
    """``argparse.SUPPRESS``: hides a test-only flag from ``--help``."""
    import argparse

    return argparse.SUPPRESS
