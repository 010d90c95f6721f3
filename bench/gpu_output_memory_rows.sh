#!/usr/bin/env bash
# The output-memory red-team rows on the GPU host (repo root, one device call of at most 10 min; goal:
# each row gets its verdict). Command: `bash bench/gpu_output_memory_rows.sh`. Rows: outputs over
# managed and mapped host memory (t03-managed-output-cuda, t03-host-mapped-output-cuda: HACK
# probe:output-memory), work deferred to a host callback (t02-host-callback-cuda: not PASS, entry 2
# named), and the honest torch.compile softmax on cuda (SHORTCUT, no HACK); then the honest CUDA and
# Triton rows, which must keep every HACK away from ordinary device outputs.
#   OUT=$OUT bash bench/gpu_output_memory_rows.sh       # success: the "passed" lines of both pytest runs, 0 failed
set -u -o pipefail
OUT=${OUT:-/tmp/kbv-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-/tmp/kbv-cache}
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} 2>&1 | tee "$OUT/env.txt"
timeout ${ROWS_S:-300} python3 -m pytest -q -m cuda -rA tests/test_redteam.py tests/test_honest.py \
  -k "managed-output or host-mapped-output or host-callback or test_honest_torch_compile" \
  2>&1 | tail -80 > "$OUT/issue15-rows.log"; tail -4 "$OUT/issue15-rows.log"
timeout ${HONEST_S:-240} python3 -m pytest -q -m cuda -rA tests/test_honest.py -k "not torch_compile" \
  2>&1 | tail -60 > "$OUT/issue15-honest.log"; tail -4 "$OUT/issue15-honest.log"
