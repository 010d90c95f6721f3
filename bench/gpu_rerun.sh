#!/usr/bin/env bash
# Re-run of the cuda rows that a session changed (docs/gpu-runs.md): `start` detaches, `poll` reports.
export PYTHONPATH=src KBV_CACHE_DIR=/tmp/kbvcache
mkdir -p /tmp/g
case "$1" in
  start)
    setsid nohup python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_gpu.py tests/test_gpu_policy.py > /tmp/g/gpu2.log 2>&1 < /dev/null &
    setsid nohup python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/test_redteam.py -k "t06 or t07 or t01 or t05" > /tmp/g/red2.log 2>&1 < /dev/null & ;;
  poll)
    cp /tmp/g/*2.log "$OUT/" 2>/dev/null
    for f in /tmp/g/*2.log; do echo "== $f"; grep -E "^(FAILED|ERROR)|passed|failed" $f | tail -8; done
    pgrep -fc "^python3 -m pytest" ;;
esac
