"""``headseg segment`` on a corpus: local engine vs Ray with 1 and 2 workers, and memory for 1x vs 10x documents.

Builds a JSONL corpus (at least ``--mb`` MB, default 1) of ~4 KB documents cut
at paragraph breaks from ../shared/data (manifesto corpus, then Choi), and
runs each configuration as its own command (``python -m headseg segment``),
one after another, so that the rows are measured side by side:

* local engine (torch's default threads, and ``--threads 1``); ``--engine ray
  --workers 1``; ``--engine ray --workers 2``: end-to-end wall time and
  throughput, the net rate (the same command on the first two documents gives
  the fixed cost: start-up, Ray, model loading; net = the other documents over
  the difference), and the peak RSS of each process (driver: ``wait4`` of the
  child; Ray actors: the largest ``VmHWM`` seen in ``/proc`` while they ran);
* the local engine on the corpus and on 10x its documents: peak RSS.

Every output is compared with the local engine's: byte-identical, or equal but
for a rounded score's last digit (Ray batches documents differently), or not.

    .venv/bin/python -m benchmarks.scale                      # embedded model, 1 MB
    .venv/bin/python -m benchmarks.scale --model tiny         # a tiny random BERT: the engines' own overhead
    .venv/bin/python -m benchmarks.scale --skip-ray --rss-only # just the 1x / 10x memory rows
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import REPO, corpus_files, make_tiny_model, segmentation_root


def build_corpus(path: Path, min_bytes: int, doc_chars: int = 4000, repeat: int = 1) -> tuple[int, int]:
    """Write the JSONL corpus; returns (documents, bytes of text)."""
    files = corpus_files()
    files += sorted(glob.glob(str(segmentation_root() / "choi" / "**" / "*.ref"), recursive=True))
    docs: list[str] = []
    size = 0
    for f in files:
        text = Path(f).read_text(encoding="utf-8", errors="replace").replace("==========\n", "")
        cur = ""
        for p in text.splitlines(keepends=True):
            cur += p
            if len(cur) >= doc_chars:
                docs.append(cur)
                size += len(cur.encode("utf-8"))
                cur = ""
        if size >= min_bytes:
            break
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for r in range(repeat):
            for i, d in enumerate(docs):
                fh.write(json.dumps({"id": f"r{r}-d{i}", "text": d}, ensure_ascii=False) + "\n")
                n += 1
    return n, size * repeat


#: bytes of text per MiniLM token in this corpus (measured: 1,186,694 bytes, 222,470 tokens)
BYTES_PER_TOKEN = 5.33


def same_records(a: Path, b: Path) -> str:
    """'yes' if byte-identical; 'scores ±1e-6' if only rounded scores differ in their last digit; else 'NO'."""
    if a.read_bytes() == b.read_bytes():
        return "yes"
    ra = [json.loads(x) for x in a.read_text(encoding="utf-8").splitlines()]
    rb = [json.loads(x) for x in b.read_text(encoding="utf-8").splitlines()]
    key = lambda r: (r["document"], r["index"], r["start"], r["end"], r["text"])  # noqa: E731
    if [key(r) for r in ra] != [key(r) for r in rb]:
        return "NO"
    worst = max(abs(x["score"] - y["score"]) for x, y in zip(ra, rb))
    return "scores ±1e-6" if worst <= 1.5e-6 else f"scores differ by {worst:.1e}"


class ActorMemory(threading.Thread):
    """Largest VmHWM (peak RSS) of Ray's segmenter actor processes while a run lasts, and first-output timing."""

    def __init__(self, out: Path):
        super().__init__(daemon=True)
        self.out = out
        self.peaks: dict[int, float] = {}
        self.first_t: float | None = None
        self.first_docs = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            if self.first_t is None and self.out.exists() and self.out.stat().st_size > 0:
                self.first_t = time.monotonic()
                with open(self.out, "rb") as fh:
                    self.first_docs = len({json.loads(x)["document"] for x in fh.read().splitlines()[:-1] if x})
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if b"SegmentActor" not in cmd and b"MapWorker" not in cmd:
                        continue
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            self.peaks[int(pid)] = max(self.peaks.get(int(pid), 0.0), int(line.split()[1]) / 1024)
                except OSError:
                    continue
            time.sleep(0.2)


def run_segment(corpus: Path, out: Path, model: str | None, extra: list[str], total_docs: int) -> dict:
    cmd = [sys.executable, "-m", "headseg", "segment", str(corpus), "--format", "jsonl", "--out", str(out),
           "--quiet", *extra]
    if model:
        cmd += ["--model", model]
    mon = ActorMemory(out)
    mon.start()
    load = os.getloadavg()[0]
    err = out.with_suffix(".stderr")
    t0 = time.monotonic()
    with open(err, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=fh)
        # wait4: this child's own peak RSS (not the largest of all children so far)
        _, status, usage = os.wait4(proc.pid, 0)
    t1 = time.monotonic()
    mon.stop = True
    mon.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"segment failed ({status}): {err.read_text()[-2000:]}")
    steady = None
    if mon.first_t is not None and t1 - mon.first_t > 0:
        steady = (total_docs - mon.first_docs) / (t1 - mon.first_t)
    return {"wall": t1 - t0, "driver_rss": usage.ru_maxrss / 1024,
            "actors_rss": sorted(mon.peaks.values()), "steady_docs_s": steady,
            "load": (load, os.getloadavg()[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1.0, help="corpus size in MB of text (default 1)")
    ap.add_argument("--model", default=None, help="model path; 'tiny' builds a tiny random BERT (default: embedded)")
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--rss-model", choices=("tiny", "same"), default="tiny",
                    help="model for the 1x / 10x memory rows (tiny: fast, the streaming machinery's own memory)")
    ap.add_argument("--rss-only", action="store_true", help="only the 1x / 10x memory rows")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model
        if model == "tiny":
            model = str(tmp / "tiny")
            make_tiny_model(Path(model))
        corpus = tmp / "corpus.jsonl"
        n_docs, n_bytes = build_corpus(corpus, int(args.mb * 1e6))
        label = args.model or "embedded MiniLM"
        print(f"corpus: {n_docs} documents, {n_bytes / 1e6:.2f} MB of text; model: {label}; "
              f"{os.cpu_count()} CPUs")
        print()
        rows = []
        if not args.rss_only:
            # the first two documents alone: the fixed cost (start-up, Ray, model loading) of each engine
            small = tmp / "small.jsonl"
            small.write_text("".join(corpus.read_text(encoding="utf-8").splitlines(keepends=True)[:2]),
                             encoding="utf-8")
            configs = [("local engine", []), ("local engine, 1 thread", ["--threads", "1"])]
            if not args.skip_ray:
                configs += [("ray, 1 worker", ["--engine", "ray", "--workers", "1"]),
                            ("ray, 2 workers", ["--engine", "ray", "--workers", "2"])]
            local_out = tmp / "out0.jsonl"
            for i, (name, extra) in enumerate(configs):
                out = tmp / f"out{i}.jsonl"
                fixed = run_segment(small, tmp / f"small{i}.jsonl", model, extra, 2)
                res = run_segment(corpus, out, model, extra, n_docs)
                res["fixed"] = fixed["wall"]
                res["net_docs_s"] = (n_docs - 2) / max(res["wall"] - fixed["wall"], 1e-9)
                res["same"] = "-" if i == 0 else same_records(local_out, out)
                rows.append((name, res))
            print("| engine | wall s | fixed s (2 docs) | MB/s end to end | net MB/s (wall - fixed) "
                  "| net tokens/s | peak RSS driver MB | peak RSS per actor MB | records = local | load before/after |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            per_doc = n_bytes / n_docs / 1e6
            for name, r in rows:
                net = r["net_docs_s"] * per_doc
                actors = ", ".join(f"{x:.0f}" for x in r["actors_rss"]) or "-"
                print(f"| {name} | {r['wall']:.1f} | {r['fixed']:.1f} | {n_bytes / 1e6 / r['wall']:.4f} | "
                      f"{net:.4f} | {net * 1e6 / BYTES_PER_TOKEN:.0f} | {r['driver_rss']:.0f} | {actors} | "
                      f"{r['same']} | {r['load'][0]:.1f} / {r['load'][1]:.1f} |")
            print()
            rate = {name: r["net_docs_s"] for name, r in rows}
            for name in rate:
                if name.startswith("ray"):
                    print(f"{name}: net rate {rate[name] / rate['local engine']:.2f}x the local engine's, "
                          f"{rate[name] / rate['local engine, 1 thread']:.2f}x the local engine's on 1 thread")
            if "ray, 2 workers" in rate:
                print(f"ray 2 workers / ray 1 worker (net): {rate['ray, 2 workers'] / rate['ray, 1 worker']:.2f}x")
            print()
        big = tmp / "corpus10.jsonl"
        n10, b10 = build_corpus(big, int(args.mb * 1e6), repeat=10)
        rss_model = model
        if args.rss_model == "tiny" and args.model != "tiny":
            rss_model = str(tmp / "tiny")
            make_tiny_model(Path(rss_model))
        elif args.rss_model == "same":
            rss_model = model
        r1 = run_segment(corpus, tmp / "m1.jsonl", rss_model, ["--threads", "1"], n_docs)
        r10 = run_segment(big, tmp / "m10.jsonl", rss_model, ["--threads", "1"], n10)
        print(f"memory rows: model {'tiny' if rss_model != model or args.model == 'tiny' else label}")
        print("| local engine, 1 thread | documents | MB | wall s | peak RSS MB | load before/after |")
        print("|---|---|---|---|---|---|")
        for name, n, b, r in (("1x", n_docs, n_bytes, r1), ("10x", n10, b10, r10)):
            print(f"| {name} | {n} | {b / 1e6:.1f} | {r['wall']:.1f} | {r['driver_rss']:.0f} | "
                  f"{r['load'][0]:.1f} / {r['load'][1]:.1f} |")
        print(f"\npeak RSS 10x / 1x: {r10['driver_rss'] / r1['driver_rss']:.3f}")


if __name__ == "__main__":
    main()
