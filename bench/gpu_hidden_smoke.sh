#!/usr/bin/env bash
# A short device call for the hidden-test paths on cuda (sets made on the device, one read of the
# file's bytes, a hidden set the reference raises on named with exit 2) and the profile stage's
# paused reference recordings: two `kbv eval` runs of a torch candidate, each within 75 s.
# Command: `bash bench/gpu_hidden_smoke.sh` (nothing carried); logs and verdicts under $OUT.
O=${OUT:-/tmp/out}; mkdir -p "$O" /tmp/ht/level1
export PYTHONPATH=$PWD/src KBV_CACHE_DIR=/tmp/kbvcache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
P=tests/data/problems/level1/1_Small_ReLU.py C=tests/data/candidates/relu_torch.py
timeout 75 python3 -m kbv eval "$P" "$C" --device cuda --hidden-tests tests/data/hidden_tests/level1/1_hidden.py \
  --json "$O/good.json" > "$O/good.log" 2>&1; echo "good rc=$?" | tee -a "$O/summary.txt"
printf 'import torch\n\ndef get_hidden_inputs():\n    return [[torch.rand(64, 512)], [torch.rand(64, 512), torch.rand(3)]]\n' \
  > /tmp/ht/level1/1_hidden.py
timeout 75 python3 -m kbv eval "$P" "$C" --device cuda --hidden-tests /tmp/ht/level1/1_hidden.py \
  --json "$O/raises.json" > "$O/raises.log" 2>&1; echo "raises rc=$?" | tee -a "$O/summary.txt"
grep -h -E "^(PASS|SHORTCUT|INCORRECT|HACK|RUNTIME_ERROR|EVAL_ERROR)|kbv: error" "$O/good.log" "$O/raises.log" | cut -c1-300
