#!/usr/bin/env bash
# Batch over the built-in suite on the GPU host: baselines (incl. torch.compile), kbv run over three
# "models" (honest, hacked, broken), kbv report; then the oracle-error measurements behind k.
set -u -o pipefail
OUT=${OUT:-/tmp/kbv-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 KBV_CACHE_DIR=${KBV_CACHE_DIR:-/tmp/kbv-cache}
W=/tmp/kbv-batch && rm -rf $W && mkdir -p $W/runs
python3 bench/make_demo_runs.py $W/runs --device cuda
cp -r tests/data/runs/broken $W/runs/broken
{
  python3 -m kbv baselines src/kbv/data/problems --store $W/store.db --device cuda
  python3 -m kbv run src/kbv/data/problems $W/runs --store $W/store.db --device cuda
  python3 -m kbv report --store $W/store.db --out $W/report
} 2>&1 | tee "$OUT/batch.log"
tar czf "$OUT/batch-report.tgz" -C $W report store.db
if [ -f bench/measure_errors.py ]; then
  timeout 300 python3 bench/measure_errors.py --device cuda --seeds ${SEEDS:-1} --out "$OUT/errors-cuda.json" 2>&1 | tee "$OUT/measure-errors.log"
fi
