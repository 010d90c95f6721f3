#!/usr/bin/env bash
# The H200 session for the correctness policy (issue 3). Run from the repo root on the GPU host:
#   bash bench/gpu_policy_session.sh            (results under $OUT, default /tmp/kbv-gpu-policy)
# 1. environment; 2. the cuda-marked policy tests and the existing GPU tests (which now run the kbv
# policy with the randomised distributions); 3. normalised errors of baselines and alternatives on
# cuda (eager-tf32 baseline, Triton tl.dot tf32/ieee/tf32x3, GPU reductions), JSON + markdown.
# Budget: ~2 min of tests + ~5-10 min of measurements.
set -u -o pipefail
OUT=${OUT:-/tmp/kbv-gpu-policy}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-/tmp/kbv-cache}
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} 2>&1 | tee "$OUT/env.txt"
python3 -m pytest -q -m cuda tests/test_gpu_policy.py tests/test_gpu.py 2>&1 | tee "$OUT/pytest-cuda-policy.log"
python3 bench/measure_errors.py --device cuda --seeds ${SEEDS:-3} --out "$OUT/errors-cuda.json" \
  2> "$OUT/measure-errors.stderr" | tee "$OUT/errors-cuda.md"
