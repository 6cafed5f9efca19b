"""The README's code runs as pasted: every Python block, and the offline, torch-free install.

The Python blocks of the framework section are run by tests/integrations/test_readme_examples.py (each
needs its framework's extra); the others run here, each in a fresh interpreter, so that one block cannot
lean on a name another defined.  The install block is run as a user would run it, from another folder,
with the checkout's path for ``/path/to/headseg`` and an empty Hub cache, so it can only pass offline.
The command-line and TUI blocks are synopses (``FILE...``, ``[--model PATH]``), fenced as ``text``:
:func:`test_every_block_is_run_or_a_synopsis` keeps that list honest.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FRAMEWORKS = "## Using headseg in LangChain, LlamaIndex and Haystack"
OFFLINE = "Offline and without torch"


def _blocks(text: str = README) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def _python_blocks() -> list[str]:
    before_frameworks = README.split(FRAMEWORKS, 1)[0]
    return [body for lang, body in _blocks(before_frameworks) if lang == "python"]


def _install_block() -> str:
    return next(body for lang, body in _blocks(README.split(OFFLINE, 1)[1]) if lang == "bash")


def test_every_block_is_run_or_a_synopsis():
    """Each fence is Python (run below or by the framework tests), the offline install (run below), one of
    the setup blocks the quickstart and CI run (``make``; the install with extras; the GPU swap, which
    needs the CUDA build), or a synopsis."""
    kinds = []
    for lang, body in _blocks():
        if lang == "python":
            kinds.append("python")
        elif body == _install_block():
            kinds.append("offline install")
        elif lang == "bash" and all(line.startswith(("make ", "python3 -m venv", "venv/bin/pip"))
                                    for line in body.strip().splitlines()):
            kinds.append("setup")
        elif lang == "text" and body.lstrip().startswith("headseg "):
            kinds.append("synopsis")
        else:
            kinds.append(f"unrun {lang}: {body[:60]!r}")
    assert not [k for k in kinds if k.startswith("unrun")], kinds
    assert kinds.count("python") == len(_python_blocks()) + 3   # + the three framework examples
    assert kinds.count("offline install") == 1


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_python_block_runs_as_pasted(index, tmp_path):
    block = _python_blocks()[index]
    if "headseg.analysis import load_model" in block:
        pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_offline_install_runs_as_pasted_from_another_folder(tmp_path):
    """A fresh venv, the core and the model package without its dependencies: no torch, and three segments
    of the sample with an empty Hub cache and ``HF_HUB_OFFLINE=1`` (so nothing came from the Hub)."""
    script = "set -e\n" + _install_block().replace("/path/to/headseg", str(ROOT))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HF_HUB_CACHE=str(tmp_path / "empty-hub"), HEADSEG_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.findall(r"^----- segment (\d)/3 ", proc.stdout, flags=re.M) == ["1", "2", "3"], proc.stdout[-2000:]
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    heavy = sorted(p.name for p in site.iterdir() if p.name.split("-")[0] in ("torch", "transformers",
                                                                           "sentence_transformers"))
    assert heavy == [], heavy
    assert not (tmp_path / "empty-hub").exists() or not any((tmp_path / "empty-hub").rglob("*.safetensors"))
