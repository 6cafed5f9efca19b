"""What the benchmark scripts share: where the data is, the data sets, the default model, child processes, tables.

Every script runs as a module from the repository root (``python -m benchmarks.NAME``), so it imports
this one as ``from benchmarks.common import ...``; none edits ``sys.path``.  The shared data lives
beside the repository, in ``<repo>/../shared/data``; ``HEADSEG_DATA`` names another folder of the
same layout (``segmentation/``, ``corpus/``, ``retrieval/``), read when a path is asked for, so a
script's ``--data-root`` or ``--data`` default follows it.
"""

from __future__ import annotations

import glob
import os
import resource
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

#: the repository's root (this file's folder's parent)
REPO = Path(__file__).resolve().parents[1]
#: data the benchmarks build and keep in the repository (benchmarks/short_docs.py writes it)
BENCH_DATA = Path(__file__).resolve().parent / "data"

#: (name, path under the segmentation data root); Choi sets 1 and 2 are split by segment length.
DATASETS = (
    ("choi/1/3-5", "choi/1/3-5"),
    ("choi/1/6-8", "choi/1/6-8"),
    ("choi/1/9-11", "choi/1/9-11"),
    ("choi/1/3-11", "choi/1/3-11"),
    ("choi/2/3-5", "choi/2/3-5"),
    ("choi/2/6-8", "choi/2/6-8"),
    ("choi/2/9-11", "choi/2/9-11"),
    ("choi/2/3-11", "choi/2/3-11"),
    ("choi/3/3-11", "choi/3/3-11"),
    ("lectures_ai", "lectures_ai"),
    ("lectures_physics", "lectures_physics"),
    ("dialseg711", "dialseg711"),
    ("clinical_dev", "clinical_dev"),
    ("meetings_ami_dev", "meetings_ami_dev"),
    ("meetings_qmsum_dev", "meetings_qmsum_dev"),
    ("manifestos", "../corpus"),
    ("wiki50_dev", "wiki50_dev"),
    # short texts of 2-4 paragraphs (benchmarks/short_docs.py builds it; an absolute path: in the repository)
    ("short_dev", str(BENCH_DATA / "short_dev.jsonl")),
    # its guard: one or two segments, each written as 2-3 paragraphs (short_docs.py --family sections)
    ("short_sections_dev", str(BENCH_DATA / "short_sections_dev.jsonl")),
    # issue 48's short families (benchmarks/short_families.py): one subject in 2-4 paragraphs, 2-3 unrelated
    # subjects of 1-2 paragraphs, two adjacent sections of one article
    ("short_one_dev", str(BENCH_DATA / "short_one_dev.jsonl")),
    ("short_unrelated_dev", str(BENCH_DATA / "short_unrelated_dev.jsonl")),
    ("short_adjacent_dev", str(BENCH_DATA / "short_adjacent_dev.jsonl")),
)


def data_root() -> Path:
    """The shared data folder: ``$HEADSEG_DATA`` where set (read now, not at import), else ``<repo>/../shared/data``."""
    return Path(os.environ.get("HEADSEG_DATA") or REPO.parent / "shared" / "data")


def segmentation_root() -> Path:
    """The labelled segmentation data sets (``DATASETS``' paths are relative to it)."""
    return data_root() / "segmentation"


def corpus_files() -> list[str]:
    """The manifesto corpus (unlabelled prose), in name order."""
    return sorted(glob.glob(str(data_root() / "corpus" / "manifesto_*.txt")))


def slug(name: str) -> str:
    """A data set's name as a file name (``choi/1/3-5`` -> ``choi_1_3-5``)."""
    return name.replace("/", "_")


def dataset_path(name: str, root: str | Path | None = None) -> Path:
    """Where the data set ``name`` of :data:`DATASETS` is, under ``root`` (default :func:`segmentation_root`)."""
    return Path(root if root is not None else segmentation_root()) / dict(DATASETS)[name]


def select_datasets(spec: str | None) -> list[tuple[str, str]]:
    """The data sets a ``--datasets`` value names: comma-separated names or prefixes; all when empty."""
    from headseg.analysis.errors import HeadsegError

    if not spec:
        return list(DATASETS)
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    out = [(n, p) for n, p in DATASETS if any(n == w or n.startswith(w.rstrip("/") + "/") for w in wanted)]
    if not out:
        raise HeadsegError(f"--datasets {spec}: none of {', '.join(n for n, _ in DATASETS)}")
    return out


def make_text(n_bytes: int) -> str:
    """``n_bytes`` of real prose: the manifestos then the Choi set 1 texts, topic lines removed, repeated."""
    files = corpus_files()
    files += sorted(glob.glob(str(segmentation_root() / "choi" / "1" / "*" / "*.ref")))
    if not files:
        raise SystemExit(f"no corpus or Choi texts under {data_root()} (set HEADSEG_DATA)")
    parts, size = [], 0
    while size < n_bytes:
        for f in files:
            lines = [l for l in Path(f).read_text(encoding="utf-8").splitlines() if l.strip() != "=========="]
            chunk = "\n".join(lines) + "\n"
            parts.append(chunk)
            size += len(chunk.encode("utf-8"))
            if size >= n_bytes:
                break
    text = "".join(parts)
    return text.encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")


def prose() -> str:
    """The manifesto corpus as one line: its non-empty lines, topic lines removed, joined with spaces."""
    out = []
    for f in corpus_files():
        out += [l.strip() for l in Path(f).read_text(encoding="utf-8").splitlines()
                if l.strip() and l.strip() != "=========="]
    return " ".join(out)


def strip_punctuation(text: str) -> str:
    """``text`` with every punctuation mark (Unicode category P*) replaced by a space, spaces collapsed."""
    kept = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    return " ".join(kept.split())


def cut(text: str, n_bytes: int) -> str:
    """The first ``n_bytes`` of ``text`` (UTF-8), ended at the last space so no word is cut."""
    data = text.encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")
    return data[: data.rfind(" ")] if " " in data else data


def default_model_dir() -> Path:
    """The default model's folder, found as headseg finds it: the embedded package's, else the Hub cache's."""
    from headseg.analysis.locate import embedded_model_path

    return embedded_model_path()


def default_model(weights: bool = True):
    """The default model loaded as ``Segmenter()`` loads it (``weights=False``: config and tokenizer only)."""
    from headseg.analysis.model import load_model

    return load_model(None, weights=weights)


def default_tokenizer():
    """The default model's tokenizer alone, read from :func:`default_model_dir`."""
    from headseg.analysis.tokenizer import Tokenizer

    return Tokenizer.from_dir(default_model_dir())


def make_tiny_model(path: Path) -> None:
    """Save a seeded 3-layer, 4-head BERT with the default model's tokenizer into ``path`` (needs torch)."""
    import torch
    from transformers import BertConfig, BertModel

    tok = default_model(weights=False).tokenizer
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=160)
    BertModel(cfg, add_pooling_layer=False).save_pretrained(path)
    tok.save(path)


def offline_settings() -> None:
    """Read the model offline and keep the tokenizer single-threaded, unless the caller's shell says otherwise.

    Called at the start of a script's ``main`` (never at import: importing a benchmark changes nothing),
    so the measured process, and the children it starts, run as the timings in the docs were taken.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def module_command(module: str, *args: str) -> list[str]:
    """The command that runs the benchmark module ``module`` (``__spec__.name``) with ``args`` in a child."""
    return [sys.executable, "-m", module, *args]


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default this process's) with the repository first on ``PYTHONPATH``.

    A child started with :func:`module_command` finds the ``benchmarks`` package from any working
    folder, so paths the user gave relative to it mean the same in the child.
    """
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def run_measured(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``cmd``; its wall seconds, CPU seconds and peak RSS (MiB) alone, and its stdout and stderr.

    Output goes to temporary files, not pipes: ``os.wait4`` (which gives the child's own resource usage)
    must not wait on a child blocked writing to a full pipe (a worker's JSON for a thousand documents is
    larger than one).  A command that fails stops the benchmark (``SystemExit``) with its stderr's end.
    """
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)[:300]} failed:\n{err[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "out": out, "err": err}


def timed_segment(seg, text: str, **options):
    """``(result, seconds)`` of ``seg.segment(text, **options)``; exits if the segments do not tile the text."""
    t0 = time.perf_counter()
    result = seg.segment(text, **options)
    secs = time.perf_counter() - t0
    if "".join(s.text for s in result) != text:
        raise SystemExit("offset invariant broken")
    return result, secs


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``), in MiB (Linux reports KiB).

    In a child process this includes what the child held before its ``exec``; :func:`own_peak_rss_mb`
    does not.
    """
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def own_peak_rss_mb() -> float:
    """Peak RSS of this process's own memory (``VmHWM``): unlike ``ru_maxrss`` it does not inherit the parent's peak."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def load_average() -> str:
    """``load average A B C``: the 1, 5 and 15 minute load, printed beside every timing."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """A Markdown table; ``align`` has one letter a column, ``r`` for right-aligned (``---:``), else left."""
    seps = "".join("---:|" if a == "r" else "---|" for a in align.ljust(len(header), "l"))
    lines = ["| " + " | ".join(header) + " |", "|" + seps]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
