"""What each install of headseg weighs: site-packages size and package count, in fresh venvs.

    python3 -m benchmarks.install_size [--only core,torch,...] [--keep DIR] [--torch-spec torch==2.13.0]
    python3 -m benchmarks.install_size --calls LIGHT_PYTHON FULL_PYTHON [--runs 7] [--doc FILE]

Builds headseg's wheel from this checkout once, then for every variant makes a
fresh venv (``python -m venv``, pip included) in a temporary folder outside the
checkout and installs ``WHEEL[extras]`` into it with pip, the way a user installs
from a checkout (``pip install "/path/to/headseg[extras]"``).  Prints one row per
variant: site-packages size (MB = 10^6 bytes, apparent file sizes), the number of
installed distributions (pip included), whether torch / transformers /
matplotlib are there, and the install's wall time (pip's cache warm or cold:
the first run downloads).

Variants that need torch install ``--torch-spec`` first, as the Makefile does
(the CPU build here; a plain ``torch`` requirement pulls the multi-GB CUDA
build on Linux).  ``gpu-swap`` is the core with onnxruntime swapped for
onnxruntime-gpu (README, "GPU").  It takes minutes: every variant is a full
install.  Sizes depend on the platform and on the latest releases pip picks.

``--calls``: whole ``python -I -m headseg segment DOC`` processes of two
installs (e.g. a core venv and the Makefile's ``.venv``) taking turns, the
model and the serving artifact already cached (``HEADSEG_CACHE``; the light
one's model in ``HF_HUB_CACHE``); medians of wall time, CPU time and peak RSS
(``os.wait4``), and whether torch was imported.
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

from benchmarks.common import REPO as ROOT

#: name -> (extras, needs the CPU torch first, what it is for)
VARIANTS = {
    "core": ("", False, "serving: `headseg segment`, the Python API (default model fetched from the Hub)"),
    "gpu-swap": ("", False, "the core with onnxruntime-gpu instead of onnxruntime"),
    "langchain": ("langchain", False, "core + the LangChain adapter"),
    "llamaindex": ("llamaindex", False, "core + the LlamaIndex adapter"),
    "haystack": ("haystack", False, "core + the Haystack adapter"),
    "plots": ("plots", False, "core + matplotlib"),
    "torch": ("torch", True, "per-head hooks: study, inspect, --backend torch"),
    "tui": ("tui", True, "the terminal inspector (torch + plots + textual)"),
    "embedded": ("embedded", True, "the default model as a package (pulls sentence-transformers, torch)"),
    "ray": ("ray", False, "core + Ray Data"),
    "serve": ("serve", False, "core + the HTTP service (FastAPI, uvicorn, Prometheus client)"),
    "make": ("test,torch,plots,embedded,tui,export-reference,ray,serve,langchain,llamaindex,haystack", True,
             "the Makefile's .venv (everything)"),
}
HEAVY = ("torch", "transformers", "matplotlib")


def pip(py: Path, *args: str) -> None:
    subprocess.run([str(py), "-m", "pip", "install", "-q", *args], check=True, timeout=3600)


def measure(venv: Path) -> dict:
    """site-packages bytes, distributions, and which heavy modules are importable."""
    py = venv / "bin" / "python"
    site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    size = sum(p.lstat().st_size for p in site.rglob("*") if p.is_file() or p.is_symlink())
    dists = json.loads(subprocess.check_output([str(py), "-m", "pip", "list", "--format", "json"], text=True))
    heavy = subprocess.check_output(
        [str(py), "-I", "-c", "import importlib.util as u; print(','.join(m for m in "
         f"{HEAVY!r} if u.find_spec(m)))"], text=True).strip()
    return {"mb": size / 1e6, "packages": len(dists), "heavy": heavy or "-",
            "onnxruntime": ",".join(sorted(d["name"] for d in dists if d["name"].startswith("onnxruntime")))}


def build_wheel(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                   check=True, timeout=600)
    (whl,) = out.glob("headseg-*.whl")
    return whl


def install(name: str, venv: Path, whl: Path, torch_spec: str) -> float:
    extras, needs_torch, _ = VARIANTS[name]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    t0 = time.perf_counter()
    if needs_torch:
        pip(py, torch_spec)
    pip(py, f"{whl}[{extras}]" if extras else str(whl))
    if name == "gpu-swap":
        subprocess.run([str(py), "-m", "pip", "uninstall", "-y", "-q", "onnxruntime"], check=True, timeout=600)
        pip(py, "--force-reinstall", "--no-deps", "onnxruntime-gpu>=1.18")
    return time.perf_counter() - t0


SERVE = """
import runpy, sys, json, os
sys.argv = ["headseg", "segment", DOC, "--quiet"]
try:
    runpy.run_module("headseg", run_name="__main__")
finally:
    print(json.dumps({"torch": "torch" in sys.modules}), file=sys.stderr)
"""


def one_call(python: str, doc: str) -> dict:
    """One ``headseg segment DOC`` process: wall s, CPU s, peak RSS MiB, torch imported."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-I", "-c", SERVE.replace("DOC", repr(doc))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"{python}: headseg segment failed: {err.strip()[-500:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "torch": json.loads(err.strip().splitlines()[-1])["torch"], "out": out}


def calls(light: str, full: str, runs: int, doc: str) -> None:
    import statistics

    rows = {"light": [], "full": []}
    print(f"`headseg segment {doc}`, {runs} runs each, taking turns; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for _ in range(runs):
        for name, py in (("light", light), ("full", full)):
            rows[name].append(one_call(py, doc))
    print("| install | wall s (median) | CPU s | peak RSS MiB | torch imported |")
    print("|---|---|---|---|---|")
    for name, py in (("light", light), ("full", full)):
        r = rows[name]
        print(f"| {name} ({py}) | {statistics.median(x['wall'] for x in r):.2f} | "
              f"{statistics.median(x['cpu'] for x in r):.2f} | {statistics.median(x['rss'] for x in r):.0f} | "
              f"{any(x['torch'] for x in r)} |")
    same = all(a["out"] == b["out"] for a, b in zip(rows["light"], rows["full"]))
    ratio = statistics.median(x["wall"] for x in rows["full"]) / statistics.median(x["wall"] for x in rows["light"])
    print(f"full / light wall: {ratio:.2f}x; same output: {same}; load average at the end "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variants (default: all)")
    ap.add_argument("--torch-spec", default="torch==2.13.0", help="torch installed first where a variant needs it")
    ap.add_argument("--keep", metavar="DIR", help="build the venvs in DIR and keep them (default: a temporary folder)")
    ap.add_argument("--calls", nargs=2, metavar=("LIGHT_PYTHON", "FULL_PYTHON"),
                    help="time headseg segment processes of two installs instead of installing")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--doc", default=str(ROOT / "examples" / "sample.txt"))
    args = ap.parse_args()
    if args.calls:
        calls(*args.calls, runs=args.runs, doc=args.doc)
        return 0
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)} (use {', '.join(VARIANTS)})")
    with tempfile.TemporaryDirectory(prefix="headseg-install-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        whl = build_wheel(base / "wheel")
        print(f"python {sys.version.split()[0]}, {whl.name}, load average {os.getloadavg()[0]:.2f} at start")
        print("| install | site-packages MB | packages | heavy modules | onnxruntime | install s | for |")
        print("|---|---|---|---|---|---|---|")
        for name in names:
            venv = base / f"venv-{name}"
            seconds = install(name, venv, whl, args.torch_spec)
            m = measure(venv)
            extras = VARIANTS[name][0]
            label = "`pip install CHECKOUT`" if not extras else f"`[{extras}]`"
            if name == "gpu-swap":
                label = "core, onnxruntime → onnxruntime-gpu"
            print(f"| {label} | {m['mb']:.0f} | {m['packages']} | {m['heavy']} | {m['onnxruntime']} | "
                  f"{seconds:.0f} | {VARIANTS[name][2]} |", flush=True)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
