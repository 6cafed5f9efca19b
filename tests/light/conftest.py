"""The light tests: what the core install (no torch, no transformers, no matplotlib) serves.

They run in the full test environment too, where they check what the serving
path imports; CI runs them again in a venv with ``pip install .`` alone
(``.ci/run``), where torch is not there to import at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_TEXT = "The cat sat on the mat. It purred.\n\nStocks fell sharply today. Markets were nervous."


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.light)


def has(module: str) -> bool:
    """Whether ``module`` is installed (without importing it)."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


def child_env(**extra: str) -> dict:
    """The environment of a child process: this one's, without the variables that would quiet transformers."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRANSFORMERS_VERBOSITY", "TRANSFORMERS_NO_ADVISORY_WARNINGS", "HF_HUB_DISABLE_PROGRESS_BARS")}
    env.update(extra)
    return env


def run_py(code: str, env: dict | None = None, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """``python -I -c code`` in a child process; stdout and stderr captured apart.

    ``-I``: the checkout's own ``headseg/`` folder (the current directory) must not shadow
    the installed package, whose subpackages live in other folders of the checkout.
    """
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=600,
                          env=env or child_env(), cwd=cwd)


@pytest.fixture(scope="session")
def warm_cache(isolated_cache) -> Path:
    """The session's headseg cache, holding the default model's fingerprint and serving artifact.

    One child process exports it, in the light venv without torch (headseg's own
    exporter writes the graph from the weights).  ``HEADSEG_TEST_WARM_CACHE``
    may name a cache to start from instead.
    """
    warm = os.environ.get("HEADSEG_TEST_WARM_CACHE")
    if warm:
        shutil.copytree(warm, isolated_cache, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.lock"))
    r = run_py("from headseg import Segmenter\n"
               "print(Segmenter().backend.name)")
    if r.returncode != 0 or r.stdout.strip() != "onnx":
        pytest.fail(f"cannot export the serving graph into the cache: {r.stderr.strip()[-500:]}")
    return isolated_cache
