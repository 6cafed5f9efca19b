"""Segmentation benchmark: every method on every labelled data set, rendered to docs/results.md.

Per-document results are cached in ``benchmarks/results/<data set>.json`` (the
``headseg evaluate --out`` format, both k modes in one file), so a run can be
stopped and resumed, one method re-run alone (``--methods headseg``) and merged,
and the Markdown re-rendered without running anything (``--render-only``).

    python -m benchmarks.segmentation                      # default subset, both k modes
    python -m benchmarks.segmentation --methods headseg    # add missing headseg rows only
    python -m benchmarks.segmentation --methods headseg --redo   # recompute headseg rows (new segmenter)
    python -m benchmarks.segmentation --limit 0            # every document (slow on a CPU)
    python -m benchmarks.segmentation --render-only

Speed (documents/s) is measured inside one process per data set, all methods
side by side on the same documents; compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import shlex
import sys
import time
from pathlib import Path

from benchmarks.common import DATASETS, REPO, offline_settings, segmentation_root, select_datasets, slug
from headseg.analysis.errors import HeadsegError
from headseg.analysis.writing import atomic_write_text
from headseg.segmenter.evaluation.harness import (
    Dataset,
    ResultStore,
    evaluate,
    format_markdown,
    format_tables,
    summarise,
)
from headseg.segmenter.evaluation.loaders import iter_documents
from headseg.segmenter.evaluation.methods import METHODS, make_method, parse_methods
from headseg import evaluation as _headseg_method  # noqa: F401  # registers headseg among the methods

#: Documents per data set in the default run (first N in natural file order),
#: sized so that all methods in both k modes fit in well under an hour on two
#: shared CPU cores.  ``--limit 0`` runs everything.
DEFAULT_LIMITS = {
    "choi/1/3-5": 2, "choi/1/6-8": 2, "choi/1/9-11": 2, "choi/1/3-11": 2,
    "choi/2/3-5": 2, "choi/2/6-8": 2, "choi/2/9-11": 2, "choi/2/3-11": 2,
    "choi/3/3-11": 10,
    "lectures_ai": 2, "lectures_physics": 2,
    "dialseg711": 30,
    "clinical_dev": 5, "meetings_ami_dev": 2, "meetings_qmsum_dev": 2, "manifestos": 1,
}


def parse_limits(spec: str | None) -> dict[str, int | None]:
    """``"20"`` (every data set), ``"choi/3/3-11=50,dialseg711=100"``, or ``"0"`` (no limit)."""
    limits: dict[str, int | None] = dict(DEFAULT_LIMITS)
    if spec is None:
        return limits
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, value = part.rpartition("=")
        try:
            n = int(value)
        except ValueError:
            raise HeadsegError(f"--limit: '{part}' is not N or NAME=N") from None
        if n < 0:
            raise HeadsegError("--limit must be >= 0 (0 = every document)")
        targets = [name] if name else [d for d, _ in DATASETS]
        for t in targets:
            limits[t] = n or None
    return limits


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        import psutil

        mem = f", {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:
        pass
    import torch

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"no GPU; load average at start {load:.1f}")


def run(args) -> int:
    root = Path(args.data_root)
    results_dir = Path(args.results_dir)
    limits = parse_limits(args.limit)
    chosen = select_datasets(args.datasets)
    names = parse_methods(args.methods)
    modes = {"no": [False], "yes": [True], "both": [False, True]}[args.oracle]
    if not args.render_only:
        if not root.is_dir():
            raise HeadsegError(f"data root {root} is not a directory (pass --data-root)")
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        methods = [make_method(n) for n in names]
        command = "python -m benchmarks.segmentation " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        for name, rel in chosen:
            path = root / rel
            docs = list(iter_documents(path, limit=limits.get(name)))
            ds = Dataset(name=name, path=str(path), documents=docs)
            store = ResultStore(results_dir / f"{slug(name)}.json")
            runs = store.data.setdefault("runs", [])
            runs.append({"command": command, "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                         "machine": machine(), "methods": names, "documents": len(docs),
                         "oracle": args.oracle})
            for oracle in modes:
                t0 = time.perf_counter()
                # A method without k shares its records between the two modes: redo it once.
                redo = [m for m in methods if args.redo and (not oracle or m.takes_k or len(modes) == 1)]
                keep = [m for m in methods if m not in redo]
                summaries = evaluate([ds], redo, oracle_k=oracle, store=store, quiet=args.quiet, redo=True)
                summaries += evaluate([ds], keep, oracle_k=oracle, store=store, quiet=args.quiet)
                print(f"[{name}, k {'oracle' if oracle else 'not given'}, {time.perf_counter() - t0:.0f} s]")
                print(format_tables(summaries), flush=True)
    render(results_dir, Path(args.markdown), chosen if args.datasets else list(DATASETS))
    print(f"wrote {args.markdown}", file=sys.stderr)
    return 0


def render(results_dir: Path, out: Path, datasets: list[tuple[str, str]]) -> None:
    """docs/results.md from every cached results file (all methods, both k modes)."""
    blocks = []
    overview: dict[str, dict[str, str]] = {}
    runs_seen = []
    for name, _ in DATASETS:
        path = results_dir / f"{slug(name)}.json"
        if not path.exists():
            continue
        store = ResultStore(path)
        for r in store.data.get("runs", []):
            runs_seen.append((name, r))
        stored_methods = [m for m in METHODS if any(rec["method"] == m for rec in store.records.values())]
        rows = []
        for oracle in (False, True):
            ms = [m for m in stored_methods if not oracle or METHODS[m].takes_k]
            modes = {m: ("oracle" if oracle and METHODS[m].takes_k else "none") for m in ms}
            rows += summarise(store, None, ms, modes)
        if not rows:
            continue
        blocks.append(format_markdown(rows))
        for s in rows:
            col = "Pk (k oracle)" if s.mode == "oracle" else "Pk (no k)"
            mu, sd = s.metrics["pk"]
            cell = "-" if s.ok == 0 else f"{mu:.3f}" + ("" if s.ok == s.documents else f" ({s.ok}/{s.documents})")
            overview.setdefault(f"{s.method}|{col}", {})[name] = cell
    names = [n for n, _ in DATASETS if any(n in v for v in overview.values())]
    lines = [
        "# Segmentation results",
        "",
        "Generated by `python -m benchmarks.segmentation` from the cached per-document results in",
        "`benchmarks/results/*.json`; see docs/evaluation.md for the metrics, the k convention,",
        "the data formats and how each baseline is called.",
        "",
        f"Rendered {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.",
        "",
        "## Runs",
        "",
        "Each command as it was run (before the benchmarks became a package, `python benchmarks/NAME.py`;",
        "today `python -m benchmarks.NAME` from the repository root, with the same arguments).",
        "",
    ]
    by_cmd: dict[str, list] = {}
    machines: dict[str, list[str]] = {}
    for name, r in runs_seen:
        by_cmd.setdefault(r["command"], []).append((r["started"], name))
        m = re.match(r"(.*); load average at start ([\d.]+)$", r.get("machine", ""))
        desc, load = (m.group(1), m.group(2)) if m else (r.get("machine", "?"), "?")
        machines.setdefault(desc, []).append(load)
    for cmd, items in sorted(by_cmd.items(), key=lambda kv: min(kv[1])):
        sets = ", ".join(dict.fromkeys(n for _, n in sorted(items)))
        # the same command may have run again (a new segmenter): its latest results are the cached ones
        first, last = min(items)[0], max(items)[0]
        when = f"started {first}" if first[:13] == last[:13] else f"first started {first}, last data set started {last}"
        lines.append(f"- `{cmd}` ({when}; data sets: {sets})")
    for desc, loads in machines.items():
        nums = sorted(float(x) for x in loads if x != "?")
        lo, hi = (f"{nums[0]:.1f}", f"{nums[-1]:.1f}") if nums else ("?", "?")
        lines += ["", f"Machine: {desc}.  Load average when each data set started: {lo}–{hi} "
                      "(other jobs shared the two cores, so absolute speeds are low; compare methods "
                      "within one table, where they ran side by side on the same documents)."]
    lines += [
        "",
        "Data: the first N documents (natural file order) of each set, N in the table headings.",
        "All methods see the same units (the reference sentences/utterances); `k oracle` rows are",
        "told the reference number of segments; texttiling and chonkie cannot take it.",
        "",
        "## Pk overview (lower is better)",
        "",
        "| method | k | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for key in sorted(overview, key=lambda k: (list(METHODS).index(k.split("|")[0]), "oracle" in k)):
        m, col = key.split("|")
        lines.append(f"| {m} | {'oracle' if 'oracle' in col else '-'} | "
                     + " | ".join(overview[key].get(n, "") for n in names) + " |")
    lines += [
        "",
        "A cell `x (a/b)` averages over the a of b documents that method finished.",
        "",
        "## Per data set",
        "",
        "Mean ± population std over documents (macro average); P/R/F1 exact and within one unit (±1);",
        "`segs hyp/ref` mean predicted / reference segments; docs/s excludes model loading;",
        "`-` for docs/s in a k-oracle row: embeddings were reused from the run without k (no separate timing).",
        "",
    ]
    lines.append("\n\n".join(blocks))
    notes = results_dir / "NOTES.md"
    if notes.exists():
        # Hand-written observations about the cached numbers, kept across re-renders.
        lines += ["", notes.read_text(encoding="utf-8").rstrip()]
    atomic_write_text(out, "\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = segmentation_root()
    p.add_argument("--data-root", default=str(root), help=f"default {root} ($HEADSEG_DATA/segmentation)")
    p.add_argument("--datasets", help="comma-separated names or prefixes (e.g. choi/3,dialseg711); default all")
    p.add_argument("--methods", default="all", help=f"comma-separated, from {', '.join(METHODS)} (default all)")
    p.add_argument("--limit", help="documents per data set: N, NAME=N,... or 0 for all (default: a documented subset)")
    p.add_argument("--oracle", choices=("both", "no", "yes"), default="both", help="k modes to run (default both)")
    p.add_argument("--results-dir", default=str(REPO / "benchmarks/results"))
    p.add_argument("--markdown", default=str(REPO / "docs/results.md"))
    p.add_argument("--render-only", action="store_true", help="only re-render the Markdown from cached results")
    p.add_argument("--redo", action="store_true",
                   help="run the chosen methods again even where results are cached (e.g. --methods headseg --redo)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    offline_settings()
    try:
        return run(args)
    except HeadsegError as exc:
        print(f"segmentation benchmark: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
