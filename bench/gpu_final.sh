#!/usr/bin/env bash
# One device session (docs/gpu-runs.md): the cuda-marked suite in four groups at once, then the
# timing-fidelity bench alone (FIDELITY=0 skips it), then the GPU batch bench until a deadline.
# Detached from a copy in /tmp/snap (the next device call replaces the synced tree); `start`
# returns at once, `poll` copies logs and JSON to $OUT.
# Usage: [FIDELITY=0] bash bench/gpu_final.sh start [scale_deadline_s] | poll
export PYTHONPATH=src KBV_CACHE_DIR=/tmp/kbvcache
mkdir -p /tmp/g
case "$1" in
  start)
    rm -rf /tmp/snap && mkdir -p /tmp/snap && cp -r src tests bench pyproject.toml /tmp/snap/ && cd /tmp/snap
    deadline=${2:-300}
    cat > /tmp/g/driver.sh <<EOD
cd /tmp/snap
date +%s > /tmp/g/t0
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_redteam.py > /tmp/g/redteam.log 2>&1 &
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_honest.py > /tmp/g/honest.log 2>&1 &
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_gpu.py tests/test_gpu_policy.py > /tmp/g/gpu.log 2>&1 &
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/ --ignore=tests/test_redteam.py --ignore=tests/test_honest.py --ignore=tests/test_gpu.py --ignore=tests/test_gpu_policy.py > /tmp/g/rest.log 2>&1 &
wait
date +%s > /tmp/g/t_suite
if [ "${FIDELITY:-1}" != 0 ]; then
  OUT=/tmp/g python3 bench/fidelity.py --device cuda --repeats 5 --json /tmp/g/fidelity.json > /tmp/g/fidelity.log 2>&1
  date +%s > /tmp/g/t_fidelity
fi
OUT=/tmp/g python3 bench/gpu_scale.py --gpus all --deadline-s $deadline --json /tmp/g/gpu-scale.json > /tmp/g/scale.log 2>&1
date +%s > /tmp/g/t_done
EOD
    setsid nohup bash /tmp/g/driver.sh > /tmp/g/driver.log 2>&1 < /dev/null & ;;
  poll)
    cp /tmp/g/*.log /tmp/g/*.json /tmp/g/t* "$OUT/" 2>/dev/null
    for f in /tmp/g/*.log; do echo "== $f: $(grep -E "passed|failed|error" $f | tail -1)"; done
    ls /tmp/g/t*; tail -5 /tmp/g/fidelity.log /tmp/g/scale.log 2>/dev/null ;;
esac
