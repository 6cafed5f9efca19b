"""Issue 35 item 17: an install hint works as printed, for headseg installed from a checkout (no index has it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from headseg.analysis import extras

ROOT = Path(__file__).resolve().parents[2]


class _Dist:
    def __init__(self, direct_url):
        self._text = None if direct_url is None else json.dumps(direct_url)

    def read_text(self, name):
        return self._text if name == "direct_url.json" else None


@pytest.fixture
def installed(monkeypatch):
    """Pretend headseg was installed with pip from the given source (PEP 610's direct_url.json; None: an index)."""
    def install(direct_url):
        monkeypatch.setattr(extras, "_distributions", lambda: [_Dist(direct_url)])
        extras.install_command.cache_clear()
    yield install
    extras.install_command.cache_clear()


@pytest.mark.parametrize("direct_url, command", [
    ({"url": "file:///home/ann/headseg", "dir_info": {"editable": True}}, "pip install -e '/home/ann/headseg[tui]'"),
    ({"url": "file:///home/ann/headseg", "dir_info": {}}, "pip install '/home/ann/headseg[tui]'"),
    ({"url": "file:///tmp/w/headseg-0.2.0-py3-none-any.whl", "archive_info": {}},
     "pip install '/tmp/w/headseg-0.2.0-py3-none-any.whl[tui]'"),
    ({"url": "file:///home/ann/my%20code/headseg", "dir_info": {}}, "pip install '/home/ann/my code/headseg[tui]'"),
    (None, "pip install 'headseg[tui]'"),
])
def test_issue35_item17_install_command_names_where_headseg_came_from(installed, direct_url, command):
    installed(direct_url)
    assert extras.install_command("tui") == command


def test_issue35_item17_the_checkout_s_egg_info_does_not_hide_the_install(monkeypatch):
    # run from inside the checkout, its own headseg.egg-info (no direct_url.json) is found first
    editable = _Dist({"url": "file:///home/ann/headseg", "dir_info": {"editable": True}})
    monkeypatch.setattr(extras, "_distributions", lambda: [_Dist(None), editable])
    extras.install_command.cache_clear()
    try:
        assert extras.install_command("tui") == "pip install -e '/home/ann/headseg[tui]'"
    finally:
        extras.install_command.cache_clear()


def test_issue35_item17_the_cli_hint_is_the_install_command(installed, monkeypatch, tmp_path, capsys):
    import headseg.cli.tui as tui_command
    from headseg.cli import main

    installed({"url": "file:///home/ann/headseg", "dir_info": {"editable": True}})

    def without_textual(args):
        raise ModuleNotFoundError("No module named 'textual'", name="textual")

    monkeypatch.setattr(tui_command, "run", without_textual)  # the parser takes it when main builds it
    doc = tmp_path / "doc.txt"
    doc.write_text("One sentence. Another one.\n", encoding="utf-8")
    assert main(["tui", str(doc)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'tui' extra (pip install -e '/home/ann/headseg[tui]')" in err, err


# every hint in the product and the docs comes from install_command or names a checkout, never the index's name
_INDEX_HINT = re.compile(r"install\s+[`'\"]?headseg\[", re.IGNORECASE)


@pytest.mark.parametrize("folder", ["headseg", "analysis", "segmenter", "export", "tui", "docs", "README.md"])
def test_issue35_item17_no_hint_names_an_index_headseg(folder):
    base = ROOT / folder
    files = [base] if base.is_file() else [p for p in base.rglob("*") if p.suffix in (".py", ".md")]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in files if p.name != "extras.py"
             for m in _INDEX_HINT.finditer(p.read_text(encoding="utf-8"))]  # a hint may span a line break
    assert not found, found
