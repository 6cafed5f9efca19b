#!/usr/bin/env bash
# Everything that needs a GPU, in one go (for a lent device machine; see docs/performance.md).
#   bash benchmarks/gpu.sh            # writes logs to ${OUT:-/tmp/headseg-gpu}
# 1. the CUDA tests (provider really CUDA, fp32 parity with torch on CPU, fp16 close and preferred by auto);
# 2. parity of the whole segmenter: ORT-CUDA fp32/fp16 boundaries vs the CPU torch path on dev documents;
# 3. throughput of the whole segmenter: torch-cuda vs ORT-CUDA fp32 and fp16 on the dev documents.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/headseg-gpu}
mkdir -p "$OUT"
PY=${PY:-python3}
export HEADSEG_CACHE=${HEADSEG_CACHE:-$OUT/cache}
nvidia-smi | tee "$OUT/nvidia-smi.txt" || true
$PY -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" | tee "$OUT/ort.txt"
$PY -m pytest -q -p no:cacheprovider tests/export/test_cuda.py 2>&1 | tee "$OUT/cuda-tests.txt"
$PY - <<'PY' 2>&1 | tee "$OUT/gpu-bench.txt"
import os, time, glob
from pathlib import Path
from headseg import Segmenter
from headseg.segmenter.evaluation.loaders import iter_documents

data = Path(os.environ.get("HEADSEG_DATA", "../shared/data/segmentation"))
docs = list(iter_documents(str(data / "choi/3/3-11"))) + list(iter_documents(str(data / "lectures_ai")))
texts = [d.text for d in docs]
print(f"{len(texts)} documents, {sum(map(len, texts)):,} characters")
ref = Segmenter(backend="torch", device="cpu")
want = [s.boundaries for s in ref.segment_many(texts[:50])]
configs = {"torch cuda": dict(backend="torch", device="cuda"),
           "ort cuda fp32": dict(backend="onnx", device="cuda", precision="fp32"),
           "ort cuda fp16": dict(backend="onnx", device="cuda", precision="fp16")}
for name, kw in configs.items():
    seg = Segmenter(**kw, batch_size=256)
    got = [s.boundaries for s in seg.segment_many(texts[:50])]
    same = sum(a == b for a, b in zip(got, want))
    seg.segment_many(texts[:5])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        seg.segment_many(texts[i:i + 64])
    dt = time.perf_counter() - t0
    print(f"{name:<14} {len(texts) / dt:8.2f} docs/s  {sum(map(len, texts)) / dt / 1000:8.1f} kchars/s  "
          f"boundaries equal to CPU torch on {same}/50")
PY
