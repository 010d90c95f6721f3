#!/usr/bin/env bash
# The cuda-marked suite in three groups at once on the lent GPU (docs/gpu-runs.md); logs in /tmp/g.
# `bash bench/gpu_suite.sh start` starts them detached (from a copy in /tmp/snap); `bash bench/gpu_suite.sh poll` copies the logs to $OUT.
export PYTHONPATH=src KBV_CACHE_DIR=/tmp/kbvcache
mkdir -p /tmp/g
case "$1" in
  start)
    pkill -f "^python3 -m pytest" ; sleep 1
    # the detached groups run from a copy: the next device call replaces the synced tree under them
    rm -rf /tmp/snap && mkdir -p /tmp/snap && cp -r src tests bench pyproject.toml /tmp/snap/ && cd /tmp/snap
    for g in redteam honest rest; do
      case $g in
        redteam) sel="tests/e2e/test_redteam.py" ;;
        honest) sel="tests/e2e/test_honest.py" ;;
        rest) sel="tests/ --ignore=tests/e2e/test_redteam.py --ignore=tests/e2e/test_honest.py" ;;
      esac
      setsid nohup python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider $sel > /tmp/g/$g.log 2>&1 < /dev/null &
    done ;;
  poll)
    cp /tmp/g/*.log "$OUT/" 2>/dev/null
    for f in /tmp/g/*.log; do echo "== $f: $(head -c 200 $f | head -1)"; grep -E "passed|failed" $f | tail -1; done
    pgrep -fc "^python3 -m pytest" ;;
esac
