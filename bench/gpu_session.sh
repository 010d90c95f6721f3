#!/usr/bin/env bash
# One GPU session on the lent H200 (docs/gpu-runs.md): the full-size ReLU and Softmax, then the
# cuda-marked suite. Writes everything under $OUT; run as `setsid bash bench/gpu_session.sh &`.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=src KBV_CACHE_DIR=$PWD/.kbv-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv;
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1
( while true; do nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader >> "$OUT/gpu-mem.csv"; sleep 2; done ) &
MON=$!
for case in "19_ReLU_full relu_clamp_min_torch" "23_Softmax_full softmax_exp_torch"; do
  set -- $case
  /usr/bin/time -v python3 -m kbv eval bench/problems/level1/$1.py tests/data/honest/candidates/$2.py \
      --device cuda --json "$OUT/$1.json" > "$OUT/$1.log" 2> "$OUT/$1.time" || true
  echo "$1 done $(date -u)" >> "$OUT/progress.txt"
done
python3 -m pytest -m cuda -q -rA -p no:cacheprovider tests/ > "$OUT/cuda-suite.log" 2>&1
echo "suite rc $? $(date -u)" >> "$OUT/progress.txt"
kill $MON
echo finished >> "$OUT/progress.txt"
