"""An ordinary request behind hostile ones on ``headseg serve`` (issue 49, item 10).

    python -m benchmarks.serve_fairness [--hostile 6] [--hostile-bytes 16384] [--rounds 3] [--compare TREE]

The ordinary request is ``examples/sample.txt`` (1,280 bytes: three short topics); a hostile one is ``'.' * 16384`` (one
unit-detector window per ~510 dots, and many model calls).  Each round: the ordinary request alone,
then ``--hostile`` concurrent hostile requests, and, once they are under way (``--delay`` seconds), the
ordinary request again.  Printed: the ordinary request's latency alone and behind the hostile ones
(median over the rounds), the hostile requests' own latency, and the load average.  ``--compare TREE``
also serves from another source tree (a checkout of an older commit), one server after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import httpx

from benchmarks.serve_load import Server


async def _post(client: httpx.AsyncClient, url: str, text: str) -> float:
    t0 = time.perf_counter()
    r = await client.post(url + "/v1/segment", json={"text": text})
    if r.status_code != 200:
        raise SystemExit(f"HTTP {r.status_code}: {r.text[:200]}")
    return time.perf_counter() - t0


async def _round(url: str, ordinary: str, hostile: str, n: int, delay: float) -> tuple[float, float, float]:
    """(ordinary alone, ordinary behind ``n`` hostile, slowest hostile) seconds."""
    limits = httpx.Limits(max_connections=n + 2, max_keepalive_connections=n + 2)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        alone = await _post(client, url, ordinary)
        crowd = [asyncio.ensure_future(_post(client, url, hostile)) for _ in range(n)]
        await asyncio.sleep(delay)
        behind = await _post(client, url, ordinary)
        slowest = max(await asyncio.gather(*crowd))
    return alone, behind, slowest


def measure(ordinary: str, hostile: str, n: int, rounds: int, delay: float, tree: Path | None = None) -> dict:
    server = Server(tree=tree)
    try:
        asyncio.run(_round(server.url, ordinary, ordinary, 1, 0.0))  # warm-up
        runs = [asyncio.run(_round(server.url, ordinary, hostile, n, delay)) for _ in range(rounds)]
    finally:
        server.stop()
    alone, behind, slowest = (statistics.median(col) for col in zip(*runs))
    return {"alone": alone, "behind": behind, "hostile": slowest, "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hostile", type=int, default=6, help="concurrent hostile requests")
    ap.add_argument("--hostile-bytes", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0.5, help="seconds between the hostile requests and the ordinary one")
    ap.add_argument("--compare", type=Path, default=None, help="also serve from this source tree (before)")
    args = ap.parse_args()
    ordinary = (Path(__file__).resolve().parents[1] / "examples" / "sample.txt").read_text(encoding="utf-8")
    hostile = "." * args.hostile_bytes
    print(f"# serve_fairness: ordinary {len(ordinary)} chars, {args.hostile} × {args.hostile_bytes} dots, "
          f"{args.rounds} rounds, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    trees = [("before", args.compare)] if args.compare else []
    trees.append(("this tree", None))
    print("\n| server | ordinary alone s | ordinary behind hostile s | slowest hostile s | rounds (alone, behind, hostile) |")
    print("|---|---:|---:|---:|---|")
    for name, tree in trees:
        r = measure(ordinary, hostile, args.hostile, args.rounds, args.delay, tree)
        runs = "; ".join(", ".join(f"{x:.2f}" for x in run) for run in r["runs"])
        print(f"| {name} | {r['alone']:.2f} | {r['behind']:.2f} | {r['hostile']:.1f} | {runs} |", flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
