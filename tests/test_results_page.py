"""docs/results.md is what ``python -m benchmarks.segmentation`` renders from the stored results.

The page is generated: its tables from ``benchmarks/results/*.json`` and its notes from
``benchmarks/results/NOTES.md``.  A note written into the page alone is lost at the next
render, and a table edited by hand no longer says what the stored runs measured.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "results.md"


def render(out: Path) -> str:
    """The page rendered into ``out`` by the documented command, run from the repository root in a child.

    A child, so the test runs the command the docs quote (the package import included) and the
    benchmark's settings never reach this process.
    """
    proc = subprocess.run([sys.executable, "-m", "benchmarks.segmentation", "--render-only", "--markdown", str(out),
                           "--results-dir", str(REPO / "benchmarks" / "results")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"the render failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return out.read_text(encoding="utf-8")


def without_render_time(page: str) -> str:
    return re.sub(r"(?m)^Rendered \d{4}-\d\d-\d\d \d\d:\d\d UTC\.$", "Rendered (time).", page)


def test_the_results_page_is_what_a_render_of_the_stored_results_gives(tmp_path):
    page = without_render_time(PAGE.read_text(encoding="utf-8"))
    assert "Rendered (time)." in page, "the page has no render time line"
    rendered = without_render_time(render(tmp_path / "results.md"))
    diff = "".join(difflib.unified_diff(page.splitlines(True), rendered.splitlines(True), "docs/results.md",
                                        "rendered", n=1))
    assert rendered == page, ("docs/results.md differs from a render of benchmarks/results (write notes into "
                              f"benchmarks/results/NOTES.md):\n{diff[:3000]}")
