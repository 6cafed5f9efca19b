"""The serving engine against the torch path and the same-model peers: cold start, throughput, memory.

    .venv/bin/python -m benchmarks.serving cold [--runs 5] [--doc examples/sample.txt]
    .venv/bin/python -m benchmarks.serving throughput [--sets choi3,lectures_ai,lectures_physics]
                                                     [--limit N] [--peers [--peer-limit N]] [--precisions int8,fp32]

``cold``: whole ``headseg segment DOC`` processes, the ONNX artifact already in
the cache, the default (ONNX) and ``--backend torch`` taking turns; wall time,
CPU time and peak RSS per process (``os.wait4``), medians; and whether the
serving process imported torch.

``throughput``: each configuration in its own process on the same documents
(so peak RSS is that configuration's alone): the whole segmenter with the ONNX
engine and with torch, and (``--peers``) LangChain's and chonkie's semantic
chunkers on the same model (``--peer-limit N``: on the first N documents of
each set only; they are slow, and their ratio is taken against the ONNX
engine's time on exactly those documents).  Each document is timed alone,
after one warm-up document (an extra first document of the first set, never
timed, since a peer caching embeddings by text would time it from its cache); the table gives all documents and each set, so
one run shows the ratio on the mixed set and on each kind of document.  The
ONNX and torch boundaries are compared document by document.

Times drift on a shared machine: the claims are the ratios of one run, printed
with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, load_average, run_measured, segmentation_root

SETS = {"choi3": "choi/3/3-11", "lectures_ai": "lectures_ai", "lectures_physics": "lectures_physics",
        "dialseg711": "dialseg711", "choi1": "choi/1", "choi2": "choi/2"}


PROBE = "import sys; from headseg.cli import main; rc = main(sys.argv[1:]); " \
        "print('TORCH' if 'torch' in sys.modules else 'NOTORCH', file=sys.stderr); sys.exit(rc)"


def cold(args) -> None:
    doc = Path(args.doc)
    from headseg import Segmenter

    seg = Segmenter()  # make sure the artifact is in the cache (exports on first use)
    print(f"artifact: {seg.backend.artifact_dir}")
    configs = {"onnx (default)": [], "torch": ["--backend", "torch"]}
    rows = {k: [] for k in configs}
    for i in range(args.runs):
        for name, extra in configs.items():
            r = run_measured([sys.executable, "-c", PROBE, "segment", str(doc), "--quiet", *extra])
            r["torch_imported"] = "NOTORCH" not in r["err"]
            rows[name].append(r)
    print(f"\nCold start: `headseg segment {doc}` ({doc.stat().st_size:,} bytes), {args.runs} runs each, "
          f"taking turns; {load_average()}")
    print(f"{'configuration':<16} {'wall s (median)':>16} {'CPU s':>8} {'peak RSS MiB':>13} {'torch imported':>15}")
    med = {}
    for name, rs in rows.items():
        med[name] = {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "rss")}
        print(f"{name:<16} {med[name]['wall']:>16.2f} {med[name]['cpu']:>8.2f} {med[name]['rss']:>13.0f} "
              f"{str(any(r['torch_imported'] for r in rs)):>15}")
    a, b = med["onnx (default)"], med["torch"]
    print(f"torch / onnx: wall {b['wall'] / a['wall']:.1f}x, CPU {b['cpu'] / a['cpu']:.1f}x, "
          f"peak RSS {a['rss'] / b['rss']:.2f} of torch's")
    outs = {name: rs[0]["out"] for name, rs in rows.items()}
    print("same output:", len(set(outs.values())) == 1)


WORKER = r"""
import json, os, sys, time
from headseg.segmenter.evaluation.loaders import iter_documents
cfg = json.loads(sys.argv[1])
docs, keys = [], []
for j, path in enumerate(cfg["paths"]):
    # the first set gives one extra document, the warm-up, which is never timed (a
    # peer that caches embeddings by text would otherwise time it from its cache)
    extra = 1 if j == 0 else 0
    for i, d in enumerate(iter_documents(path, limit=(cfg["limit"] + extra) if cfg["limit"] else None)):
        docs.append(d)
        keys.append([path, i - extra])
warm = docs.pop(0)
keys.pop(0)
name = cfg["name"]
if name in ("onnx", "torch"):
    from headseg import Segmenter
    kw = {"backend": name, "quiet": True}
    if name == "onnx":
        kw["precision"] = cfg.get("precision") or None
    seg = Segmenter(**kw)
    run = lambda d: seg.segment(d.text).boundaries
else:
    from headseg.segmenter.evaluation.methods import make_method
    m = make_method(name)
    m.setup()
    def run(d):
        p = m.predict(d)
        return p.chars or p.units
run(warm)
out, times = [], []
for d in docs:
    t0 = time.perf_counter()
    out.append(run(d))
    times.append(time.perf_counter() - t0)
print(json.dumps({"keys": keys, "chars": [len(d.text) for d in docs], "times": times,
                  "boundaries": out if name in ("onnx", "torch") else None}))
"""


def _rate(d: dict, keys: set | None = None) -> tuple[int, int, float]:
    """(documents, characters, seconds) of a worker's result, over ``keys`` only if given."""
    sel = [i for i, k in enumerate(d["keys"]) if keys is None or tuple(k) in keys]
    return len(sel), sum(d["chars"][i] for i in sel), sum(d["times"][i] for i in sel)


def throughput(args) -> None:
    paths = [str(segmentation_root() / SETS[s]) for s in args.sets.split(",")]
    names = [("onnx", p) for p in args.precisions.split(",")] + [("torch", None)]
    if args.peers:
        names += [("langchain", None), ("chonkie", None)]
    res = {}
    for name, prec in names:
        key = name if prec is None else f"{name} {prec}"
        limit = args.peer_limit if name in ("langchain", "chonkie") and args.peer_limit else args.limit
        cfg = {"name": name, "precision": prec, "paths": paths, "limit": limit}
        r = run_measured([sys.executable, "-c", WORKER, json.dumps(cfg)])
        d = json.loads(r["out"].strip().splitlines()[-1])
        d["rss"] = r["rss"]
        res[key] = d
        print(f"  {key}: {len(d['keys'])} docs in {sum(d['times']):.1f} s ({load_average()})", file=sys.stderr)
    n, chars, _ = _rate(res["torch"])
    print(f"\nThroughput of the whole segmenter on {n} documents ({chars:,} characters) from {args.sets}"
          + (f", at most {args.limit} per set" if args.limit else " (every document)") + f"; {load_average()}")
    every = {tuple(k) for k in res["torch"]["keys"]}
    groups = [("all", every)]
    if len(paths) > 1:
        groups += [(name, {k for k in every if k[0] == p}) for name, p in zip(args.sets.split(","), paths)]
    print(f"{'configuration':<14} {'documents':<22} {'docs/s':>8} {'kchars/s':>9} {'vs torch':>9} {'peak RSS MiB':>13}")
    for key, d in res.items():
        own = {tuple(k) for k in d["keys"]}
        for gname, gkeys in groups:
            sub = own & gkeys
            if not sub:
                continue
            n, c, t = _rate(d, sub)
            _, _, tt = _rate(res["torch"], sub)
            label = f"{gname} ({n})"
            rss = f"{d['rss']:.0f}" if gname == "all" else ""
            print(f"{key:<14} {label:<22} {n / t:>8.2f} {c / t / 1000:>9.1f} {tt / t:>8.2f}x {rss:>13}")
    for key in res:
        if res[key]["boundaries"] is not None and key != "torch":
            same = sum(a == b for a, b in zip(res[key]["boundaries"], res["torch"]["boundaries"]))
            print(f"{key}: boundaries equal to torch on {same} of {len(res[key]['keys'])} documents")
    for key in ("langchain", "chonkie"):
        if key in res:
            sub = {tuple(k) for k in res[key]["keys"]}
            _, _, tp = _rate(res[key], sub)
            first = f"onnx {names[0][1]}"
            _, _, to = _rate(res[first], sub)
            print(f"{first} vs {key} on the same {len(sub)} documents: {tp / to:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cold")
    c.add_argument("--runs", type=int, default=5)
    c.add_argument("--doc", default=str(REPO / "examples" / "sample.txt"))
    t = sub.add_parser("throughput")
    t.add_argument("--sets", default="choi3,lectures_ai,lectures_physics")
    t.add_argument("--limit", type=int, default=0, help="at most N documents per set (0: all)")
    t.add_argument("--peers", action="store_true", help="also LangChain's and chonkie's semantic chunkers")
    t.add_argument("--peer-limit", type=int, default=0,
                   help="the peers on the first N documents per set only (they are slow); 0: same as --limit")
    t.add_argument("--precisions", default="int8,fp32",
                   help="ONNX precisions to run, e.g. int8,fp32 (the first is compared with the peers)")
    args = ap.parse_args()
    {"cold": cold, "throughput": throughput}[args.cmd](args)


if __name__ == "__main__":
    main()
