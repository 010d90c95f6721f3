#!/usr/bin/env bash
# The cuda red-team and honest rows, the demo and the probe overhead on the GPU host (repo root; goal:
# every row its verdict, the demo's table). Command: `bash bench/gpu_redteam_demo.sh`. It runs the cuda rows of the red-team and honest
# suites and the GPU tests, then `kbv demo --device cuda`, then the probe-overhead benchmark,
# each under its own time limit so one device call (10 min) holds all three. Logs go to $OUT.
set -u -o pipefail
OUT=${OUT:-/tmp/kbv-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-/tmp/kbv-cache}
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} 2>&1 | tee "$OUT/env.txt"
timeout ${PYTEST_S:-330} python3 -m pytest -q -m cuda -rA tests/e2e/test_redteam.py tests/e2e/test_honest.py tests/e2e/test_gpu.py \
  2>&1 | tail -150 > "$OUT/pytest-cuda.log"; tail -5 "$OUT/pytest-cuda.log"
timeout ${DEMO_S:-150} python3 -m kbv demo --device cuda --json-dir /tmp/kbv-demo-json 2>&1 | tee "$OUT/demo.log" | tail -25
tar czf "$OUT/demo-verdicts.tgz" -C /tmp kbv-demo-json 2>/dev/null
timeout ${BENCH_S:-80} python3 bench/probe_overhead.py --device cuda --repeats 1 --out "$OUT/overhead-cuda.json" 2>&1 | tail -8
