"""``headseg tui``: the interactive inspector (see :mod:`headseg.tui.app`)."""

from __future__ import annotations

import sys
from pathlib import Path

from headseg.analysis.text import WINDOW_TOKENS
from headseg.analysis.errors import InputError, ProfileError
from headseg.analysis.reading import read_json_object
from headseg.analysis.progress import is_terminal

from headseg.tui.data import DEFAULT_HEAD_BYTES, DEFAULT_MAX_WINDOWS, read_document


def register(sub) -> None:
    """Add the ``tui`` command and its flags to the ``sub`` parsers."""
    from . import options

    p = sub.add_parser(
        "tui",
        help="interactive viewer of head matrices and segment boundaries",
        description="A terminal app showing, window by window, each head's context similarity matrix, "
        "attention, norm-weighted attention and sentence blocks, a layer x head grid coloured by a "
        "statistic, and the document with its units and topic segments. Press ? in the app for keys.",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="text file to inspect (default: the bundled sample)")
    options.add_model(p)
    p.add_argument("--profile", metavar="heads.json", help="head profile whose heads are marked (default: the shipped one)")
    p.add_argument("--report", metavar="DIR/report.json", help="study report with per-head statistics for the grid")
    p.add_argument("--max-tokens", type=int, default=WINDOW_TOKENS,
                   help=f"window size in tokens (default {WINDOW_TOKENS})")
    p.add_argument("--max-windows", type=int, default=DEFAULT_MAX_WINDOWS,
                   help=f"show at most this many windows of a long text (default {DEFAULT_MAX_WINDOWS})")
    p.add_argument("--head-bytes", type=int, default=DEFAULT_HEAD_BYTES,
                   help=f"read only this many bytes of a larger file (default {DEFAULT_HEAD_BYTES:,})")
    p.add_argument("--colors", choices=("auto", "truecolor", "256"), default="auto",
                   help="heatmap colours; auto = truecolor when $COLORTERM says so, else 256")
    p.add_argument("--export-dir", default=".", metavar="DIR", help="where `e` saves PNGs (default: .)")
    p.add_argument("--no-segmenter", action="store_true", help="mark sentences only (skip the segmenter)")
    p.set_defaults(func=run)


def run(args) -> int:
    """``headseg tui``: check the flags and the file, then run the app until it quits; returns the exit code."""
    from . import options

    # every head is read with torch; `e` saves PNGs with matplotlib
    options.require("textual", *options.TORCH_MODULES, "matplotlib")
    if args.max_tokens < 8:
        raise InputError(f"--max-tokens {args.max_tokens} is too small (at least 8)")
    if args.max_windows < 1:
        raise InputError("--max-windows must be at least 1")
    if args.head_bytes < 1:
        raise InputError("--head-bytes must be at least 1")
    if args.file is not None and args.file != "-":
        # what the app would read (missing, a folder, binary, empty): one line now, not an error inside the app
        read_document(args.file, args.head_bytes)
    # a profile that cannot be read is exit 4 here as in every command; a report is the user's input (2)
    for flag, path, error in (("--profile", args.profile, ProfileError), ("--report", args.report, InputError)):
        if path is not None:
            # the app shows a file it cannot use as a note; a file named on the command line that is not
            # even a JSON object is the user's slip: one line now
            read_json_object(path, error, missing=f"{flag} {{path}}: no such file",
                             unreadable=f"{flag} {{path}}: not a readable JSON file",
                             not_object=f"{flag} {{path}}: not a JSON object")
    export_dir = Path(args.export_dir).expanduser()
    if export_dir.exists() and not export_dir.is_dir():
        raise InputError(f"--export-dir {args.export_dir}: not a folder")
    if not (is_terminal(sys.stdin) and is_terminal(sys.stderr)):
        # Textual draws on stderr and reads keys from stdin; without a terminal the app can never be quit
        # and spins a core until it is killed
        raise InputError("headseg tui needs an interactive terminal (its standard input and error are not one); "
                         "for a picture of it without one: python -m headseg.tui.screenshot")
    from headseg.tui.app import create_app

    app = create_app(
        args.file,
        model=args.model,
        profile=args.profile,
        report=args.report,
        segmenter=None if args.no_segmenter else "auto",
        max_tokens=args.max_tokens,
        max_windows=args.max_windows,
        head_bytes=args.head_bytes,
        color_system=args.colors,
        export_dir=args.export_dir,
    )
    app.run()
    return 0
