#!/usr/bin/env bash
# One scripted GPU session (run on the device host from the repo root):
#   cuda-marked tests, then `kbv demo --device cuda` with every verdict record saved under $OUT.
set -u -o pipefail
OUT=${OUT:-/tmp/kbv-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-/tmp/kbv-cache}
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} 2>&1 | tee "$OUT/env.txt"
python3 -m pytest -q -m cuda ${PYTEST_ARGS:-tests} 2>&1 | tee "$OUT/pytest-cuda.log"
python3 -m kbv demo --device cuda --json-dir /tmp/kbv-demo-json 2>&1 | tee "$OUT/demo.log"
tar czf "$OUT/demo-verdicts.tgz" -C /tmp kbv-demo-json
