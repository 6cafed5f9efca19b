"""An issue's regression tests run on the code before the issue and on this checkout: item, tests,
before (passed / failed, and why), after.

    python benchmarks/before_after.py                       # issue 35 against e3e7964 (the main it was filed on)
    python benchmarks/before_after.py --base COMMIT --items 2,3,9

"Before": ``git worktree`` of ``--base`` in a temporary folder, its package installed there with
``pip install --no-deps --target`` (this interpreter's dependencies, the old headseg first on the path),
and this checkout's ``tests/`` copied over the old one, so the same test files read the old code, the old
README, pyproject.toml and Makefile.  "After": the same test ids on this checkout's installed headseg.
Each side runs under pytest with ``--junitxml``; a failure is classed as *behaviour* (an assertion on
what the old code did), *absent* (the test needs a function or module the old code does not have: an
``ImportError``, a module without the attribute, a missing fixture or a file that cannot be collected;
that says the behaviour was not there, but shows less), *hung* (no answer within the item's time) or
*error*.  Run it from anywhere; it takes the time of the item tests twice (about 15
minutes for issue 35: the traced exports, the fp16 export and the broken model folders).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: issue 35's numbered items -> the pytest ids (file, or file::name, or file -k expression) that test them
ISSUE35: dict[int, list[str]] = {
    1: ["tests/export/test_offline_trace.py"],
    2: ["tests/cli/test_output_guards.py -k issue35_item2_"],
    3: ["tests/cli/test_resume_checks.py -k issue35_item3_"],
    4: ["tests/cli/test_argument_checks.py -k issue35_item4_"],
    5: ["tests/cli/test_weights_fit_config.py -k claims"],
    6: ["tests/cli/test_addresses_and_ports.py -k issue35_item6_"],
    7: ["tests/segmenter/test_tiny_units.py",
        "tests/analysis/test_text.py::test_runs_of_terminal_punctuation_split_in_linear_steps",
        "tests/serve/test_app.py::test_a_request_over_the_token_bound_is_413_before_any_model_work"],
    8: ["tests/cli/test_weights_fit_config.py -k not claims"],
    9: ["tests/cli/test_overflow_numbers.py", "tests/serve/test_app.py -k bad_requests and integer"],
    10: ["tests/cli/test_addresses_and_ports.py -k issue35_item10_"],
    11: ["tests/serve/test_app.py::test_query_string_options_are_refused_not_ignored"],
    12: ["tests/cli/test_output_guards.py -k issue35_item12_"],
    13: ["tests/cli/test_input_checks.py -k issue35_item13_"],
    14: ["tests/cli/test_input_checks.py -k issue35_item14_"],
    15: ["tests/cli/test_argument_checks.py -k issue35_item15_"],
    16: ["tests/cli/test_packaging.py -k item16_"],
    17: ["tests/analysis/test_install_hints.py"],
    18: ["tests/serve/test_docs_page.py"],
    19: ["tests/cli/test_packaging.py -k item19_"],
    20: ["tests/integrations/test_adapter_extras.py"],
    21: ["tests/segmenter/test_document_ids.py"],
    22: ["tests/serve/test_app.py::test_framework_refusals_are_one_line_errors_too",
         "tests/serve/test_app.py -k bad_requests_are_one_line and required"],
    23: ["tests/cli/test_input_checks.py -k issue35_item23_"],
    24: ["tests/tui/test_help_text.py"],
    25: ["tests/serve/test_app.py -k item25_",
         "tests/serve/test_app.py::test_request_schema_and_page_form_are_made_from_the_options"],
    26: ["tests/cli/test_packaging.py -k item26_"],
}

#: seconds one spec may run; the old code never answered item 5 (10,000 layers)
TIMEOUT_S = {5: 180}

#: a failure that says the test could not reach the behaviour: the old code lacks what it imports
ABSENT = ("ImportError", "ModuleNotFoundError")


def run_tests(specs: list[str], tests_root: Path, env: dict, xml: Path, timeout: float
              ) -> list[tuple[str, str, str]]:
    """(test id, outcome, first line of the failure) for every test the specs select."""
    results = []
    for i, spec in enumerate(specs):
        path, _, expr = spec.partition(" -k ")
        out = xml.with_suffix(f".{i}.xml")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests_root.parent),
               f"--junitxml={out}", str(tests_root.parent / path)]
        if expr:
            cmd += ["-k", expr]
        try:
            subprocess.run(cmd, cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            results.append((spec, "hung", f"no answer in {timeout:.0f} s"))
            continue
        if not out.exists():
            results.append((spec, "error", "pytest wrote no report"))
            continue
        for case in ET.parse(out).getroot().iter("testcase"):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if case.find("skipped") is not None:
                results.append((name, "skipped", (case.find("skipped").get("message") or "")[:80]))
            elif bad is None:
                results.append((name, "passed", ""))
            else:
                text = (bad.get("message") or "") + "\n" + (bad.text or "")
                first = (bad.get("message") or "").strip()
                kind = "absent" if (first.startswith(ABSENT) or "fixture '" in text or "collection failure" in first
                                    or re.match(r"AttributeError: module '[\w.]+' has no attribute", first)) else (
                    "behaviour" if bad.tag == "failure" else "error")
                results.append((name, kind, (bad.get("message") or "").splitlines()[0][:80] if bad.get("message")
                                else ""))
    return results


def summary(rows: list[tuple[str, str, str]]) -> str:
    counts: dict[str, int] = {}
    for _, outcome, _ in rows:
        counts[outcome] = counts.get(outcome, 0) + 1
    order = ("passed", "behaviour", "absent", "hung", "error", "skipped")
    hung = next((why for _, outcome, why in rows if outcome == "hung"), "")
    return ", ".join(f"{counts[k]} {'fail: ' + k if k in ('behaviour', 'absent') else k}"
                     f"{' (' + hung + ')' if k == 'hung' else ''}" for k in order if k in counts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="e3e7964", help="the commit the issue was filed on")
    ap.add_argument("--items", help="comma-separated item numbers (default: all)")
    ap.add_argument("--details", action="store_true", help="one line per test under the table")
    args = ap.parse_args()
    items = sorted(ISSUE35) if not args.items else [int(x) for x in args.items.split(",")]

    scratch = Path(tempfile.mkdtemp(prefix="before-after-"))
    worktree, target = scratch / "old", scratch / "pkg"
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(worktree), args.base],
                       check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(target), str(worktree)], check=True, capture_output=True)
        shutil.rmtree(worktree / "tests")
        shutil.copytree(ROOT / "tests", worktree / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        old_env = dict(os.environ, PYTHONPATH=str(target), HF_HUB_OFFLINE="1")
        new_env = dict(os.environ, HF_HUB_OFFLINE="1")
        new_env.pop("PYTHONPATH", None)
        lines = ["| item | tests | before (" + args.base + ") | after (this checkout) |", "|---:|---|---|---|"]
        details = []
        for item in items:
            limit = TIMEOUT_S.get(item, 1800)
            before = run_tests(ISSUE35[item], worktree / "tests", old_env, scratch / f"b{item}", limit)
            after = run_tests(ISSUE35[item], ROOT / "tests", new_env, scratch / f"a{item}", limit)
            specs = "; ".join(f"`{s}`" for s in ISSUE35[item])
            lines.append(f"| {item} | {specs} | {summary(before)} | {summary(after)} |")
            print(lines[-1], file=sys.stderr, flush=True)
            for (name, b, why), (_, a, why_a) in zip(before, after):
                details.append(f"- {item} `{name}`: before {b}{' (' + why + ')' if why else ''}; after {a}"
                               f"{' (' + why_a + ')' if why_a else ''}")
        print("\n".join(lines))
        if args.details:
            print()
            print("\n".join(details))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
