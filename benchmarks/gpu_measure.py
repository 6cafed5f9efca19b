"""Everything a GPU can tell about headseg's CUDA path, in one run (called by gpu.sh from the GPU pack).

    python gpu_measure.py --model MODEL_DIR --profile profile.json --data dev.jsonl.gz --out OUT [--dry-run]

Steps, each timed, each failure logged without stopping the others:

1. ``cli``: ``headseg segment --backend torch --device cuda`` and the API give
   the same boundaries; what ``--backend auto --device auto`` says it serves;
2. ``parity``: the torch-CUDA boundaries against the CPU torch path, on the same
   restored weights, for every parity document (at each batch size);
3. ``throughput``: document tokens per second of the whole segmenter at batch
   sizes 64, 256, 1024: torch on CUDA, beside torch, ONNX int8 and ONNX fp32 on
   the CPU with every core (each CPU cell capped in time);
4. ``forward``: the model alone, one forward pass over full 128-token windows,
   fp32 and fp16, timed with CUDA events: the capture's ceiling;
5. ``profile``: where the torch-CUDA pipeline's time goes (cProfile, self time
   per stage: tokenization, windows, capture, units, pooling, search), the three largest;
6. ``ort_cuda``: the ONNX CUDA path, where the host's onnxruntime has the CUDA provider;
7. ``auto``: the figures :data:`headseg.export.policy.GPU_MEASUREMENT` takes.

Written into ``--out``: ``summary.md`` (every table), ``results.json``,
``log.txt``, ``profile.txt``; the summary table is printed last.  ``--dry-run``
runs the same steps on the CPU at tiny sizes (CI runs it).  Standalone: it
imports headseg and the host's packages only.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import gzip
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

#: sizes of the real run (about 5 minutes on one GPU) and of the dry run (CPU, under a minute)
SIZES = {
    False: dict(device="cuda", batches=(64, 256, 1024), gpu_cap=20.0, cpu_cap=8.0, forward_batch=1024,
                forward_groups=5, forward_reps=10, corpus=None, parity=None, chunk=64, profile_chars=500_000),
    True: dict(device="cpu", batches=(2, 8), gpu_cap=1.0, cpu_cap=1.0, forward_batch=1, forward_groups=1,
               forward_reps=1, corpus=2, parity=2, chunk=1, profile_chars=0),
}
WINDOW = 128
#: where a function's self time goes, by its file (first match); builtins by their name, else their caller's
STAGES = (
    ("tokenization", ("analysis/tokenizer.py", "tokenizers")),
    ("windows", ("analysis/text.py",)),
    ("capture", ("analysis/capture.py", "export/", "/torch/", "/transformers/", "onnxruntime", "torch.", "torch._C")),
    ("units", ("segmenter/units.py", "segmenter/blocks.py", "segmenter/lines.py", "segmenter/speakers.py")),
    ("pooling", ("segmenter/encode.py", "segmenter/tokens.py")),
    ("search", ("segmenter/topics.py", "segmenter/search.py", "segmenter/cuts.py", "segmenter/levels.py",
                "segmenter/tree.py", "segmenter/limits.py")),
)


class Run:
    """The run's log, results and tables; :meth:`step` times a step and keeps its failure."""

    def __init__(self, out: Path, budget: float):
        self.t0 = time.perf_counter()
        self.budget = budget
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.log = open(out / "log.txt", "w", encoding="utf-8")
        self.results: dict = {}
        self.steps: list[list] = []
        self.tables: list[str] = []

    def left(self) -> float:
        """Seconds left of the run's time budget."""
        return self.budget - (time.perf_counter() - self.t0)

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    @contextlib.contextmanager
    def step(self, name: str):
        t0 = time.perf_counter()
        self.say(f"== {name}")
        row = [name, "ok", 0.0, ""]
        self.steps.append(row)
        try:
            yield row
        except Skip as exc:
            row[1], row[3] = "skipped", str(exc)
        except Exception as exc:  # one broken step must not cost the others their device time
            row[1], row[3] = "FAILED", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            self.log.write(traceback.format_exc())
        row[2] = time.perf_counter() - t0
        self.say(f"   {row[1]} in {row[2]:.1f} s {row[3]}")

    def table(self, title: str, header: list[str], rows: list[list]) -> None:
        lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
        text = "\n".join(lines) + "\n"
        self.tables.append(text)
        self.say(text)

    def finish(self) -> int:
        self.table("Summary", ["step", "status", "seconds", "result"], [[a, b, f"{c:.1f}", d] for a, b, c, d in self.steps])
        (self.out / "summary.md").write_text("\n".join(self.tables), encoding="utf-8")
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1, default=str) + "\n", encoding="utf-8")
        self.log.close()
        return 1 if any(r[1] == "FAILED" for r in self.steps) else 0


class Skip(Exception):
    """A step that cannot run on this host (said, not a failure)."""


def _cell(c) -> str:
    if isinstance(c, float):
        return f"{c:,.1f}" if abs(c) >= 100 else f"{c:.3g}"
    return str(c)


def load_docs(path: Path, dry: bool, size: dict) -> tuple[list[dict], list[dict]]:
    """(parity documents, throughput corpus); the dry run's are the shortest few."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    parity = [d for d in docs if d["parity"]]
    if dry:
        parity = sorted(parity, key=lambda d: len(d["text"]))[: size["parity"]]
        docs = sorted(docs, key=lambda d: len(d["text"]))[: size["corpus"]]
    return parity, docs


def segmenter(model, profile, **kw):
    from headseg import Segmenter

    return Segmenter(model=model, profile=profile, quiet=True, **kw)


def throughput(seg, docs: list[dict], tokens: list[int], cap: float, chunk: int) -> dict:
    """Documents through ``seg.segment_many`` in chunks until all are done or ``cap`` seconds passed."""
    seg.segment_many([docs[0]["text"]])  # warm-up: kernels, thread pools, caches of the first call
    n = toks = chars = 0
    t0 = time.perf_counter()
    while n < len(docs) and time.perf_counter() - t0 < cap:
        part = docs[n:n + chunk]
        seg.segment_many([d["text"] for d in part])
        toks += sum(tokens[n:n + len(part)])
        chars += sum(len(d["text"]) for d in part)
        n += len(part)
    dt = time.perf_counter() - t0
    return {"docs": n, "tokens": toks, "chars": chars, "seconds": dt, "tokens_per_s": toks / dt,
            "kchars_per_s": chars / dt / 1000}


def stage_of(func, stats: dict, depth: int = 0) -> str:
    """The stage of a pstats function key ``(file, line, name)``: by its file, a builtin by its name, else its
    heaviest caller's."""
    filename, _, name = func
    where = filename if filename != "~" else name
    for stage, marks in STAGES:
        if any(m in where for m in marks):
            return stage
    if filename == "~" and depth < 8:
        callers = stats[func][4]
        if callers:
            heaviest = max(callers, key=lambda c: callers[c][3] if isinstance(callers[c], tuple) else 0)
            return stage_of(heaviest, stats, depth + 1)
    return "other"


THROUGHPUT_HEADER = ["configuration", "batch", "documents", "tokens", "seconds", "tokens/s", "kchars/s",
                     "built in s (export included)"]


def throughput_cells(run: "Run", cells: list, state: dict, prof: str, size: dict, cores: int) -> list[list]:
    """Each ``(name, batch, Segmenter keywords, cap)`` cell timed on the corpus; cells the time budget has
    no room for are said and left out."""
    rows = []
    for name, b, kw, cap in cells:
        if run.left() < cap + 10:
            run.say(f"   {name} batch {b}: skipped, {run.left():.0f} s of the time budget left")
            continue
        kw = dict(kw)
        t0 = time.perf_counter()
        seg = segmenter(kw.pop("model"), prof, batch_size=b, **kw)
        built = time.perf_counter() - t0
        r = throughput(seg, state["corpus"], state["tokens"], cap, size["chunk"])
        r.update(config=name, batch=b, built_s=built)
        run.results.setdefault("throughput", []).append(r)
        rows.append([name, b, r["docs"], r["tokens"], r["seconds"], r["tokens_per_s"], r["kchars_per_s"], built])
        run.say(f"   {name} batch {b}: {r['tokens_per_s']:,.0f} tokens/s")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--profile", required=True, type=Path)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--dry-run", action="store_true", help="the same steps on the CPU, tiny sizes")
    ap.add_argument("--budget", type=float, default=320.0,
                    help="seconds the whole run may take (default 320: the lease's 6 minutes, less the setup)")
    args = ap.parse_args(argv)
    size = SIZES[args.dry_run]
    dev = size["device"]
    run = Run(args.out, args.budget)
    res = run.results
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    model, prof = str(args.model), str(args.profile)
    parity, corpus = load_docs(args.data, args.dry_run, size)
    state: dict = {"corpus": corpus}

    with run.step("environment") as row:
        import numpy
        import torch

        env = {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": numpy.__version__,
               "cuda": torch.cuda.is_available(), "cores": cores, "dry_run": args.dry_run, "device": dev,
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
        try:
            import onnxruntime

            env["onnxruntime"] = onnxruntime.__version__
            env["providers"] = onnxruntime.get_available_providers()
        except ImportError as exc:
            env["onnxruntime"] = f"missing ({exc})"
        from headseg.export.provision import export_available

        env["onnx_export"] = export_available() or "available"
        import headseg

        env["headseg"] = str(Path(headseg.__file__).parent)
        res["environment"] = env
        run.say(json.dumps(env))
        if dev == "cuda" and not env["cuda"]:
            raise RuntimeError("torch sees no CUDA GPU (use --dry-run on a CPU machine)")
        row[3] = f"{env['gpu'] or 'no GPU'}, {cores} cores, torch {env['torch']}"

    with run.step("load") as row:
        from headseg.analysis import load_model

        state["cpu"] = load_model(model)
        # a second copy for the device: TorchBackend moves its model, and both paths run side by side
        state["dev"] = load_model(model)
        state["bare"] = load_model(model, weights=False)
        tok = state["cpu"].tokenizer
        state["tokens"] = [len(tok.encode(d["text"])[0]) for d in corpus]
        res["corpus"] = {"documents": len(corpus), "tokens": sum(state["tokens"]),
                         "characters": sum(len(d["text"]) for d in corpus), "parity_documents": len(parity),
                         "fingerprint": state["cpu"].info.fingerprint}
        row[3] = (f"{len(corpus)} documents, {sum(state['tokens']):,} tokens; {len(parity)} parity documents; "
                  f"model {state['cpu'].info.fingerprint}")

    with run.step("cli") as row:
        doc = parity[0]["text"]
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "doc.txt"
            f.write_text(doc, encoding="utf-8")
            base = [sys.executable, "-m", "headseg", "segment", str(f), "--model", model, "--profile", prof]
            # side by side: each process mostly imports torch and loads the model
            procs = [subprocess.Popen(base + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for extra in (["--backend", "torch", "--device", dev, "--format", "jsonl", "--quiet"],
                                   ["--format", "jsonl"])]
            (out, err), (_, auto_err) = [p.communicate(timeout=300) for p in procs]
            if procs[0].returncode != 0:
                raise RuntimeError(f"headseg segment --backend torch --device {dev} exit {procs[0].returncode}: "
                                   f"{err.strip()[-300:]}")
            cli = [json.loads(line)["start"] for line in out.splitlines() if line.strip()][1:]
        api = segmenter(state["dev"], prof, backend="torch", device=dev).segment(doc).boundaries
        said = [line for line in auto_err.splitlines() if line.strip()]
        res["cli"] = {"cli": cli, "api": api, "equal": cli == api, "auto_exit": procs[1].returncode, "auto_said": said}
        run.say(f"auto said: {said}")
        if cli != api:
            raise RuntimeError(f"the CLI's boundaries {cli} are not the API's {api}")
        row[3] = f"CLI = API ({len(api)} boundaries); auto said: {' / '.join(said) or '(nothing)'}"

    with run.step("parity") as row:
        texts = [d["text"] for d in parity]
        ref = [s.boundaries for s in segmenter(state["cpu"], prof, backend="torch", device="cpu").segment_many(texts)]
        rows, counts = [], {}
        for b in size["batches"]:
            got = [s.boundaries for s in
                   segmenter(state["dev"], prof, backend="torch", device=dev, batch_size=b).segment_many(texts)]
            same = [g == r for g, r in zip(got, ref)]
            counts[b] = sum(same)
            for d, g, r, s in zip(parity, got, ref, same):
                if not s:
                    rows.append([b, d["family"], d["id"], len(d["text"]), len(r), len(g),
                                 len(set(g) ^ set(r))])
        res["parity"] = {"documents": len(parity), "equal_by_batch": counts, "differing": rows}
        run.table(f"Parity: torch on {dev} against torch on the CPU, {len(parity)} documents (same restored weights)",
                  ["batch", "equal documents", "share"],
                  [[b, f"{c}/{len(parity)}", f"{c / len(parity):.1%}"] for b, c in counts.items()])
        if rows:
            run.table("Documents whose boundaries differ", ["batch", "family", "id", "chars", "cpu boundaries",
                                                            f"{dev} boundaries", "offsets not shared"], rows)
        row[3] = ", ".join(f"batch {b}: {c}/{len(parity)}" for b, c in counts.items())

    with run.step("throughput") as row:
        rows = throughput_cells(run, [(f"torch {dev}", b, dict(model=state["dev"], backend="torch", device=dev),
                                       size["gpu_cap"]) for b in size["batches"]], state, prof, size, cores)
        run.table(f"Whole segmenter on {dev}: document tokens per second (each cell capped at {size['gpu_cap']:.0f} s)",
                  THROUGHPUT_HEADER, rows)
        best = max((r for r in res["throughput"] if r["config"] == f"torch {dev}"), key=lambda r: r["tokens_per_s"])
        row[3] = f"torch {dev} best {best['tokens_per_s']:,.0f} tokens/s at batch {best['batch']}"

    with run.step("forward") as row:
        import torch

        enc = state["dev"].model  # the encoder the torch-device segmenter ran
        vocab = enc.config.vocab_size
        g = torch.Generator().manual_seed(0)
        B = size["forward_batch"]
        ids = torch.randint(1000, int(vocab), (B, WINDOW), generator=g).to(dev)  # never zeros (METHOD.md)
        mask = torch.ones_like(ids)
        rows, out = [], {}
        ref = None
        for prec, m in (("fp32", enc), ("fp16", copy.deepcopy(enc).half())):
            with torch.inference_mode():
                for _ in range(2):
                    y = m(input_ids=ids, attention_mask=mask).last_hidden_state
                times = []
                for _ in range(size["forward_groups"]):
                    if dev == "cuda":
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        for _ in range(size["forward_reps"]):
                            y = m(input_ids=ids, attention_mask=mask).last_hidden_state
                        e.record()
                        torch.cuda.synchronize()
                        times.append(s.elapsed_time(e) / 1000 / size["forward_reps"])
                    else:
                        t0 = time.perf_counter()
                        for _ in range(size["forward_reps"]):
                            y = m(input_ids=ids, attention_mask=mask).last_hidden_state
                        times.append((time.perf_counter() - t0) / size["forward_reps"])
            y = y.float()
            err = 0.0 if ref is None else float((y - ref).norm() / ref.norm())
            ref = y if ref is None else ref
            t = sorted(times)[len(times) // 2]
            out[prec] = {"seconds": t, "tokens_per_s": B * WINDOW / t, "rel_error_vs_fp32": err}
            rows.append([prec, B, t * 1000, B / t, B * WINDOW / t, err])
        best = max(r["tokens_per_s"] for r in res["throughput"] if r["config"] == f"torch {dev}")
        out["pipeline_over_fp32_ceiling"] = best / out["fp32"]["tokens_per_s"]
        res["forward"] = out
        run.table(f"The model alone on {dev}: one forward pass over {B} full {WINDOW}-token windows (median of "
                  f"{size['forward_groups']} groups of {size['forward_reps']})",
                  ["precision", "windows", "ms per pass", "windows/s", "tokens/s", "‖y − y_fp32‖/‖y_fp32‖"], rows)
        run.say(f"   whole segmenter (torch {dev}, best batch) / fp32 forward ceiling: "
                f"{out['pipeline_over_fp32_ceiling']:.3f}")
        row[3] = (f"fp32 {out['fp32']['tokens_per_s']:,.0f}, fp16 {out['fp16']['tokens_per_s']:,.0f} tokens/s; "
                  f"segmenter at {out['pipeline_over_fp32_ceiling']:.1%} of the fp32 ceiling")

    with run.step("profile") as row:
        if run.left() < 40:
            raise Skip(f"{run.left():.0f} s of the time budget left")
        b = size["batches"][len(size["batches"]) // 2]
        seg = segmenter(state["dev"], prof, backend="torch", device=dev, batch_size=b)
        seg.segment_many([corpus[0]["text"]])
        texts, total_chars = [], 0
        for d in corpus:  # about a third of the corpus: run twice (plain, profiled) within the budget
            if texts and total_chars > size["profile_chars"]:
                break
            texts.append(d["text"])
            total_chars += len(d["text"])
        t0 = time.perf_counter()
        seg.segment_many(texts)
        plain = time.perf_counter() - t0
        pr = cProfile.Profile()
        pr.enable()
        seg.segment_many(texts)
        pr.disable()
        st = pstats.Stats(pr)
        stages: dict[str, float] = {}
        for func, (cc, nc, tt, ct, callers) in st.stats.items():
            stages[stage_of(func, st.stats)] = stages.get(stage_of(func, st.stats), 0.0) + tt
        total = sum(stages.values())
        ranked = sorted(stages.items(), key=lambda kv: -kv[1])
        res["profile"] = {"batch": b, "plain_seconds": plain, "profiled_seconds": total, "stages": dict(ranked)}
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(40)
        (args.out / "profile.txt").write_text(buf.getvalue(), encoding="utf-8")
        run.table(f"Where the torch-{dev} pipeline's time goes: cProfile self time by stage, {len(texts)} documents, "
                  f"batch {b} ({plain:.2f} s unprofiled, {total:.2f} s profiled)",
                  ["stage", "seconds", "share"], [[s, t, f"{t / total:.1%}"] for s, t in ranked])
        row[3] = "largest: " + ", ".join(f"{s} {t / total:.0%}" for s, t in ranked[:3])

    with run.step("ort_cuda") as row:
        try:
            from headseg.export.runtime import cuda_provider_works

            works = cuda_provider_works()
        except ImportError as exc:
            raise Skip(f"no onnxruntime ({exc})") from None
        if not works:
            import onnxruntime

            raise Skip(f"onnxruntime has no usable CUDA provider (providers: {', '.join(onnxruntime.get_available_providers())})")
        texts = [d["text"] for d in parity]
        ref = [s.boundaries for s in segmenter(state["cpu"], prof, backend="torch", device="cpu").segment_many(texts)]
        rows = []
        for p in ("fp32", "fp16"):
            seg = segmenter(state["bare"], prof, backend="onnx", device="cuda", precision=p, batch_size=256)
            same = sum(s.boundaries == r for s, r in zip(seg.segment_many(texts), ref))
            r = throughput(seg, corpus, state["tokens"], size["gpu_cap"], size["chunk"])
            rows.append([f"onnx {p} cuda", f"{same}/{len(texts)}", r["tokens_per_s"]])
            res.setdefault("ort_cuda", []).append({"precision": p, "equal": same, **r})
        run.table("ONNX on CUDA", ["configuration", "boundaries equal to CPU torch", "tokens/s"], rows)
        row[3] = "; ".join(f"{a}: {b} equal, {c:,.0f} tokens/s" for a, b, c in rows)

    with run.step("throughput_cpu") as row:
        from headseg.export.provision import export_available

        why = export_available()
        cells = [] if dev == "cpu" else [  # the dry run's device rows are these already
            ("torch cpu", b, dict(model=state["cpu"], backend="torch", device="cpu"), size["cpu_cap"])
            for b in size["batches"]]
        if not why:
            for p in ("int8", "fp32"):
                cells += [(f"onnx {p} cpu", b, dict(model=state["bare"], backend="onnx", device="cpu", precision=p,
                                                     threads=cores), size["cpu_cap"]) for b in size["batches"]]
        rows = throughput_cells(run, cells, state, prof, size, cores)
        run.table(f"Whole segmenter on the CPU ({cores} cores): document tokens per second (each cell capped at "
                  f"{size['cpu_cap']:.0f} s)", THROUGHPUT_HEADER, rows)
        row[3] = f"{len(rows)} of {len(cells)} cells" + (f"; ONNX rows skipped: {why}" if why else "")
        if why and not rows:
            raise Skip(f"ONNX cannot export here ({why})")

    with run.step("auto") as row:
        from headseg.export.policy import GpuMeasurement, choose_engine

        rows = res.get("throughput") or []
        torch_best = max((r["tokens_per_s"] for r in rows if r["config"] == f"torch {dev}"), default=None)
        int8 = max((r["tokens_per_s"] for r in rows if r["config"] == "onnx int8 cpu"), default=None)
        if torch_best is None or int8 is None:
            raise Skip("needs the torch-device and ONNX int8 throughput rows")
        gpu = res["environment"]["gpu"] or "cpu (dry run)"
        m = GpuMeasurement(gpu=gpu, torch_cuda_tokens_per_s=round(torch_best), cores=cores,
                           onnx_int8_tokens_per_s_per_core=round(int8 / cores, 1))
        c = choose_engine("auto", gpu, cores, measured=m)
        res["auto"] = {"measurement": repr(m), "choice_here": [c.backend, c.device], "reason": c.reason}
        run.say(f"   for export/policy.py: GPU_MEASUREMENT = {m!r}")
        run.say(f"   auto here would then say: {c.reason}")
        row[3] = f"torch {dev} {torch_best:,.0f} vs ONNX int8 {int8:,.0f} tokens/s on {cores} cores: {c.backend} {c.device}"

    return run.finish()


if __name__ == "__main__":
    sys.exit(main())
