"""What the command-line tests share: running ``headseg`` in-process and the one-line error rule."""

from __future__ import annotations

from headseg.cli import main


def one_line(err: str) -> bool:
    """``err`` is exactly one ``headseg: error:`` line, no traceback."""
    return err.startswith("headseg: error: ") and err.count("\n") == 1 and "Traceback" not in err


def run(argv: list[str], capsys) -> tuple[int, str]:
    """``headseg ARGV`` in this process: its exit code and what it wrote on stderr."""
    rc = main(argv)
    return rc, capsys.readouterr().err
