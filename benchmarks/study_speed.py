"""Speed of ``headseg study`` on the embedded model, extrapolated to 20,000 windows.

Runs the study on ``--samples`` windows (default 256) of 128 tokens in a
subprocess and prints windows/s, the study loop's wall time, peak RSS and the
load average around the run, with the 20,000-window time extrapolated from the
loop's rate plus the measured fixed start-up.  The machine is shared, so the
load average is printed with every row; compare rows measured side by side.

With ``--baseline SRC`` the same study is also run with another source tree
(for example the code before an optimisation, laid out as an importable
``headseg`` package: ``SRC/headseg/{analysis,segmenter,export,tui}``), the two
runs alternate ``--repeat`` times, and their ``report.json`` and ``heads.json``
are compared number by number (relative tolerance ``--rtol``).

    .venv/bin/python -m benchmarks.study_speed                       # this tree, 256 windows
    .venv/bin/python -m benchmarks.study_speed --baseline /tmp/orig  # before/after, side by side
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, corpus_files

FULL = 20_000


def run_once(corpus: list[str], samples: int, out: Path, pythonpath: str | None, batch_size: int,
             threads: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "headseg", "study", *corpus, "--out", str(out), "--samples", str(samples),
           "--seq-len", "128", "--batch-size", str(batch_size), "--no-figures", "--quiet", "--force"]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if threads:
        # torch reads it at start-up: the study's intra-op threads
        env["OMP_NUM_THREADS"] = str(threads)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=pythonpath or REPO, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, _ = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"study failed ({status}): {err.read().decode()[-2000:]}")
    info = json.loads((out / "run.json").read_text())
    loop = info["wall_seconds_this_session"]
    return {"windows": samples, "wall_s": wall, "loop_s": loop, "fixed_s": wall - loop,
            "per_window_s": loop / samples, "rss_mb": info["peak_rss_mb"],
            "cpu_s": info.get("cpu_seconds_this_session", float("nan")), "load": (load0, os.getloadavg()[0])}


def compare(a: Path, b: Path, rtol: float) -> tuple[int, float, list[str]]:
    """Number of numeric leaves compared, the largest relative difference, and mismatches."""
    worst, n, bad = 0.0, 0, []

    def walk(x, y, path):
        nonlocal worst, n
        if path in ("corpus.paths",):
            return
        if isinstance(x, dict) and isinstance(y, dict):
            if set(x) != set(y):
                bad.append(f"{path}: keys differ")
            for k in set(x) & set(y):
                walk(x[k], y[k], f"{path}.{k}" if path else k)
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                bad.append(f"{path}: lengths {len(x)} vs {len(y)}")
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{path}[{i}]")
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            n += 1
            if math.isnan(x) and math.isnan(y):
                return
            d = abs(x - y) / max(abs(x), abs(y), 1e-12)
            worst = max(worst, d)
            if d > rtol and abs(x - y) > 1e-9:
                bad.append(f"{path}: {x} vs {y}")
        elif x != y:
            bad.append(f"{path}: {x!r} vs {y!r}")

    for name in ("report.json", "heads.json"):
        walk(json.loads((a / name).read_text()), json.loads((b / name).read_text()), name)
    return n, worst, bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--corpus", nargs="+", default=corpus_files())
    ap.add_argument("--baseline", default=None, metavar="SRC", help="source tree of the code to compare against")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads of the study (OMP_NUM_THREADS); 1 measures the work without "
                         "thread contention on a shared machine")
    args = ap.parse_args()
    runs = [("this tree", None)] + ([("baseline", args.baseline)] if args.baseline else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for name, src in runs:
                out = Path(tmp) / f"{name.replace(' ', '_')}"
                res = run_once(args.corpus, args.samples, out, src, args.batch_size, args.threads)
                rows.append((name, res))
                print(f"# {name} run {r + 1}: {res['per_window_s']:.4f} s/window", file=sys.stderr)
        print(f"study of {args.samples} windows x 128 tokens, embedded MiniLM, {os.cpu_count()} CPUs, "
              f"corpus {len(args.corpus)} file(s), torch threads: {args.threads or 'default'}")
        print()
        print("| code | windows | loop s | s/window | fixed s | 20,000 windows (extrapolated) | loop CPU s "
              "| 20,000 windows at loop CPU s / cores | peak RSS MB | load before/after |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        cores = os.cpu_count() or 1
        for name, res in rows:
            full = FULL * res["per_window_s"] + res["fixed_s"]
            # the loop's CPU time is what an otherwise idle machine would spread over
            # its cores (less sensitive to other processes than wall time), plus start-up
            idle = (res["cpu_s"] / res["windows"]) * FULL / cores + res["fixed_s"]
            print(f"| {name} | {res['windows']} | {res['loop_s']:.1f} | {res['per_window_s']:.4f} | "
                  f"{res['fixed_s']:.1f} | {full / 60:.1f} min | {res['cpu_s']:.0f} | {idle / 60:.1f} min | "
                  f"{res['rss_mb']:.0f} | {res['load'][0]:.1f} / {res['load'][1]:.1f} |")
        if args.baseline:
            mine = [r for n, r in rows if n == "this tree"]
            base = [r for n, r in rows if n == "baseline"]
            ratio = sum(b["per_window_s"] for b in base) / sum(m["per_window_s"] for m in mine)
            print(f"\nspeed-up of the study loop (baseline s/window / this tree s/window, side by side): {ratio:.2f}x")
            n, worst, bad = compare(Path(tmp) / "this_tree", Path(tmp) / "baseline", args.rtol)
            print(f"report.json + heads.json: {n} numbers compared, largest relative difference {worst:.2e}, "
                  f"{len(bad)} over rtol {args.rtol:g}")
            for line in bad[:20]:
                print("  " + line)


if __name__ == "__main__":
    main()
