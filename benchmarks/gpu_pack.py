"""The GPU pack: one folder under 64 MiB, made on a CPU machine, that measures headseg's CUDA path on a bare host.

A GPU host lent for a few minutes has no package index and no Hugging Face
Hub, a Python with torch (CUDA), transformers and onnxruntime (CPU build), and
takes one folder of at most 64 MiB.  This script makes that folder and, on the
host, installs and restores what is in it:

    python benchmarks/gpu_pack.py make [gpu-pack]      # here: wheels, squeezed model, re-keyed profile, dev docs
    bash gpu-pack/gpu.sh [--dry-run] [OUTDIR]           # there (or here, on CPU, with --dry-run)

What the folder holds (``manifest.json`` lists it, with sizes):

* ``wheels/``: the headseg wheel, and the pure-Python wheels of the core
  dependencies that torch, transformers and onnxruntime do not bring
  (platformdirs, markdown-it-py, mdurl: computed, not listed by hand), made from
  the copies installed here; ``--with-onnx`` adds cp312 wheels of the compiled
  ``onnx`` (and ``ml_dtypes``) from the index, for a host without it (the lent
  H200 image has onnx: the ONNX rows need it, the torch path does not);
* ``model/``: the default model's config and tokenizer files and
  ``packed.safetensors``: the word embeddings as int8 with one fp32 scale per
  row, the other matrices as fp16, vectors as they are; ``restore`` writes the
  fp32 ``model.safetensors`` of a normal model folder from it (deterministic:
  the same fingerprint wherever it runs, checked against the manifest);
* ``profile.json``: the shipped head profile, re-keyed to the restored
  weights' fingerprint (a profile is keyed by the parameters' hash,
  :func:`headseg.analysis.weights.tensor_fingerprint`), so the shipped heads are used;
* ``data/dev.jsonl.gz``: dev documents of every family (a few per family
  marked ``parity``; the rest for throughput);
* ``gpu.sh``, ``gpu_pack.py``, ``gpu_measure.py``: the run itself.

Host-side subcommands (called by gpu.sh, with only the standard library and
the host's packages): ``install PACK TARGET`` (the wheels the host lacks, into
a ``--target`` folder: the lent host's python3 is itself a venv, so a
``--system-site-packages`` venv made from it would not see its torch) and
``restore PACK MODEL_DIR``.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

#: what may travel to the host
LIMIT_BYTES = 64 * 1024 * 1024
#: the tensor stored as int8 with a per-row scale (the largest: 30522 × 384)
INT8_TENSOR = "embeddings.word_embeddings.weight"
SCALE_SUFFIX = ".row_scale"
PACK_FORMAT = "headseg-gpu-pack/1"
#: what the host brings: its torch, transformers and onnxruntime, and all they require
HOST_PROVIDES = ("torch", "transformers", "onnxruntime")
#: the model folder's small files (the weights are packed separately)
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
#: the source folders and files a wheel of headseg is built from
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "headseg", "analysis", "segmenter", "export", "tui")
#: what the pack's scripts are, copied beside the data
SCRIPTS = ("gpu.sh", "gpu_pack.py", "gpu_measure.py")
#: dev sets (folders of ../shared/data/segmentation) and how each is read
FAMILIES = ("choi/3/3-11", "choi/1", "clinical_dev", "dialseg711", "lectures_ai", "lectures_physics",
            "meetings_ami_dev", "meetings_qmsum_dev", "wiki50_dev")


# ---------------------------------------------------------------- weights: pack here, restore there

def pack_tensors(tensors: dict) -> dict:
    """The packed form of a model's tensors: :data:`INT8_TENSOR` as int8 plus a per-row scale, other
    float matrices fp16, everything else (vectors, integer tensors) unchanged."""
    import numpy as np

    out = {}
    for name, t in tensors.items():
        if name.endswith(INT8_TENSOR) and t.ndim == 2:
            # symmetric per row: |q| <= 127, so each element is off by at most half a step (scale / 2)
            scale = np.abs(t).max(axis=1).astype(np.float32) / np.float32(127.0)
            scale[scale == 0] = 1.0
            out[name] = np.clip(np.rint(t / scale[:, None]), -127, 127).astype(np.int8)
            out[name + SCALE_SUFFIX] = scale
        elif t.dtype == np.float32 and t.ndim >= 2:
            out[name] = t.astype(np.float16)
        else:
            out[name] = t
    return out


def restore_tensors(packed: dict) -> dict:
    """The fp32 tensors of :func:`pack_tensors`' output (the same bits wherever it runs)."""
    import numpy as np

    out = {}
    for name, t in packed.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        if t.dtype == np.int8 and name + SCALE_SUFFIX in packed:
            out[name] = t.astype(np.float32) * packed[name + SCALE_SUFFIX][:, None]
        elif t.dtype == np.float16:
            out[name] = t.astype(np.float32)
        else:
            out[name] = t
    return out


def restore(pack: Path, model_dir: Path, check: bool = True) -> str:
    """Write the restored fp32 model folder ``model_dir`` from ``pack``; returns its fingerprint.

    ``check``: the fingerprint must be the manifest's (the profile is keyed to it).
    """
    from safetensors.numpy import load_file, save_file

    model_dir.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        if (pack / "model" / name).is_file():
            shutil.copyfile(pack / "model" / name, model_dir / name)
    save_file(restore_tensors(load_file(str(pack / "model" / "packed.safetensors"))),
              str(model_dir / "model.safetensors"), metadata={"format": "pt"})
    fp = _fingerprint(model_dir)
    if check:
        want = json.loads((pack / "manifest.json").read_text(encoding="utf-8"))["restored_fingerprint"]
        if fp != want:
            raise SystemExit(f"gpu_pack: the restored model's fingerprint {fp} is not the manifest's {want}")
    return fp


def _fingerprint(model_dir: Path) -> str:
    """The model fingerprint headseg computes for a folder (parameters' hash, without torch)."""
    from headseg.analysis.weights import dir_fingerprint

    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    return dir_fingerprint(model_dir, cfg)


# ---------------------------------------------------------------- wheels

def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: md.Distribution) -> list[str]:
    """The names ``dist`` requires here (no extras; markers evaluated for this interpreter)."""
    from packaging.requirements import Requirement

    names = []
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            names.append(_norm(req.name))
    return names


def closure(names) -> set[str]:
    """``names`` and everything they require, transitively, among the distributions installed here."""
    seen: set[str] = set()
    todo = [_norm(n) for n in names]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        try:
            todo.extend(_requirements(md.distribution(n)))
        except md.PackageNotFoundError:
            pass
    return seen


def core_requirements(wheel: Path) -> list[str]:
    """The names of the core (no-extra) requirements in a wheel's METADATA."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8")
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                out.append(_norm(req.name))
    return out


def is_pure(dist: md.Distribution) -> bool:
    """Whether an installed distribution came from a pure-Python wheel (``py3-none-any``)."""
    wheel = dist.read_text("WHEEL") or ""
    return "Root-Is-Purelib: true" in wheel and all(
        line.split(":", 1)[1].strip().endswith("-none-any") for line in wheel.splitlines() if line.startswith("Tag:"))


def wheel_from_installed(dist: md.Distribution, out: Path) -> Path:
    """A wheel of a pure-Python distribution rebuilt from its installed files (those its RECORD lists).

    Offline and exactly the version tested here; scripts (``../bin``), byte code and
    what the installer added are left out, and RECORD is written again.
    """
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    version = dist.version
    path = out / f"{name}-{version}-py3-none-any.whl"
    skip = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}
    rows = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        info_dir = None
        for f in dist.files or []:
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc"):
                continue
            if ".dist-info/" in rel:
                info_dir = rel.split("/", 1)[0]
                if rel.split("/", 1)[1] in skip:
                    continue
            data = Path(f.locate()).read_bytes()
            z.writestr(rel, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{rel},sha256={digest},{len(data)}")
        if info_dir is None:
            raise SystemExit(f"gpu_pack: {dist.metadata['Name']} has no dist-info in its RECORD")
        rows.append(f"{info_dir}/RECORD,,")
        z.writestr(f"{info_dir}/RECORD", "\n".join(rows) + "\n")
    return path


def build_headseg_wheel(repo: Path, out: Path) -> Path:
    """The headseg wheel, built from a copy of the sources (nothing is written into the checkout)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in SOURCES:
            p = repo / name
            if p.is_dir():
                shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(p, src / name)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "-w", str(out), str(src)], check=True)
    return next(out.glob("headseg-*.whl"))


def download_onnx(out: Path, python_version: str) -> list[Path]:
    """cp wheels of ``onnx`` and ``ml_dtypes`` for the host's Python, from the index (pip's own client)."""
    before = set(out.iterdir())
    plat = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                        "manylinux2014_x86_64") for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", python_version, "--implementation", "cp", *plat, "-d", str(out),
                    "onnx", "ml_dtypes"], check=True)
    return sorted(set(out.iterdir()) - before)


# ---------------------------------------------------------------- data

def dev_documents(data: Path, per_family: int, chars: int, names=FAMILIES) -> list[dict]:
    """Dev documents: the ``per_family`` shortest of each family marked ``parity`` (every family compared,
    at a CPU torch cost the host can afford), then more, round-robin over the families, up to ``chars`` in all."""
    from headseg.segmenter.evaluation.loaders import iter_documents

    families = {}
    for fam in names:
        if (data / fam).is_dir():
            docs = sorted(iter_documents(str(data / fam)), key=lambda d: d.id)
            families[fam] = [{"family": fam, "id": d.id, "text": d.text} for d in docs if d.text.strip()]
    if not families:
        raise SystemExit(f"gpu_pack: no dev documents under {data} (folders {', '.join(names)}; "
                         "--data DIR, or HEADSEG_DATA)")
    out, total = [], 0
    for fam, docs in families.items():
        for d in sorted(docs, key=lambda d: len(d["text"]))[:per_family]:
            out.append({**d, "parity": True})
            total += len(d["text"])
    taken = {(d["family"], d["id"]) for d in out}
    rest = [[d for d in docs if (d["family"], d["id"]) not in taken] for docs in families.values()]
    i = 0
    while total < chars and any(rest):
        bucket = rest[i % len(rest)]
        if bucket:
            d = bucket.pop(0)
            out.append({**d, "parity": False})
            total += len(d["text"])
        i += 1
    return out


# ---------------------------------------------------------------- make

def make(out: Path, repo: Path, data: Path, per_family: int, chars: int, with_onnx: bool,
         python_version: str, families=FAMILIES) -> dict:
    """Make the pack in ``out`` (replaced if it is a pack); returns its manifest."""
    from safetensors.numpy import load_file, save_file

    from headseg.analysis.locate import resolve_model_path
    from headseg.analysis.profile import HeadProfile, default_profile_path

    if out.exists():
        if not (out / "manifest.json").is_file():
            raise SystemExit(f"gpu_pack: {out} exists and is not a pack; choose another folder")
        shutil.rmtree(out)
    (out / "wheels").mkdir(parents=True)
    (out / "model").mkdir()
    (out / "data").mkdir()

    wheel = build_headseg_wheel(repo, out / "wheels")
    host = closure(HOST_PROVIDES)
    needed = closure(core_requirements(wheel)) - host - {"headseg"}
    brought, left = [], []
    for name in sorted(needed):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            left.append(f"{name} (not installed here)")
            continue
        if is_pure(dist):
            brought.append(wheel_from_installed(dist, out / "wheels").name)
        else:
            left.append(f"{name} (compiled)")
    if with_onnx:
        brought += [p.name for p in download_onnx(out / "wheels", python_version)]
        left = [n for n in left if n.split(" ", 1)[0] not in ("onnx", "ml-dtypes")]

    src, _ = resolve_model_path(None)
    src = Path(src)
    for name in MODEL_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / "model" / name)
    original = load_file(str(src / "model.safetensors"))
    save_file(pack_tensors(original), str(out / "model" / "packed.safetensors"), metadata={"format": PACK_FORMAT})

    with tempfile.TemporaryDirectory() as tmp:
        restored_fp = restore(out, Path(tmp) / "model", check=False)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    from headseg.analysis.weights import dir_fingerprint

    original_fp = dir_fingerprint(src, cfg)
    profile = HeadProfile.load(default_profile_path())
    if profile.model_fingerprint != original_fp:
        raise SystemExit(f"gpu_pack: the shipped profile is for {profile.model_fingerprint}, not the embedded "
                         f"model ({original_fp})")
    profile.model_fingerprint = restored_fp
    profile.model_name = f"{profile.model_name or 'all-MiniLM-L6-v2'} (gpu pack: int8 embeddings, fp16 matrices)"
    profile.save(out / "profile.json")

    docs = dev_documents(data, per_family, chars, families)
    with gzip.open(out / "data" / "dev.jsonl.gz", "wt", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    here = Path(__file__).resolve().parent
    for name in SCRIPTS:
        shutil.copy2(here / name, out / name)

    manifest = {
        "format": PACK_FORMAT,
        "original_fingerprint": original_fp,
        "restored_fingerprint": restored_fp,
        "wheels": sorted(p.name for p in (out / "wheels").iterdir()),
        "brought": brought,
        "not_brought": left,
        "host_provides": list(HOST_PROVIDES),
        "documents": len(docs),
        "parity_documents": sum(d["parity"] for d in docs),
        "characters": sum(len(d["text"]) for d in docs),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    manifest["bytes"] = folder_bytes(out)
    if manifest["bytes"] >= LIMIT_BYTES:
        raise SystemExit(f"gpu_pack: {out} is {manifest['bytes'] / 2**20:.1f} MiB, over the 64 MiB limit")
    return manifest


def folder_bytes(path: Path) -> int:
    """Bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ---------------------------------------------------------------- install (on the host)

def install(pack: Path, target: Path) -> None:
    """Install into ``target`` (``pip --target``, no index) headseg and every wheel of the pack the host lacks."""
    wanted = []
    for whl in sorted((pack / "wheels").glob("*.whl")):
        name = _norm(whl.name.split("-", 1)[0])
        if name != "headseg":
            try:
                print(f"gpu_pack: the host has {name} {md.version(name)}; its wheel stays unused")
                continue
            except md.PackageNotFoundError:
                pass
        wanted.append(str(whl))
    print("gpu_pack: installing " + ", ".join(Path(w).name for w in wanted))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--disable-pip-version-check", "--target", str(target), *wanted], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="make the pack (on a CPU machine with headseg's .venv)")
    m.add_argument("out", nargs="?", default="gpu-pack", type=Path)
    m.add_argument("--data", type=Path, default=Path(os.environ.get("HEADSEG_DATA", "../shared/data/segmentation")))
    m.add_argument("--families", default=",".join(FAMILIES),
                   help="the dev sets: folders under --data (default: every family of ../shared/data/segmentation)")
    m.add_argument("--per-family", type=int, default=3, help="parity documents per family (default 3)")
    m.add_argument("--chars", type=int, default=1_500_000, help="characters of dev text in all (default 1.5M)")
    m.add_argument("--with-onnx", action="store_true", help="bring onnx and ml_dtypes wheels for the host")
    m.add_argument("--python-version", default="3.12", help="the host's Python, for --with-onnx (default 3.12)")
    i = sub.add_parser("install", help="on the host: the wheels it lacks, into TARGET")
    i.add_argument("pack", type=Path)
    i.add_argument("target", type=Path)
    r = sub.add_parser("restore", help="on the host: the fp32 model folder")
    r.add_argument("pack", type=Path)
    r.add_argument("model_dir", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "make":
        repo = Path(__file__).resolve().parent.parent
        man = make(args.out, repo, args.data, args.per_family, args.chars, args.with_onnx, args.python_version,
                   tuple(f for f in args.families.split(",") if f))
        print(f"gpu_pack: {args.out}: {man['bytes'] / 2**20:.1f} MiB ({man['bytes']:,} bytes; limit 64 MiB); "
              f"{man['documents']} documents ({man['parity_documents']} for parity), "
              f"{man['characters']:,} characters; wheels: {', '.join(man['wheels'])}; "
              f"not brought: {', '.join(man['not_brought']) or 'none'}")
    elif args.cmd == "install":
        install(args.pack, args.target)
    else:
        fp = restore(args.pack, args.model_dir)
        print(f"gpu_pack: restored {args.model_dir} (fingerprint {fp}, as the manifest says)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
