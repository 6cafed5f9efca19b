#!/usr/bin/env bash
# Everything a GPU can tell about headseg's CUDA path, in one go, from the GPU pack alone (docs/performance.md, GPU).
#   python benchmarks/gpu_pack.py make gpu-pack     # on a CPU machine: the folder (< 64 MiB) to bring
#   bash gpu-pack/gpu.sh [--dry-run] [OUTDIR]       # on the GPU host (no index, no Hub); --dry-run: CPU, tiny
#   bash benchmarks/gpu.sh [--dry-run] [OUTDIR]     # from a checkout: makes ./gpu-pack first, then runs it
# OUTDIR: $OUT if set, else the argument, else /tmp/headseg-gpu.  It gets summary.md, results.json, log.txt,
# profile.txt and setup.txt (at most 8 files: what a lent device machine sends back).  PY: the host's python
# (default python3), the one with torch; the pack's wheels go into a --target folder on PYTHONPATH (the lent
# host's python3 is itself a venv: a --system-site-packages venv made from it would not see its torch).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DRY=()
ARGS=()
for a in "$@"; do
  case "$a" in
    --dry-run) DRY=(--dry-run) ;;
    *) ARGS+=("$a") ;;
  esac
done
PY=${PY:-python3}
if [ ! -f "$HERE/manifest.json" ]; then  # in a checkout's benchmarks/: make the pack, run it from there
  "$PY" "$HERE/gpu_pack.py" make "$HERE/../gpu-pack"
  exec bash "$HERE/../gpu-pack/gpu.sh" "$@"
fi
OUT=${OUT:-${ARGS[0]:-/tmp/headseg-gpu}}
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/headseg-gpu.XXXXXX")
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 HEADSEG_CACHE="$WORK/cache"
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
{
  echo "pack: $HERE ($(du -sm "$HERE" | cut -f1) MB); work: $WORK; python: $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  nvidia-smi || echo "(no nvidia-smi)"
  "$PY" "$HERE/gpu_pack.py" install "$HERE" "$WORK/site"
  "$PY" "$HERE/gpu_pack.py" restore "$HERE" "$WORK/model"
} 2>&1 | tee "$OUT/setup.txt"
status=0
"$PY" "$HERE/gpu_measure.py" --model "$WORK/model" --profile "$HERE/profile.json" \
  --data "$HERE/data/dev.jsonl.gz" --out "$OUT" "${DRY[@]}" || status=$?
rm -rf "$WORK"
exit $status
