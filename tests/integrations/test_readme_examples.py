"""The README's framework examples run as written, and importing headseg imports no framework."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Using headseg in LangChain, LlamaIndex and Haystack"


def _examples() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_section_has_one_example_per_framework():
    blocks = _examples()
    assert [re.search(r"headseg\.integrations\.(\w+)", b).group(1) for b in blocks] == \
           ["langchain", "llamaindex", "haystack"]


@pytest.mark.slow
@pytest.mark.parametrize("index,package", [(0, "langchain_text_splitters"), (1, "llama_index.core"),
                                           (2, "haystack")])
def test_readme_example_runs(index, package, monkeypatch, embedded, capsys):
    pytest.importorskip(package)
    monkeypatch.chdir(ROOT)
    exec(compile(_examples()[index], f"README example {index + 1}", "exec"), {})


def test_importing_headseg_imports_no_framework():
    code = ("import sys, headseg, headseg.integrations; "
            "bad = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'langchain_core', 'langchain_text_splitters', 'llama_index', 'haystack'}); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
