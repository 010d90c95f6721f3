#!/usr/bin/env bash
# Two honest verifications alone with their bound-pass evidence printed (a 32 MiB-input Triton matmul and
# torch's TF32 matmul), then the cuda suite beside a kbv run (bench/gpu_suite_beside.sh) in what is left of
# LIMIT seconds (default 560); with --alone-only the two verifications only. Command: `bash bench/gpu_bound_check.sh`
# (carry [".whl"]).
export PYTHONPATH=$PWD/src KBV_CACHE_DIR=/tmp/kbvcache PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"; LIMIT=${LIMIT:-560}; t0=$(date +%s)
show() {  # problem candidate name
  python3 -m kbv eval "$1" "$2" --device cuda --json "$O/$3.json" > "$O/$3.log" 2>&1
  python3 - "$O/$3.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); e = v["evidence"].get("trusted_bound", {})
print(sys.argv[1], v["status"], v["speedup"], [f["check"] for f in v["findings"]])
print({k: e.get(k) for k in ("claimed_median_ms", "credited_median_ms", "floor_ms", "calls", "wall_ms",
                             "request_allow_ms", "null_per_call_ms", "baseline_floor_ms")})
PY
}
show tests/data/honest/problems/level1/41_Matmul_large.py tests/data/honest/candidates/gpu_matmul_triton.py matmul_triton
show src/kbv/data/problems/level1/4_Square_matmul.py src/kbv/data/candidates/matmul_tf32.py matmul_tf32
[ "$1" = --alone-only ] && exit 0
LIMIT=$(( LIMIT - $(date +%s) + t0 )) bash bench/gpu_suite_beside.sh
