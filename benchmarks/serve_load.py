"""Load on ``headseg serve`` over loopback: throughput and latency, overload, SIGTERM, HTTP = CLI, Ray Serve.

    python -m benchmarks.serve_load [--parts throughput,overload,sigterm,equal,ray] [--choi N] [--lectures N]
                                    [--requests N] [--overload-requests N] [--compare TREE]

Documents: the first ``--choi`` of choi/3/3-11 and ``--lectures`` of
lectures_ai (``headseg.segmenter.evaluation.loaders``), one document per
request, sent round-robin.  Every loop is bounded (a number of requests, never
"until stopped"); servers bind 127.0.0.1 on a free port.

* throughput: 1/4/16/64 concurrent clients against one server, documents/s,
  characters/s and p50/p95/p99 latency, next to in-process
  ``Segmenter.segment_many`` on the same documents (measured in this process
  before the server starts, so the two never share the cores);
* overload: 256 clients against ``--max-queue 32``: every answer must be 2xx or
  429, none 5xx or a reset; the server's RSS peak against its RSS idle after
  warm-up;
* sigterm: 16 clients, SIGTERM after the first answers: every request the
  server accepted is answered in full, then the server exits 0;
* equal: every document through HTTP and through ``headseg segment --format
  jsonl``: the records, JSON-normalised, byte-for-byte equal;
* ray: Ray Serve with 1 and then 2 replicas at 16 clients, one model thread
  per replica (``--threads 1``), with the CPU of each Ray process and of the
  load generator.

``--compare TREE`` (throughput) also serves from another source tree (a
checkout of an older commit, its ``headseg/`` importable from its root): both
servers stay up and each concurrency level runs against one, then the other,
so before and after share the machine's conditions.

Times drift on a shared machine: compare the ratios of one run; the load
average is printed, and beside each row the server's cores busy (its CPU time
over the row's wall time), the characters it segmented per CPU-second, and the
machine's idle cores during the row (so lack of CPU tells itself apart from
cores the server leaves idle) and, where the server counts it (``/metrics``),
the share of its model lanes' time spent waiting for windows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.common import segmentation_root
from headseg.serve import launch


def load_docs(n_choi: int, n_lectures: int) -> list[tuple[str, str]]:
    from headseg.segmenter.evaluation.loaders import iter_documents

    root = segmentation_root()
    docs = [(d.id, d.text) for d in iter_documents(root / "choi" / "3" / "3-11", limit=n_choi)]
    docs += [(d.id, d.text) for d in iter_documents(root / "lectures_ai", limit=n_lectures)]
    return docs


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def wait_ready(url: str, timeout: float, proc: subprocess.Popen) -> None:
    """:func:`headseg.serve.launch.wait_ready`, ending the benchmark with its message."""
    try:
        launch.wait_ready(url, timeout, proc)
    except launch.ServerNotReady as exc:
        raise SystemExit(str(exc)) from None


def cpu_seconds(pid: int, task: str | None = None) -> float:
    """User + system CPU time of process ``pid`` and its threads so far (of one thread: ``task``)."""
    with open(f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def model_counters(url: str) -> dict[str, float]:
    """The server's model-lane counters from ``/metrics`` (``lanes``, ``busy``, ``waiting`` seconds); {} if it has none."""
    out = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        for key in ("lanes", "busy_seconds", "waiting_seconds"):
            if line.startswith(f"headseg_model_{key} "):
                out[key] = float(line.split()[1])
    return out


def machine_idle() -> tuple[float, float]:
    """(idle + iowait, all) jiffies of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[3] + v[4], sum(v[:8])


class Meter:
    """From construction to :meth:`stop`: the server's cores busy, the machine's idle cores, and the share of
    the server's model lanes' time spent waiting for windows (None where the server does not count it)."""

    def __init__(self, server: "Server"):
        self.server = server
        self.cpu, self.idle, self.model = cpu_seconds(server.proc.pid), machine_idle(), model_counters(server.url)
        self.t = time.perf_counter()

    def stop(self) -> dict:
        wall = time.perf_counter() - self.t
        idle, total = (a - b for a, b in zip(machine_idle(), self.idle))
        model, waiting = model_counters(self.server.url), None
        if "waiting_seconds" in model:
            waiting = (model["waiting_seconds"] - self.model["waiting_seconds"]) / (model["lanes"] * wall)
        return {"cores": (cpu_seconds(self.server.proc.pid) - self.cpu) / wall, "lanes_waiting": waiting,
                "idle_cores": idle / max(total, 1) * (os.cpu_count() or 1)}


class Server:
    """``headseg serve`` in a subprocess, ready when constructed; ``tree``: serve that source tree's code."""

    def __init__(self, *flags: str, timeout: float = 300, stdout=subprocess.DEVNULL, tree: Path | None = None):
        self.port = launch.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        flags = flags if "--log-level" in flags else ("--log-level", "warning", *flags)
        env = None
        if tree is not None:  # ``-m`` puts the working folder first on sys.path: run from the tree
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "headseg", "serve", "--port", str(self.port), *flags],
                                     stdout=stdout, stderr=subprocess.PIPE, env=env,
                                     cwd=None if tree is None else str(tree))
        wait_ready(self.url, timeout, self.proc)

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(120)
        return rc, self.proc.stderr.read().decode()


async def load(url: str, docs, clients: int, requests: int, stop_after: float | None = None,
               on_first=None) -> dict:
    """``requests`` single-document requests from ``clients`` concurrent clients; statuses and latencies."""
    results: list[tuple[str, float]] = []
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        async def one_client():
            for i in counter:
                doc_id, text = docs[i % len(docs)]
                t0 = time.perf_counter()
                try:
                    r = await client.post(url + "/v1/segment", json={"text": text})
                    status = str(r.status_code)
                    if r.status_code == 200 and "".join(s["text"] for s in r.json()["segments"]) != text:
                        status = "bad-body"
                except httpx.ConnectError:
                    status = "refused"  # never accepted (after SIGTERM)
                except httpx.TransportError as exc:
                    status = f"reset:{type(exc).__name__}"
                results.append((status, time.perf_counter() - t0))
                if on_first is not None and len(results) == 1:
                    on_first()

        t0 = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        wall = time.perf_counter() - t0
    ok = sorted(t for s, t in results if s == "200")
    statuses: dict[str, int] = {}
    for s, _ in results:
        statuses[s] = statuses.get(s, 0) + 1
    q = (statistics.quantiles(ok, n=100) if len(ok) >= 2 else [float("nan")] * 99)
    return {"wall": wall, "ok": len(ok), "statuses": statuses, "p50": q[49], "p95": q[94], "p99": q[98]}


def doc_chars(docs, n: int) -> int:
    return sum(len(docs[i % len(docs)][1]) for i in range(n))


def in_process(docs) -> float:
    """Characters per second of ``Segmenter.segment_many`` over the documents (one warm-up first)."""
    from headseg.api import Segmenter

    seg = Segmenter(quiet=True)
    seg.segment(docs[0][1])
    t0 = time.perf_counter()
    seg.segment_many([t for _, t in docs])
    return sum(len(t) for _, t in docs) / (time.perf_counter() - t0)


def part_throughput(docs, requests: int, compare: Path | None = None) -> None:
    base = [in_process(docs)]
    servers = {"this tree": Server("--max-queue", "512")}
    if compare is not None:
        servers = {f"{compare}": Server("--max-queue", "512", tree=compare), **servers}
    rows = []
    try:
        for server in servers.values():
            asyncio.run(load(server.url, docs, 4, 8))  # warm the connections and the graph's shapes
        for k, clients in enumerate((1, 4, 16, 64)):
            # side by side: each level against each server in turn, which goes first alternating
            for name, server in list(servers.items())[::(-1) ** k]:
                meter = Meter(server)
                r = asyncio.run(load(server.url, docs, clients, requests))
                r.update(meter.stop())
                rows.append((name, clients, r))
    finally:
        for server in servers.values():
            server.stop()
    base.append(in_process(docs))
    inproc = sum(base) / 2
    print(f"\n## throughput ({requests} requests per row; in-process segment_many: {base[0]:.0f} chars/s before "
          f"the rows, {base[1]:.0f} after, × in-process against their mean)\n")
    print("| server | clients | docs/s | chars/s | p50 s | p95 s | p99 s | × 1 client | × in-process | "
          "server cores busy | chars per server CPU-s | machine idle cores | model lanes waiting | statuses |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    one = {name: r["ok"] / r["wall"] for name, clients, r in rows if clients == 1}
    for name, clients, r in sorted(rows, key=lambda row: (row[1], row[0] == "this tree")):
        rate, chars = r["ok"] / r["wall"], doc_chars(docs, requests) / r["wall"]
        print(f"| {name} | {clients} | {rate:.2f} | {chars:.0f} | {r['p50']:.3f} | "
              f"{r['p95']:.3f} | {r['p99']:.3f} | {rate / one[name]:.2f} | {chars / inproc:.2f} | {r['cores']:.2f} | "
              f"{chars / max(r['cores'], 1e-9):.0f} | {r['idle_cores']:.2f} | "
              f"{'n/a' if r['lanes_waiting'] is None else format(r['lanes_waiting'], '.0%')} | {r['statuses']} |")


def part_overload(docs, requests: int, flags: list[str]) -> None:
    server = Server("--max-queue", "32", *flags)
    peak = [0.0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(server.proc.pid))
            time.sleep(0.05)

    try:
        asyncio.run(load(server.url, docs, 4, 16))  # warm-up
        idle = rss_mb(server.proc.pid)
        sampler = threading.Thread(target=sample)
        sampler.start()
        r = asyncio.run(load(server.url, docs, 256, requests))
        done.set()
        sampler.join()
        after = rss_mb(server.proc.pid)
    finally:
        rc, err = server.stop()
    bad = {s: n for s, n in r["statuses"].items() if s not in ("200", "429")}
    print(f"\n## overload: 256 clients, --max-queue 32, {requests} requests\n")
    print("| 200 | 429 | other (5xx, resets) | RSS idle after warm-up MB | RSS peak MB | peak / idle | "
          "p99 of 200s s | traceback in log |")
    print("|---:|---:|---|---:|---:|---:|---:|---|")
    print(f"| {r['statuses'].get('200', 0)} | {r['statuses'].get('429', 0)} | {bad or 'none'} | {idle:.0f} | "
          f"{max(peak[0], after):.0f} | {max(peak[0], after) / idle:.2f} | {r['p99']:.2f} | "
          f"{'yes' if 'Traceback' in err else 'no'} |")


def part_sigterm(docs, requests: int) -> None:
    server = Server("--max-queue", "512", "--log-level", "info", stdout=subprocess.PIPE)
    def first():
        server.proc.send_signal(signal.SIGTERM)

    try:
        r = asyncio.run(load(server.url, docs, 16, requests, on_first=first))
    finally:
        rc, err = server.stop()
    # the server's access log: the requests its app answered; a client's read error on a keep-alive
    # connection the server closed as idle is a request the server never read
    answered = server.proc.stdout.read().decode().count('"POST /v1/segment HTTP/1.1" 200')
    lost = answered - r["statuses"].get("200", 0)
    unread = {s: n for s, n in r["statuses"].items() if s not in ("200", "refused")}
    print(f"\n## SIGTERM under load: 16 clients, SIGTERM after the first answer ({requests} requests)\n")
    print("| 200 received (complete) | 200 sent (server log) | accepted but lost | refused after SIGTERM | "
          "closed unread (keep-alive) | exit code | traceback |")
    print("|---:|---:|---:|---:|---|---:|---|")
    print(f"| {r['statuses'].get('200', 0)} | {answered} | {lost} | {r['statuses'].get('refused', 0)} | "
          f"{unread or 'none'} | {rc} | {'yes' if 'Traceback' in err else 'no'} |")


def normalise(records) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in records)


def part_equal(docs) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "docs.jsonl"
        corpus.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in docs),
                          encoding="utf-8")
        out = subprocess.run([sys.executable, "-m", "headseg", "segment", str(corpus), "--format", "jsonl",
                              "--quiet"], capture_output=True, text=True, check=True).stdout
    cli = [json.loads(line) for line in out.splitlines()]
    server = Server()
    try:
        body = {"documents": [{"id": i, "text": t} for i, t in docs]}
        r = httpx.post(server.url + "/v1/segment", json=body, timeout=600)
        http = [{"document": rec["document"], **s} for line in r.text.splitlines()
                for rec in [json.loads(line)] for s in rec["segments"]]
    finally:
        server.stop()
    same = normalise(http) == normalise(cli)
    print("\n## HTTP records vs `headseg segment --format jsonl`\n")
    print("| documents | segment records (HTTP) | (CLI) | byte-for-byte equal after JSON normalisation |")
    print("|---:|---:|---:|---|")
    print(f"| {len(docs)} | {len(http)} | {len(cli)} | {'yes' if same else 'NO'} |")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (Ray's raylet, GCS, workers, proxy and replicas)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def ray_role(pid: int) -> str:
    """A Ray process's role from its command line (``ray::ServeReplica:headseg:SegmentService`` → replica)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    for key, role in (("ServeReplica", "replica"), ("ProxyActor", "proxy"), ("ServeController", "controller"),
                      ("raylet", "raylet"), ("gcs_server", "gcs"), ("headseg serve", "driver")):
        if key in cmd:
            return role
    return "other ray"


def ray_cpu(root: int) -> dict[int, tuple[str, float]]:
    out = {}
    for p in descendants(root):
        try:
            out[p] = (ray_role(p), cpu_seconds(p))
        except OSError:
            pass
    return out


def part_ray(docs, requests: int, workers: int | None = None) -> None:
    rows = []
    for replicas in (1, 2):
        port = launch.free_port()
        # one model thread per replica: 2 replicas against 1 is like for like, as a second node would be
        proc = subprocess.Popen([sys.executable, "-m", "headseg", "serve", "--engine", "ray", "--replicas",
                                 str(replicas), "--threads", "1", "--port", str(port), "--max-queue", "512",
                                 *([] if workers is None else ["--doc-threads", str(workers)])],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, 300, proc)
            asyncio.run(load(url, docs, 4, 8))
            before, idle, me, t0 = ray_cpu(proc.pid), machine_idle(), time.process_time(), time.perf_counter()
            r = asyncio.run(load(url, docs, 16, requests))
            wall = time.perf_counter() - t0
            after = ray_cpu(proc.pid)
            i, total = (a - b for a, b in zip(machine_idle(), idle))
            roles: dict[str, list[float]] = {}
            for p, (role, cpu) in after.items():
                roles.setdefault(role, []).append((cpu - before.get(p, (role, 0.0))[1]) / wall)
            r["roles"] = {k: sorted(v, reverse=True) for k, v in roles.items()}
            r["client"] = (time.process_time() - me) / wall
            r["idle_cores"] = i / max(total, 1) * (os.cpu_count() or 1)
            rows.append((replicas, r))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(180)
    one = rows[0][1]["ok"] / rows[0][1]["wall"]
    print(f"\n## Ray Serve at 16 clients, one model thread per replica ({requests} requests"
          f"{'' if workers is None else f', {workers} worker thread(s) per replica'})\n")
    print("| replicas | docs/s | chars/s | p50 s | p99 s | × 1 replica | replicas' cores busy (each) | proxy | "
          "other Ray processes | load generator | machine idle cores | statuses |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|")
    for replicas, r in rows:
        rate = r["ok"] / r["wall"]
        roles = r["roles"]
        other = sum(sum(v) for k, v in roles.items() if k not in ("replica", "proxy"))
        each = ", ".join(f"{c:.2f}" for c in roles.get("replica", []))
        print(f"| {replicas} | {rate:.2f} | {doc_chars(docs, requests) / r['wall']:.0f} | {r['p50']:.3f} | "
              f"{r['p99']:.3f} | {rate / one:.2f} | {each} | {sum(roles.get('proxy', [])):.2f} | {other:.2f} | "
              f"{r['client']:.2f} | {r['idle_cores']:.2f} | {r['statuses']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="throughput,overload,sigterm,equal,ray")
    ap.add_argument("--choi", type=int, default=40)
    ap.add_argument("--lectures", type=int, default=4)
    ap.add_argument("--requests", type=int, default=0,
                    help="requests per throughput row (default: one pass over the documents)")
    ap.add_argument("--overload-requests", type=int, default=512)
    ap.add_argument("--compare", type=Path, default=None,
                    help="throughput: also serve from this source tree (e.g. an export of the commit before), "
                         "side by side")
    ap.add_argument("--ray-workers", type=int, default=None,
                    help="ray: the replicas' --doc-threads (default: the server's own default)")
    ap.add_argument("--server-flag", action="append", default=[],
                    help="an extra flag for the overload part's server (repeat), e.g. --server-flag=--doc-threads=16")
    args = ap.parse_args()
    docs = load_docs(args.choi, args.lectures)
    parts = args.parts.split(",")
    args.requests = args.requests or len(docs)
    print(f"# serve_load: {len(docs)} documents ({sum(len(t) for _, t in docs)} chars), cores {os.cpu_count()}, "
          f"load average at start {tuple(round(x, 2) for x in os.getloadavg())}")
    if "throughput" in parts:
        part_throughput(docs, args.requests, args.compare)
    if "overload" in parts:
        part_overload(docs, args.overload_requests, args.server_flag)
    if "sigterm" in parts:
        part_sigterm(docs, args.requests)
    if "equal" in parts:
        part_equal(docs)
    if "ray" in parts:
        part_ray(docs, args.requests, args.ray_workers)
    print(f"\nload average at end {tuple(round(x, 2) for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
