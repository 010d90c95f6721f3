#!/usr/bin/env bash
# The cuda suite in four groups at once beside a 40-kernel `kbv run` (bench/rerun_coverage.py $BATCH, default
# first; `second` reuses /tmp/w's builds and store of an earlier `first` on the same warm machine), in one
# foreground call of at most LIMIT seconds (default 540): every log goes straight to $OUT, so what ran comes
# back even when the device call ends early. Command: `bash bench/gpu_suite_beside.sh` (carry [".whl"]).
[ -d .whl ] && [ ! -d /tmp/site/fastapi ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:/tmp/site KBV_CACHE_DIR=/tmp/kbvcache PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"; LIMIT=${LIMIT:-540}; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
py="python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider"
BATCH=${BATCH:-first}
python3 bench/rerun_coverage.py "$BATCH" /tmp/w --deadline-s $((LIMIT - 30)) > "$O/batch.log" 2>&1 & b=$!
$py tests/e2e/test_redteam.py tests/e2e/test_redteam_bound.py > "$O/redteam.log" 2>&1 & p1=$!
$py tests/e2e/test_honest.py > "$O/honest.log" 2>&1 & p2=$!
$py tests/e2e/test_gpu.py tests/e2e/test_gpu_policy.py > "$O/gpu.log" 2>&1 & p3=$!
$py tests/ --ignore=tests/e2e/test_redteam.py --ignore=tests/e2e/test_redteam_bound.py --ignore=tests/e2e/test_honest.py \
  --ignore=tests/e2e/test_gpu.py --ignore=tests/e2e/test_gpu_policy.py --deselect \
  tests/serve/test_serve.py::test_gpu_lane_stays_busy_under_eight_clients > "$O/rest.log" 2>&1 & p4=$!
while [ $(( $(date +%s) - t0 )) -lt "$LIMIT" ] && { kill -0 $b || kill -0 $p1 || kill -0 $p2 || kill -0 $p3 || kill -0 $p4; } 2>/dev/null; do
  sleep 5
done
for p in $b $p1 $p2 $p3 $p4; do kill -0 $p 2>/dev/null && echo "still running at the limit: $p" >> "$O/summary.txt"; done
cp /tmp/w/first.db /tmp/w/second.db "$O/" 2>/dev/null
echo "wall $(( $(date +%s) - t0 )) s" >> "$O/summary.txt"
for f in "$O"/*.log; do echo "== $f: $(grep -E "passed|failed|error" "$f" | tail -1 | cut -c1-200)"; done
