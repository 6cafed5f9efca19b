"""Backends side by side: torch vs onnxruntime (fp32, int8, fp16), truncated vs full graph, and peers.

    .venv/bin/python -m benchmarks.backends [--docs 20] [--threads N] [--heads L:H,...]
                                           [--segment] [--agreement] [--peers] [--no-rss]

Every configuration runs in its own subprocess on the same documents (Choi
files), so that peak RSS belongs to that configuration alone.  Two workloads:

* ``capture``: the backend alone on the documents' 128-token windows, batches of
  32 bucketed by length; tokens/s counts real (unpadded) tokens, best of
  ``--repeats`` passes after a warm-up batch.
* ``segment`` (``--segment``): the whole ``Segmenter`` (units, unit vectors,
  topic cuts) with each backend, documents/s; the LangChain and chonkie
  SemanticChunkers (``--peers``) run on the same documents for context.

Timings run in one process, configurations taking turns round by round (best
of ``--repeats``); peak RSS comes from one subprocess per configuration.

``--agreement`` also compares the topic boundaries of each precision with the
torch ones and the reference (Pk), on the same documents.  Speed claims are the
ratios in the printed table (same run, same machine), never absolute numbers
from another run.
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

from benchmarks.common import (child_env, default_model, markdown_table, module_command, offline_settings,
                               own_peak_rss_mb, segmentation_root)


def current_rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def load_docs(path: str, n: int):
    from headseg.segmenter.evaluation.loaders import iter_documents

    docs = list(iter_documents(path, limit=n))
    if not docs:
        raise SystemExit(f"no documents under {path}")
    return docs


def make_profile(loaded, heads_spec: str | None, path: str | None = None):
    from headseg.analysis.profile import HeadProfile
    from headseg.analysis.profile import resolve_profile

    if path:
        return HeadProfile.load(path)
    if not heads_spec:
        return resolve_profile(loaded.info, None)
    from headseg.cli.export import parse_heads

    from headseg.analysis.profile import HeadProfile

    heads = sorted(set(parse_heads(heads_spec)))
    info = loaded.info
    return HeadProfile(model_fingerprint=info.fingerprint, heads=heads, weights=[1.0] * len(heads),
                       model_name=info.name, num_layers=info.num_layers, num_heads=info.num_heads,
                       topic_heads=heads)




def build_backend(cfg: dict, loaded, profile):
    from headseg.analysis import TorchBackend
    from headseg.export.onnx_backend import OnnxBackend

    if cfg["backend"] == "torch":
        return TorchBackend(loaded, device=cfg["device"])
    return OnnxBackend(loaded, cfg["artifact"], device=cfg["device"], profile_hash=profile.hash(),
                       threads=cfg.get("threads"))


def capture_windows(loaded, docs):
    from headseg.analysis import windows_from_text

    return [w for d in docs for w in windows_from_text(d.text, loaded.tokenizer, max_tokens=128)]


def capture_pass(backend, windows, heads) -> float:
    from headseg.analysis import iter_batches

    t = time.perf_counter()
    for batch in iter_batches(windows, 32):
        backend.capture(batch, heads=heads, attention=False)
    return time.perf_counter() - t


def worker(cfg: dict) -> dict:
    """Peak memory of one configuration alone: load, build, one pass of its workload."""
    import torch

    torch.set_num_threads(cfg["threads"])
    docs = load_docs(cfg["data"], cfg["docs"])
    out = {"name": cfg["name"]}
    if cfg["kind"] in ("langchain", "chonkie"):
        from headseg.segmenter.evaluation.methods import METHODS

        m = METHODS[cfg["kind"]]()
        m.setup()
        m.predict(docs[0])
        t = time.perf_counter()
        for d in docs:
            m.predict(d)
        out["docs_per_s"] = len(docs) / (time.perf_counter() - t)
        out["peak_rss_mb"] = own_peak_rss_mb()
        return out
    loaded = default_model()
    profile = make_profile(loaded, None, cfg["profile"])
    backend = build_backend(cfg, loaded, profile)
    out["rss_loaded_mb"] = current_rss_mb()
    capture_pass(backend, capture_windows(loaded, docs), list(profile.capture_heads))
    out["peak_rss_mb"] = own_peak_rss_mb()
    return out


def run_worker(cfg: dict) -> dict:
    proc = subprocess.run(module_command(__spec__.name, "--worker", json.dumps(cfg)), capture_output=True, text=True,
                          env=child_env())
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"name": cfg["name"], "error": tail[:160]}
    return json.loads(lines[-1])




def export_all(loaded, profile, work: Path, fp16: bool, cuda: bool) -> dict:
    """Export (or reuse from ``work``) the graphs to compare: {(precision, truncated): (dir, manifest, seconds)}."""
    import logging

    from headseg.export.artifact import read_manifest
    from headseg.export.exporter import export_artifact

    logging.getLogger().setLevel(logging.ERROR)
    arts = {}
    plan = [("fp32", True), ("int8", True), ("fp32", False), ("int8", False)] + ([("fp16", True)] if fp16 else [])
    for precision, truncate in plan:
        d = work / f"{precision}-{'trunc' if truncate else 'full'}"
        try:
            m = read_manifest(d)
            if (m.model_fingerprint, m.profile_hash) == (loaded.info.fingerprint, profile.hash()):
                arts[(precision, truncate)] = (d, m, float("nan"))
                continue
        except Exception:
            pass
        t = time.perf_counter()
        m = export_artifact(loaded, profile.capture_heads, profile.hash(), d, precision=precision, truncate=truncate,
                            parity_device="cuda" if cuda and precision == "fp16" else "cpu")
        arts[(precision, truncate)] = (d, m, time.perf_counter() - t)
    return arts


def pk_of(docs, boundaries_chars):
    from headseg.segmenter.evaluation.loaders import snap_offsets
    from headseg.segmenter.evaluation.metrics import score_document

    vals = []
    for d, b in zip(docs, boundaries_chars):
        hyp = snap_offsets(b, d.starts, len(d.text))
        vals.append(score_document(d.boundaries, hyp, d.n).pk)
    return 100.0 * sum(vals) / len(vals)


def round_robin(fns: dict, repeats: int) -> dict:
    """Best time of each function over ``repeats`` rounds, all taking turns.

    Taking turns (rather than one configuration after another) spreads any
    change in machine load over every configuration alike.
    """
    best = {k: float("inf") for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            best[k] = min(best[k], fn())
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(segmentation_root() / "choi" / "1" / "3-11"),
                    help="folder of Choi documents")
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--heads", default=None, help="L:H,... instead of the segmenter's profile")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peers", action="store_true", help="also LangChain and chonkie SemanticChunker")
    ap.add_argument("--agreement", action="store_true", help="topic boundaries per precision vs torch, Pk")
    ap.add_argument("--segment", action="store_true", help="also time the whole Segmenter per backend")
    ap.add_argument("--no-rss", action="store_true", help="skip the per-config subprocesses that measure memory")
    ap.add_argument("--work", default=None, help="where to export the artifacts (default: a temp dir)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    offline_settings()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    import torch

    from headseg.analysis import TorchBackend
    from headseg.export.onnx_backend import OnnxBackend
    from headseg.export.runtime import cuda_provider_works

    torch.set_num_threads(args.threads)
    loaded = default_model()
    profile = make_profile(loaded, args.heads)
    heads = list(profile.capture_heads)
    cuda = cuda_provider_works()
    work = Path(args.work or tempfile.mkdtemp(prefix="headseg-bench-"))
    arts = export_all(loaded, profile, work, cuda or args.agreement, cuda)
    docs = load_docs(args.data, args.docs)
    windows = capture_windows(loaded, docs)
    tokens = sum(len(w) for w in windows)
    # Workers read the very profile measured here, even if the shipped default changes meanwhile.
    profile.save(work / "profile.json")
    base = {"data": args.data, "docs": args.docs, "threads": args.threads, "profile": str(work / "profile.json")}

    print(f"# headseg backends: {loaded.info.name}, {len(heads)} heads, deepest layer "
          f"{profile.deepest_layer} of {loaded.info.num_layers} layers; {len(docs)} docs from {args.data}; "
          f"{args.threads} thread(s); CUDA {'present' if cuda else 'absent'}")
    print()
    print("## exported graphs")
    rows = []
    for (precision, trunc), (d, m, dt) in arts.items():
        p = m.parity
        err = f"{p['z_max_abs_error']:.2e}" if "z_max_abs_error" in p else "n/a"
        cos = f"{p['z_min_cosine']:.4f}" if "z_min_cosine" in p else "n/a"
        rows.append([f"{precision} {'truncated' if trunc else 'full'}", f"{m.layers_exported}/{m.num_layers}",
                     f"{m.graph_bytes / 1e6:.1f}", f"{dt:.1f}", err, cos])
    print(markdown_table(["graph", "layers", "size MB", "export s", "parity max abs err vs torch", "min cosine"], rows))

    backends = {"torch cpu": TorchBackend(loaded, device="cpu")}
    specs = {"torch cpu": dict(base, backend="torch", device="cpu")}
    for (precision, trunc), (d, _, _) in arts.items():
        if precision == "fp16":
            continue
        name = f"ort cpu {precision} {'truncated' if trunc else 'full'}"
        backends[name] = OnnxBackend(loaded, d, device="cpu", threads=args.threads)
        specs[name] = dict(base, backend="onnx", device="cpu", artifact=str(d))
    if cuda:
        backends["torch cuda"] = TorchBackend(loaded, device="cuda")
        specs["torch cuda"] = dict(base, backend="torch", device="cuda")
        for precision in ("fp32", "fp16"):
            d = arts[(precision, True)][0]
            backends[f"ort cuda {precision} truncated"] = OnnxBackend(loaded, d, device="cuda")
            specs[f"ort cuda {precision} truncated"] = dict(base, backend="onnx", device="cuda", artifact=str(d))
    for b in backends.values():  # warm-up: first-call allocations, kernel selection
        b.capture(windows[:32], heads=heads, attention=False)
    best = round_robin({k: (lambda b=b: capture_pass(b, windows, heads)) for k, b in backends.items()}, args.repeats)
    mem = {}
    if not args.no_rss:
        for k, spec in specs.items():
            mem[k] = run_worker(dict(spec, name=k, kind="capture"))
    ref = tokens / best["torch cpu"]
    print()
    print(f"## capture: the backend alone, {len(windows)} windows of up to 128 tokens ({tokens} tokens), "
          f"batches of 32, best of {args.repeats} rounds taken in turn")
    rows = []
    for k in backends:
        tps = tokens / best[k]
        m = mem.get(k, {})
        rss = f"{m['peak_rss_mb']:.0f}" if "peak_rss_mb" in m else m.get("error", "n/a")
        loaded_rss = f"{m['rss_loaded_mb']:.0f}" if "rss_loaded_mb" in m else ""
        rows.append([k, f"{tps:.0f}", f"{tps / ref:.2f}", rss, loaded_rss])
    print(markdown_table(["config", "tokens/s", "× torch cpu", "peak RSS MB (own process)", "RSS after load MB"],
                         rows))

    if args.segment or args.agreement or args.peers:
        from headseg.api import Segmenter

        segs = {"headseg torch cpu": Segmenter(model=loaded, profile=profile, backend=backends["torch cpu"])}
        for precision in ("fp32", "int8"):
            segs[f"headseg ort cpu {precision}"] = Segmenter(
                model=loaded, profile=profile, backend=backends[f"ort cpu {precision} truncated"])
        if args.agreement:
            # fp16 is meant for GPUs; onnxruntime's CPU kernels still run it, to compare boundaries.
            segs["headseg ort cpu fp16"] = Segmenter(
                model=loaded, profile=profile,
                backend=OnnxBackend(loaded, arts[("fp16", True)][0], device="cpu", threads=args.threads))
        outputs: dict = {}

        def seg_pass(name, seg):
            t = time.perf_counter()
            outputs[name] = [seg.segment(d.text) for d in docs]
            return time.perf_counter() - t

        sbest = round_robin({k: (lambda k=k, s=s: seg_pass(k, s)) for k, s in segs.items()},
                            1 if args.agreement and not args.segment else max(1, args.repeats - 1))
        peers = {}
        if args.peers:
            for kind, name in (("langchain", "LangChain SemanticChunker"), ("chonkie", "chonkie SemanticChunker")):
                peers[name] = run_worker(dict(base, name=name, kind=kind))
        sref = len(docs) / sbest["headseg torch cpu"]
        print()
        print(f"## segmentation: documents/s on the same {len(docs)} documents (whole pipeline)")
        rows = [[k, f"{len(docs) / v:.3f}", f"{len(docs) / v / sref:.2f}"] for k, v in sbest.items()]
        for k, r in peers.items():
            if "error" in r:
                rows.append([k, f"failed: {r['error']}", ""])
            else:
                rows.append([k + " (own process)", f"{r['docs_per_s']:.3f}", f"{r['docs_per_s'] / sref:.2f}"])
        print(markdown_table(["method", "docs/s", "× headseg torch"], rows))
        if args.agreement:
            torch_b = [r.boundaries for r in outputs["headseg torch cpu"]]
            oracle = {k: [s.segment(d.text, segments=d.num_segments).boundaries for d in docs]
                      for k, s in segs.items()}
            print()
            print("## precision agreement on the same documents: topic boundaries vs torch; Pk ×100 vs the reference")
            rows = []
            for k in segs:
                b = [r.boundaries for r in outputs[k]]
                same = sum(list(x) == list(y) for x, y in zip(b, torch_b))
                same_k = sum(list(x) == list(y) for x, y in zip(oracle[k], oracle["headseg torch cpu"]))
                rows.append([k, f"{same}/{len(docs)}", f"{pk_of(docs, b):.2f}",
                             f"{same_k}/{len(docs)}", f"{pk_of(docs, oracle[k]):.2f}"])
            print(markdown_table(["backend", "same boundaries as torch", "Pk (auto k)", "same as torch (oracle k)",
                                  "Pk (oracle k)"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
