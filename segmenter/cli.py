"""The ``headseg`` command line.

Each subcommand lives in its own module exposing ``register(subparsers)``; the
parser sets ``args.func``.  Every :class:`HeadsegError` becomes a one-line
message on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from analysis import __version__
from analysis.errors import HeadsegError

#: subcommand modules, in the order ``--help`` lists them; a module that is not
#: there yet (or fails to import its optional dependencies) is skipped.
SUBCOMMANDS = (
    "segmenter.commands",
    "analysis.inspect_cmd",
    "analysis.study_cmd",
    "segmenter.evaluate_cmd",
    "export.cli",
    "tui.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="headseg",
        description="Text segmentation from the attention heads of a BERT-family encoder.",
    )
    parser.add_argument("--version", action="version", version=f"headseg {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in SUBCOMMANDS:
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == modname or modname.startswith(exc.name + ".")):
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        rc = args.func(args)
    except HeadsegError as exc:
        print(f"headseg: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("headseg: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into e.g. `head`: quietly stop.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
