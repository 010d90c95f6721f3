#!/usr/bin/env bash
# One device session (docs/gpu-runs.md), detached from a copy in /tmp/snap (the next device call
# replaces the synced tree): the cuda-marked suite in four groups at once on the one GPU, beside the
# 1 GiB cpu ReLU's memory figure (bench/memory_peaks.py, niced, on the host's idle cores); then the
# GPU batch bench (bench/gpu_scale.py) alone until a deadline. `start` returns at once; `poll`
# copies logs and JSON to $OUT. Usage: bash bench/gpu_session3.sh start [scale_deadline_s] | poll
export PYTHONPATH=src KBV_CACHE_DIR=/tmp/kbvcache
mkdir -p /tmp/g
case "$1" in
  start)
    rm -rf /tmp/snap && mkdir -p /tmp/snap && cp -r src tests bench docs pyproject.toml /tmp/snap/ && cd /tmp/snap
    deadline=${2:-420}
    cat > /tmp/g/driver.sh <<EOD
cd /tmp/snap
date +%s > /tmp/g/t0
(timeout 900 nice -n 10 python3 bench/memory_peaks.py --out /tmp/g/memory-19_ReLU_1GiB-cpu.json > /tmp/g/memory.log 2>&1; date +%s > /tmp/g/t_memory) &
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_redteam.py > /tmp/g/redteam.log 2>&1 &
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_honest.py > /tmp/g/honest.log 2>&1 &
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_gpu.py tests/test_gpu_policy.py > /tmp/g/gpu.log 2>&1 &
python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/ --ignore=tests/test_redteam.py --ignore=tests/test_honest.py --ignore=tests/test_gpu.py --ignore=tests/test_gpu_policy.py > /tmp/g/rest.log 2>&1 &
wait
date +%s > /tmp/g/t_suite
OUT=/tmp/g python3 bench/gpu_scale.py --gpus all --deadline-s $deadline --json /tmp/g/gpu-scale.json > /tmp/g/scale.log 2>&1
date +%s > /tmp/g/t_done
EOD
    setsid nohup bash /tmp/g/driver.sh > /tmp/g/driver.log 2>&1 < /dev/null & ;;
  poll)
    cp /tmp/g/*.log /tmp/g/*.json /tmp/g/t* "$OUT/" 2>/dev/null
    for f in /tmp/g/*.log; do echo "== $f: $(grep -E "passed|failed|error" $f | tail -1)"; done
    ls /tmp/g/t*; tail -3 /tmp/g/memory.log /tmp/g/scale.log 2>/dev/null ;;
esac
