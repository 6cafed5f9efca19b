"""The graph builder against the torch path and against optimum: boundaries, and export time.

    .venv/bin/python -m benchmarks.builder_parity parity [--sets choi3,lectures_ai,lectures_physics] [--limit N]
                                                       [--dev-only]
    .venv/bin/python -m benchmarks.builder_parity export-time [--runs 3] [--precisions int8,fp32]

``parity``: the embedded model's default profile exported in fp32 by the
builder (from model.safetensors, torch not loaded for it), then every document
of each set segmented by the ONNX engine on that artifact and by the torch
backend; the table counts documents whose boundaries are equal, and lists the
others.  ``--limit N``: the first N documents of each set; ``--dev-only``: only
the ``*.dev.*`` files of the lecture sets.

``export-time``: ``export_artifact`` of the embedded model's default profile,
each run in its own process (imports and model reading included), the builder
and optimum (the torch tracer; the ``export`` extra) taking turns; wall and CPU
seconds per process, medians, and the export call alone.  Times drift on a
shared machine: the claims are the ratios of one run, printed with the load
average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import default_model, load_average, run_measured, segmentation_root

SETS = {"choi3": "choi/3/3-11", "lectures_ai": "lectures_ai", "lectures_physics": "lectures_physics"}


def parity(args) -> None:
    from headseg import Segmenter
    from headseg.analysis.profile import resolve_profile
    from headseg.export.exporter import export_artifact
    from headseg.segmenter.evaluation.loaders import iter_documents

    loaded = default_model(weights=False)  # the builder reads model.safetensors: no torch weights
    profile = resolve_profile(loaded.info, None)
    with tempfile.TemporaryDirectory() as tmp:
        art = Path(tmp) / "fp32"
        t0 = time.perf_counter()
        m = export_artifact(loaded, profile.capture_heads, profile.hash(), art, precision="fp32", profile=profile)
        print(f"builder fp32 artifact in {time.perf_counter() - t0:.1f} s ({m.versions['exporter']}; torch loaded "
              f"for it: {loaded.has_weights})")
        onnx_seg = Segmenter(artifact=art, backend="onnx", device="cpu", quiet=True)
        torch_seg = Segmenter(backend="torch", quiet=True)
        rows = []
        for name in args.sets.split(","):
            docs = list(iter_documents(segmentation_root() / SETS[name], limit=args.limit or None))
            if args.dev_only and name.startswith("lectures"):
                docs = [d for d in docs if ".dev." in d.id]
            equal, differ, t_onnx, t_torch = 0, [], 0.0, 0.0
            for d in docs:
                t = time.perf_counter()
                a = onnx_seg.segment(d.text).boundaries
                t_onnx += time.perf_counter() - t
                t = time.perf_counter()
                b = torch_seg.segment(d.text).boundaries
                t_torch += time.perf_counter() - t
                if a == b:
                    equal += 1
                else:
                    differ.append(d.id)
            rows.append((name, len(docs), equal, differ, t_onnx, t_torch))
            print(f"  {name}: {equal}/{len(docs)} equal", file=sys.stderr, flush=True)
    print(f"\nBoundaries of the builder's fp32 engine vs torch, embedded model, default profile; {load_average()}")
    print(f"{'set':<18} {'documents':>9} {'equal':>6} {'onnx s':>8} {'torch s':>8}  differing")
    for name, n, eq, differ, to, tt in rows:
        print(f"{name:<18} {n:>9} {eq:>6} {to:>8.1f} {tt:>8.1f}  {', '.join(differ[:8]) or '-'}")
    total, same = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'all':<18} {total:>9} {same:>6}")


EXPORT = r"""
import json, sys, tempfile, time
from pathlib import Path
exporter, precision = sys.argv[1], sys.argv[2]
from headseg.analysis import load_model
from headseg.analysis.profile import resolve_profile
from headseg.export.exporter import export_artifact
t0 = time.perf_counter()
loaded = load_model(None, weights=exporter == "optimum")  # optimum traces the torch module
profile = resolve_profile(loaded.info, None)
t1 = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    m = export_artifact(loaded, profile.capture_heads, profile.hash(), Path(tmp) / "a", precision=precision,
                        profile=profile, exporter=exporter)
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "export": t2 - t1, "bytes": m.graph_bytes, "parity": m.parity,
                  "torch": "torch" in sys.modules}))
"""


def _run(cmd: list[str]) -> dict:
    """One export process: its wall and CPU seconds and peak RSS, and the JSON it printed last."""
    r = run_measured(cmd)
    return {"wall": r["wall"], "cpu": r["cpu"], "rss": r["rss"], **json.loads(r["out"].strip().splitlines()[-1])}


def export_time(args) -> None:
    precisions = args.precisions.split(",")
    rows = {(e, p): [] for p in precisions for e in ("builder", "optimum")}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HEADSEG_CACHE"] = cache  # fingerprint records cached once, for both alike
        _run([sys.executable, "-c", EXPORT, "builder", "fp32"])
        for _ in range(args.runs):
            for p in precisions:
                for e in ("builder", "optimum"):
                    rows[(e, p)].append(_run([sys.executable, "-c", EXPORT, e, p]))
    print(f"\nExport of the embedded model's default profile, {args.runs} runs each, taking turns; {load_average()}")
    print(f"{'exporter':<9} {'precision':<9} {'process wall s':>15} {'CPU s':>7} {'export() s':>11} "
          f"{'peak RSS MiB':>13} {'graph MB':>9} {'torch':>6}  parity (z max abs / min cos, reference)")
    med = {}
    for (e, p), rs in rows.items():
        med[(e, p)] = {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "export", "rss")}
        par = rs[0]["parity"]
        ptxt = (f"{par['z_max_abs_error']:.3g} / {par['z_min_cosine']:.4f}, {par['reference']}"
                if "z_max_abs_error" in par else par.get("not_measured", "?"))
        print(f"{e:<9} {p:<9} {med[(e, p)]['wall']:>15.2f} {med[(e, p)]['cpu']:>7.2f} {med[(e, p)]['export']:>11.2f} "
              f"{med[(e, p)]['rss']:>13.0f} {rs[0]['bytes'] / 1e6:>9.1f} {str(rs[0]['torch']):>6}  {ptxt}")
    for p in precisions:
        b, o = med[("builder", p)], med[("optimum", p)]
        print(f"{p}: optimum / builder: process wall {o['wall'] / b['wall']:.1f}x, CPU {o['cpu'] / b['cpu']:.1f}x, "
              f"export() {o['export'] / b['export']:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parity")
    p.add_argument("--sets", default="choi3,lectures_ai,lectures_physics")
    p.add_argument("--limit", type=int, default=0, help="first N documents of each set (0: all)")
    p.add_argument("--dev-only", action="store_true", help="only the *.dev.* lecture files")
    p.set_defaults(func=parity)
    e = sub.add_parser("export-time")
    e.add_argument("--runs", type=int, default=3)
    e.add_argument("--precisions", default="int8,fp32")
    e.set_defaults(func=export_time)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
