"""Peak memory of ``headseg study`` for different ``--samples``: it must not grow with the sample count.

Each run is a separate subprocess (``python -m headseg study ...``), so
each peak RSS (read from the run's ``run.json``, i.e. ``getrusage`` of that
process) is its own.  Prints a table.

    .venv/bin/python -m benchmarks.study_memory                      # tiny random BERT, 500 and 5000 samples
    .venv/bin/python -m benchmarks.study_memory --model embedded --samples 500

``--model tiny`` builds a random 3-layer BERT (hidden 32, 4 heads) with the
embedded model's tokenizer into a temporary directory: the forward pass is then
cheap, so 5,000 samples finish in minutes on a shared CPU, while the study's own
buffers (windows, capture, statistics) scale as they do for any model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, corpus_files, make_tiny_model


def run_one(model: str, corpus: list[str], samples: int, out: Path, seq_len: int) -> dict:
    cmd = [sys.executable, "-m", "headseg", "study", *corpus, "--out", str(out), "--samples", str(samples),
           "--seq-len", str(seq_len), "--no-figures", "--quiet", "--force"]
    if model != "embedded":
        cmd += ["--model", model]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"study failed ({proc.returncode}): {proc.stderr.strip()}")
    info = json.loads((out / "run.json").read_text())
    report = json.loads((out / "report.json").read_text())
    return {"samples": report["windows"], "peak_rss_mb": info["peak_rss_mb"], "wall_s": wall,
            "study_s": info["wall_seconds_this_session"], "samples_per_s": info["samples_per_second"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny (random, built here), embedded, or a model directory")
    ap.add_argument("--samples", default="500,5000", help="comma-separated sample counts")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--corpus", nargs="+", default=corpus_files())
    args = ap.parse_args()
    if not args.corpus:
        raise SystemExit("no corpus: pass --corpus FILES")
    counts = [int(s) for s in args.samples.split(",")]
    with tempfile.TemporaryDirectory(prefix="headseg-mem-") as tmp:
        tmp = Path(tmp)
        model = args.model
        if model == "tiny":
            model = str(tmp / "tiny")
            make_tiny_model(Path(model))
        rows = [run_one(model, args.corpus, n, tmp / f"out{n}", args.seq_len) for n in counts]
    print(f"model: {args.model}; corpus: {len(args.corpus)} file(s); seq_len {args.seq_len}; "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'samples':>8} {'peak RSS MB':>12} {'study s':>9} {'samples/s':>10}")
    for r in rows:
        print(f"{r['samples']:>8} {r['peak_rss_mb']:>12.1f} {r['study_s']:>9.1f} {r['samples_per_s']:>10.2f}")
    if len(rows) > 1:
        print(f"peak RSS ratio {rows[-1]['samples']}/{rows[0]['samples']} samples: "
              f"{rows[-1]['peak_rss_mb'] / rows[0]['peak_rss_mb']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
