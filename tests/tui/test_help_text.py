"""Issue 35 item 24: the help screen's text, as Textual renders its markup."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("textual")

from textual.content import Content  # noqa: E402

from headseg.tui.screens import HELP, HelpScreen  # noqa: E402


def _lines() -> list[str]:
    return Content.from_markup(HELP).plain.splitlines()


def test_issue35_item24_layer_keys_show_as_brackets():
    layer = next(line for line in _lines() if "layer" in line)
    assert layer.split()[:3] == ["[", "/", "]"], layer
    assert "[/b]" not in Content.from_markup(HELP).plain


def test_issue35_item24_no_help_line_wraps():
    # the box's width less its border (1 each side) and padding (2 each side): wider lines wrapped mid-phrase
    width = int(re.search(r"Static \{ width: (\d+);", HelpScreen.DEFAULT_CSS).group(1))
    assert all(len(line) <= width - 2 - 4 for line in _lines()), max(_lines(), key=len)


def _column(line: str) -> int:
    """Where the description of a key line starts (a continuation line has no keys)."""
    if line[2:].startswith(" "):
        return len(line) - len(line.lstrip(" "))
    return 2 + re.search(r"\S {2,}(?=\S)", line[2:]).end()


def test_issue35_item24_descriptions_line_up():
    keys = [line for line in _lines() if line.startswith("  ")]
    assert len(keys) >= 10 and len({_column(line) for line in keys}) == 1, keys
