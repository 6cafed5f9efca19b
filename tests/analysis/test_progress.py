"""Progress bars show only to a person: the terminal test they share with ``headseg tui``."""

from __future__ import annotations

import io

from headseg.analysis.progress import is_terminal, progress_bar


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_is_terminal():
    assert is_terminal(_Tty())
    assert not is_terminal(io.StringIO())
    assert not is_terminal(None)
    assert not is_terminal(object())  # a replacement stream without isatty
    assert not is_terminal(_closed_file())


def _closed_file():
    f = io.StringIO()
    f.close()
    return f  # isatty() on a closed stream raises ValueError


def test_progress_bar_is_off_without_a_terminal():
    assert progress_bar(10, file=io.StringIO()).disable
    assert progress_bar(10, file=_closed_file()).disable  # was a ValueError from isatty()
    bar = progress_bar(10, file=_Tty())
    assert not bar.disable
    bar.close()
    assert progress_bar(10, file=_Tty(), disable=True).disable
