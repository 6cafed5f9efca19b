"""Write an SVG screenshot of the TUI (used for ``docs/tui.svg``).

    .venv/bin/python -m tui.screenshot docs/tui.svg [FILE] [--size 140x44] [--keys a,down]

Runs the app headlessly on FILE (default: the bundled sample) with the
embedded model, waits for the model, the window and the segmenter, presses
the given keys and saves the screen.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from headseg.analysis.errors import HeadsegError, InputError, shown
from headseg.analysis.writing import atomic_write_text


def _size(value: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in value.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 140x44, not {shown(value)}") from None
    if w < 40 or h < 12:
        raise argparse.ArgumentTypeError("size must be at least 40x12")
    return w, h


async def capture(app, size: tuple[int, int], keys: list[str], find: str | None) -> str:
    """Run ``app`` headlessly at ``size``, find ``find`` and press ``keys``; returns the screen as SVG."""
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        if find:
            app.find_token(find)
            await app.workers.wait_for_complete()
            await pilot.pause()
        for k in keys:
            await pilot.press(k)
            await app.workers.wait_for_complete()
            await pilot.pause()
        # Toasts time out at different moments from run to run: leave them out.
        app.clear_notifications()
        await pilot.pause()
        if app.status != "ready":
            raise InputError(f"the app could not show the input: {app.message}")
        return app.export_screenshot(title="headseg tui")


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit code."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ap = argparse.ArgumentParser(prog="python -m headseg.tui.screenshot", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="SVG file to write")
    ap.add_argument("file", nargs="?", help="text file (default: the bundled sample)")
    ap.add_argument("--model", default=None, metavar="PATH")
    ap.add_argument("--size", type=_size, default=(140, 44), help="terminal size (default 140x44)")
    ap.add_argument("--keys", default="", help="comma-separated keys to press first (Textual key names)")
    ap.add_argument("--find", default=None, help="put the cursor on this token first")
    args = ap.parse_args(argv)
    from .app import create_app

    app = create_app(args.file, model=args.model, color_system="truecolor")
    keys = [k for k in args.keys.split(",") if k]
    try:
        svg = asyncio.run(capture(app, args.size, keys, args.find))
    except HeadsegError as exc:
        print(f"headseg: error: {exc}", file=sys.stderr)
        return exc.exit_code
    atomic_write_text(args.out, svg)
    print(f"wrote {args.out} ({len(svg):,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
