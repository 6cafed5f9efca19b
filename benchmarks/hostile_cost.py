"""Time and peak memory per MB on hostile texts, at 16 KB, 100 KB and 1 MB (issue 35, item 7).

Kinds: ``prose`` (``benchmarks/long_document.py``'s text: manifestos and Choi texts), ``terminal
punctuation`` (``"." * N`` and ``"?!" * N``), ``tiny units`` (``"a.\\n" * N``: one unit per three
bytes) and ``random words`` (words of the model's vocabulary drawn at random, seeded, spaces between,
no punctuation); and hostile Markdown (issue 49, items 7-9): ``headings`` (one-line ATX headings, ``# H1``
...), ``linkrefs`` (link-reference definitions), ``stars`` (``"*" * N``), ``*a_`` (``"*a_" * N``),
``brackets`` (``"[" * N + "x" + "]" * N``) and ``backticks`` (a run of backticks, then ``"`a" * N``),
``mdx`` (a Docusaurus page: tabs wrapping fences, repeated), and ``markdown`` (this repository's
``README.md`` and ``docs/*.md``, one after the other, repeated: ordinary Markdown).  Each case runs in a child process of its own (``Segmenter().segment(text)``, the
default engine, warm cache), so its peak resident memory (``ru_maxrss``) is its own; the model's
load is timed apart and left out of the seconds.  A case whose projected peak or time (from the
smaller sizes of its kind, linearly) is over ``--max-gb`` or ``--max-seconds`` is not run and says so.

    python -m benchmarks.hostile_cost                      # the table of docs/performance.md
    python -m benchmarks.hostile_cost --sizes 16000,100000 --kinds prose,tiny
    python -m benchmarks.hostile_cost --sizes 1000000 --kinds prose --level tree     # issue 49, item 6
    python -m benchmarks.hostile_cost --sizes 100000 --kinds markdown --level tree --max-tokens 128
    python -m benchmarks.hostile_cost --sizes 16000 --before /tmp/old   # /tmp/old/headseg: older code, side by side

Prints a Markdown table: the model's tokens, seconds, seconds per MB, × prose per MB at that size,
milliseconds per thousand tokens, peak MB, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import time

from benchmarks.common import REPO, child_env, default_tokenizer, make_text, module_command, peak_rss_mb, timed_segment

KINDS = ("prose", "dots", "?!", "tiny", "words", "lines", "headings", "linkrefs", "stars", "*a_", "brackets", "backticks", "mdx", "markdown")
NAMES = {"prose": "prose", "dots": "'.' * N", "?!": "'?!' * N", "tiny": "'a.\\n' * N", "words": "random words",
         "lines": "lines of 4-9 random words",
         "headings": "'# H{i}\\n' headings", "linkrefs": "'[r{i}]: url' definitions", "stars": "'*' * N",
         "*a_": "'*a_' * N", "brackets": "'[' * N + 'x' + ']' * N", "backticks": "'`' * 3N/7 + '`a' * 2N/7",
         "mdx": "MDX tabs page", "markdown": "README + docs/*.md"}
#: one Docusaurus-style section (``mdx``): imports at the top, then tabs wrapping fences, repeated
MDX_SECTION = ("## Step {i}\n\nInstall the tool for step {i}. Then run it once.\n\n<Tabs>\n<TabItem value=\"py\">\n"
               "```py\n# set up step {i}\nimport tool\n\n# run it\ntool.run({i})\n```\n</TabItem>\n"
               "<TabItem value=\"sh\">\n```sh\n# the shell way\ntool run {i}\n```\n</TabItem>\n</Tabs>\n\n"
               ":::note\nStep {i} needs no network.\n:::\n\n")


def _repeat(line, n: int) -> str:
    """Lines ``line(i)`` for i = 0, 1, ... until about ``n`` bytes."""
    out, size, i = [], 0, 0
    while size < n:
        out.append(line(i))
        size += len(out[-1])
        i += 1
    return "".join(out)


#: the hostile Markdown kinds, each ``n -> text of about n bytes`` (issue 49's shapes, at any size)
MARKDOWN_KINDS = {
    "headings": lambda n: _repeat(lambda i: f"# H{i}\n", n),
    "linkrefs": lambda n: _repeat(lambda i: f"[ref{i}]: http://example.com/{i}\n", n),
    "stars": lambda n: "*" * n,
    "*a_": lambda n: "*a_" * (n // 3),
    "brackets": lambda n: "[" * (n // 2) + "x" + "]" * (n // 2),
    "backticks": lambda n: "`" * (3 * n // 7) + "`a" * (2 * n // 7),
    "mdx": lambda n: "import Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n\n"
                     + _repeat(lambda i: MDX_SECTION.format(i=i), n),
    "markdown": lambda n: _markdown(n),
}


def _markdown(n: int) -> str:
    """About ``n`` bytes of this repository's Markdown (README.md, then docs/*.md), repeated, cut at a line end."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    texts = [f.read_text(encoding="utf-8") for f in files]
    text = _repeat(lambda i: texts[i % len(texts)].rstrip("\n") + "\n\n", n)
    cut = text.encode("utf-8")[:n].decode("utf-8", errors="ignore")
    return cut[: cut.rfind("\n") + 1] or cut


def make(kind: str, n: int) -> str:
    """``n`` bytes (about) of text of ``kind``."""
    if kind == "prose":
        return make_text(n)
    if kind == "dots":
        return "." * n
    if kind == "?!":
        return "?!" * (n // 2)
    if kind == "tiny":
        return "a.\n" * (n // 3)
    if kind in MARKDOWN_KINDS:
        return MARKDOWN_KINDS[kind](n)
    vocab = sorted(default_tokenizer().backend.get_vocab())
    words = [w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2]
    if kind == "lines":  # plain text of short lines: each line a unit (a transcript's turns are too)
        rng = random.Random(49)
        return _repeat(lambda i: " ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) + "\n", n)
    rng = random.Random(35)
    out, size = [], 0
    while size < n:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def child(kind: str, n: int, options: dict | None = None) -> None:
    from headseg.api import Segmenter

    text = make(kind, n)
    t0 = time.perf_counter()
    seg = Segmenter(quiet=True)
    seg.segment("A warm-up sentence. And another one.")
    load = time.perf_counter() - t0
    result, secs = timed_segment(seg, text, **(options or {}))
    peak = peak_rss_mb()
    tokens = len(seg.loaded.tokenizer.encode(text)[0])
    print(json.dumps({"bytes": len(text.encode()), "seconds": secs, "load_s": load, "peak_mb": peak,
                      "segments": len(result), "tokens": tokens}))


def run_case(kind: str, n: int, extra: list[str], before: str | None = None, repeat: int = 1) -> dict | str:
    """One case in a child process: its JSON row, or why it failed; with ``repeat`` > 1, the fastest of that
    many children (a shared machine's load only ever adds time).  ``before``: the folder of an importable
    ``headseg`` package (older code) that the child imports instead of this checkout's (it runs there, so
    that the folder comes first on its path; ``benchmarks`` still comes from here)."""
    if repeat > 1:
        runs = [run_case(kind, n, extra, before) for _ in range(repeat)]
        done = [r for r in runs if isinstance(r, dict)]
        return min(done, key=lambda r: r["seconds"]) if done else runs[0]
    env = child_env()
    if before:
        env["PYTHONPATH"] = os.pathsep.join((os.path.abspath(before), env["PYTHONPATH"]))
    r = subprocess.run(module_command(__spec__.name, "--child", kind, str(n), *extra), capture_output=True,
                       text=True, env=env, cwd=os.path.abspath(before) if before else None)
    if r.returncode:
        return f"failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _ratio(rows: dict, kind: str, n: int) -> str:
    """``kind``'s seconds per byte over prose's at ``n`` bytes, in the same run."""
    r, prose = rows.get((kind, n)), rows.get(("prose", n))
    if not isinstance(r, dict) or not isinstance(prose, dict):
        return "–"
    return f"{(r['seconds'] / r['bytes']) / (prose['seconds'] / prose['bytes']):.1f}"


def side_by_side(kinds: list[str], sizes: list[int], extra: list[str], before: str, repeat: int = 1) -> None:
    """Each case run on the code in ``before`` and then on this checkout, one after the other, and one
    table of both (the load on a shared machine moves both alike)."""
    load0 = os.getloadavg()[0]
    old: dict = {}
    new: dict = {}
    for kind in kinds:
        for n in sizes:
            old[(kind, n)] = run_case(kind, n, extra, before, repeat)
            new[(kind, n)] = run_case(kind, n, extra, repeat=repeat)
            print(f"<!-- {kind} {n}: before {old[(kind, n)]} after {new[(kind, n)]} -->", flush=True)
    print(f"\nSegmenter() default engine, {' '.join(extra) or 'flat topics, no size limit'}, before = {before}, "
          f"each case before then after, fastest of {repeat}, {os.cpu_count()} CPUs; load average {load0:.1f} → "
          f"{os.getloadavg()[0]:.1f} (1 min)\n")
    print("| text | bytes | model tokens | s before | s after | × prose before | × prose after | peak MB before | "
          "peak MB after | segments before | segments after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    def cell(r, key: str, fmt: str = "") -> str:
        return format(r[key], fmt) if isinstance(r, dict) else str(r)

    for kind in kinds:
        for n in sizes:
            a, b = old[(kind, n)], new[(kind, n)]
            ref = b if isinstance(b, dict) else a
            size, tokens = (f"{ref['bytes']:,}", f"{ref['tokens']:,}") if isinstance(ref, dict) else (f"{n:,}", "–")
            print(f"| {NAMES[kind]} | {size} | {tokens} | {cell(a, 'seconds', '.1f')} | {cell(b, 'seconds', '.1f')} | "
                  f"{_ratio(old, kind, n)} | {_ratio(new, kind, n)} | {cell(a, 'peak_mb', '.0f')} | "
                  f"{cell(b, 'peak_mb', '.0f')} | {cell(a, 'segments')} | {cell(b, 'segments')} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16000,100000,1000000", help="bytes, comma-separated")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--max-gb", type=float, default=8.0, help="skip a case projected to peak above this")
    ap.add_argument("--max-seconds", type=float, default=400.0, help="skip a case projected to run longer")
    ap.add_argument("--level", default=None, help="segment at this level (tree, ...; default: the flat topics)")
    ap.add_argument("--max-tokens", type=int, default=None, help="a size limit in tokens (default: none)")
    ap.add_argument("--before", metavar="DIR", help="also run each case on the older code in DIR (an importable "
                    "headseg package: DIR/headseg), just before this checkout's, and print both side by side")
    ap.add_argument("--repeat", type=int, default=1, help="run each case this many times, keep the fastest")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "BYTES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    options = {k: v for k, v in (("level", args.level), ("max_tokens", args.max_tokens)) if v is not None}
    if args.child:
        return child(args.child[0], int(args.child[1]), options)
    extra = [a for k, v in options.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    sizes = [int(x) for x in args.sizes.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    if args.before:
        return side_by_side(kinds, sizes, extra, args.before, args.repeat)
    load0 = os.getloadavg()[0]
    rows: dict[tuple[str, int], dict | str] = {}
    for kind in kinds:
        for n in sizes:
            done = [(m, rows[(kind, m)]) for m in sizes if m < n and isinstance(rows.get((kind, m)), dict)]
            if len(done) >= 2:  # peak = a + b·bytes through the two largest smaller sizes
                (m1, r1), (m2, r2) = done[-2:]
                slope = (r2["peak_mb"] - r1["peak_mb"]) / (m2 - m1)
                projected = r2["peak_mb"] + slope * (n - m2)
                seconds = r2["seconds"] * n / m2  # time per byte of the largest smaller size
                if projected > args.max_gb * 1024 or seconds > args.max_seconds:
                    rows[(kind, n)] = (f"not run: projected {seconds:.0f} s, peak {projected / 1024:.1f} GB "
                                       "(linear from the smaller sizes)")
                    print(f"<!-- {kind} {n}: {rows[(kind, n)]} -->", flush=True)
                    continue
            rows[(kind, n)] = run_case(kind, n, extra, repeat=args.repeat)
            print(f"<!-- {kind} {n}: {rows[(kind, n)]} -->", flush=True)
    setting = ", ".join(f"{k}={v}" for k, v in options.items()) or "flat topics, no size limit"
    print(f"\nSegmenter() default engine, {setting}, one child process per case (fastest of {args.repeat}), "
          f"{os.cpu_count()} CPUs; load average "
          f"{load0:.1f} → {os.getloadavg()[0]:.1f} (1 min)\n")
    print("| text | bytes | model tokens | seconds | s per MB | × prose per MB | ms per 1k tokens | peak MB | segments |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        for n in sizes:
            r = rows[(kind, n)]
            if isinstance(r, str):
                print(f"| {NAMES[kind]} | {n:,} | {r} | | | | | | |")
                continue
            rate = r["seconds"] / r["bytes"] * 1e6
            prose = rows.get(("prose", n))
            ratio = f"{rate / (prose['seconds'] / prose['bytes'] * 1e6):.1f}" if isinstance(prose, dict) else "–"
            per_k = 1e6 * r["seconds"] / max(r["tokens"], 1)
            print(f"| {NAMES[kind]} | {r['bytes']:,} | {r['tokens']:,} | {r['seconds']:.1f} | {rate:.1f} | {ratio} | "
                  f"{per_k:.0f} | {r['peak_mb']:.0f} | {r['segments']} |")


if __name__ == "__main__":
    main()
