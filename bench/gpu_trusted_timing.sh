#!/usr/bin/env bash
# The trusted side's timing on the GPU host (docs/gpu-runs.md; goal: >= 90 % of rerun speedups inside
# the first run's intervals, the cuda suite green beside a kbv run). Command: `bash bench/gpu_trusted_timing.sh
# start`, then `bash bench/gpu_trusted_timing.sh poll` back to back. It runs the 40-kernel honest batch
# alone (rerun_coverage first), then the cuda suite in four groups at once beside the same batch
# again (rerun_coverage second: a rerun in fresh processes beside a GPU load), the interval
# comparison, then the bound's precision alone. Detached from a copy in /tmp/snap; `start` returns
# at once, `poll` copies logs and JSON to $OUT.
# .whl (git-ignored, carried): the serve extra's wheels the device image lacks (fastapi, uvicorn, pydantic)
[ -d .whl ] && [ ! -d /tmp/site/fastapi ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=src:/tmp/site KBV_CACHE_DIR=/tmp/kbvcache PYTHONUNBUFFERED=1
mkdir -p /tmp/g
case "$1" in
  start)
    rm -rf /tmp/snap && mkdir -p /tmp/snap && cp -r src tests bench pyproject.toml /tmp/snap/ && cd /tmp/snap
    cat > /tmp/g/driver.sh <<'EOD'
cd /tmp/snap
date +%s > /tmp/g/t0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > /tmp/g/gpu.txt 2>&1
python3 bench/rerun_coverage.py first /tmp/w --deadline-s 480 > /tmp/g/first.log 2>&1
date +%s > /tmp/g/t_first
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_redteam.py > /tmp/g/redteam.log 2>&1 & p1=$!
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_honest.py > /tmp/g/honest.log 2>&1 & p2=$!
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_gpu.py tests/test_gpu_policy.py > /tmp/g/gpu.log 2>&1 & p3=$!
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/ --ignore=tests/test_redteam.py --ignore=tests/test_honest.py --ignore=tests/test_gpu.py --ignore=tests/test_gpu_policy.py > /tmp/g/rest.log 2>&1 & p4=$!
python3 bench/rerun_coverage.py second /tmp/w --deadline-s 480 > /tmp/g/second.log 2>&1
date +%s > /tmp/g/t_second
wait $p1 $p2 $p3 $p4
date +%s > /tmp/g/t_suite
python3 bench/rerun_coverage.py compare /tmp/w --json /tmp/g/coverage.json > /tmp/g/compare.log 2>&1
python3 bench/bound_precision.py --json /tmp/g/bound.json > /tmp/g/bound.log 2>&1
date +%s > /tmp/g/t_done
EOD
    setsid nohup bash /tmp/g/driver.sh > /tmp/g/driver.log 2>&1 < /dev/null & ;;
  poll)
    tar czf "$OUT/g.tgz" -C /tmp/g . 2>/dev/null
    for f in /tmp/g/*.log; do echo "== $f: $(grep -E "passed|failed|error|verdicts" $f | tail -1 | cut -c1-200)"; done
    ls /tmp/g/t*; tail -3 /tmp/g/compare.log /tmp/g/bound.log 2>/dev/null ;;
esac
