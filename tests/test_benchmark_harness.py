"""The benchmarks as a package: where they find the data, what importing them changes, how they start children.

The scripts run as ``python -m benchmarks.NAME`` from the repository root (benchmarks/README.md); these
tests run them as that, in child processes, so nothing a script does at import reaches the test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__")


def run_python(code: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_data_root_follows_headseg_data_when_asked_for(tmp_path):
    code = ("import os, json; from benchmarks import common as c; a = str(c.data_root()); "
            f"os.environ['HEADSEG_DATA'] = {str(tmp_path)!r}; "
            "print(json.dumps([a, str(c.data_root()), str(c.segmentation_root()), str(c.dataset_path('manifestos'))]))")
    env = {k: v for k, v in os.environ.items() if k != "HEADSEG_DATA"}
    proc = run_python(code, REPO, env)
    assert proc.returncode == 0, proc.stderr
    default, moved, seg, manifestos = json.loads(proc.stdout)
    assert Path(default) == REPO.parent / "shared" / "data"
    assert (Path(moved), Path(seg)) == (tmp_path, tmp_path / "segmentation")
    assert Path(manifestos) == tmp_path / "segmentation" / ".." / "corpus"


def test_importing_a_benchmark_changes_neither_the_path_nor_the_environment():
    # every script imported in one child: sys.path and os.environ compared before and after each import
    code = ("import importlib, os, sys, json; out = {}\n"
            f"for name in {SCRIPTS!r}:\n"
            "    path, env = list(sys.path), dict(os.environ)\n"
            "    importlib.import_module('benchmarks.' + name)\n"
            "    changed = sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k))\n"
            "    if sys.path != path or changed: out[name] = [sys.path != path, changed]\n"
            "print(json.dumps(out))")
    proc = run_python(code, REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {}


def test_a_child_started_the_benchmarks_way_finds_the_package_from_any_folder(tmp_path):
    # module_command + child_env: what long_document.py, hostile_cost.py and backends.py start their children with
    results = REPO / "benchmarks" / "results" / "short_sections_dev.json"
    code = ("import subprocess; from benchmarks.common import child_env, module_command; "
            f"r = subprocess.run(module_command('benchmarks.short_table', {str(results)!r}), cwd={str(tmp_path)!r}, "
            "env=child_env(), capture_output=True, text=True); print(r.returncode); print(r.stdout)")
    proc = run_python(code, REPO)
    assert proc.returncode == 0, proc.stderr
    rc, _, table = proc.stdout.partition("\n")
    assert rc == "0"
    lines = table.strip().splitlines()
    assert lines[0] == "| method | k | all: Pk / exact | one segment: Pk / exact | two segments: Pk / exact |"
    assert lines[1] == "|---|---|---:|---:|---:|"
    # one row per method and k mode stored in the results file
    stored = json.loads(results.read_text(encoding="utf-8"))
    modes = {(r["method"], r["mode"]) for r in stored["records"].values() if r.get("status") == "ok"}
    assert len(lines) - 2 == len(modes)


def test_markdown_tables_align_as_asked():
    code = ("from benchmarks.common import markdown_table; "
            "print(markdown_table(['a', 'b', 'c'], [['1', '2', '3'], ['x', 'y', 'z']], align='lr'))")
    proc = run_python(code, REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "| a | b | c |\n|---|---:|---|\n| 1 | 2 | 3 |\n| x | y | z |\n"


def test_the_keep_apart_pairing_counts_questions_and_tests_their_signs():
    """The paired table of ``benchmarks.keep_apart``: rose / fell counts, the mean change, an interval
    around it, and the exact sign test recomputed from the binomial by hand."""
    import numpy as np

    from benchmarks.keep_apart import paired, sign_test

    assert sign_test(0, 0) == 1.0
    assert sign_test(3, 3) == 1.0
    assert sign_test(2, 4) == (1 + 6 + 15) * 2 / 64  # P(at most 2 of 6) on both sides
    assert sign_test(0, 10) == 2 / 1024
    assert sign_test(10, 0) == sign_test(0, 10)
    a = np.array([1.0, 1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0])
    b = np.array([1.0, 0.0, 1.0, 0.5, 0.0, 0.0, 1.0, 0.25])
    up, down, mean, lo, hi, p = paired(a, b)
    assert (up, down) == (3, 2)
    assert mean == 100 * (a - b).mean()
    assert lo <= mean <= hi and lo < hi
    assert p == sign_test(3, 2) == 1.0
    assert paired(a, b) == (up, down, mean, lo, hi, p)  # seeded: the same interval each run


def test_the_structure_benchmark_counts_a_heading_passed_over_once():
    from benchmarks.structure import measure
    from headseg.segmenter.structure import read_markdown

    text = ("# Title\n\nIntro line.\n\n## Questions\n\nAsk on the forum.\n\n## Bugs\n\nReport them in the tracker.\n\n"
            "Include your version.\n\nAnd the error message.\n\n## Contributing\n\nRead the guide.\n")
    st = read_markdown(text)
    at = {name: text.index(name) for name in ("## Questions", "## Bugs", "Include", "And the", "## Contributing")}
    count = len  # every block fits
    # chunks at every heading: none passed over
    starts = [0, at["## Questions"], at["## Bugs"], at["## Contributing"]]
    assert measure(text, starts, st, count, None)[3:5] == (4, 4) and measure(text, starts, st, count, None)[6] == 0
    # "## Bugs" goes with the chunk before and its section is cut twice further down: one heading passed over
    starts = [0, at["## Questions"], at["Include"], at["And the"], at["## Contributing"]]
    out = measure(text, starts, st, count, None)
    assert out[3] == 3 and out[6] == 1
    # a cut at the blank line before a heading opens it; a section cut below a heading that opens is not counted
    starts = [0, at["## Bugs"] - 1, at["Include"]]
    assert measure(text, starts, st, count, None)[6] == 0
