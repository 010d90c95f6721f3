#!/usr/bin/env bash
# One device call of bench/gpu_trusted_side.sh PHASE (alone|beside|rest|suite|focus) with the candidate workers
# forked from the zygote (KBV_ZYGOTE=1) once one cuda verification under it has given a verdict on this machine
# (the smoke below, kept in /tmp/zygote.ok for the next calls on the same warm machine; `touch /tmp/zygote.ok`
# first skips it); without it when that verification fails. Everything the phase wrote comes back as one
# $OUT/PHASE.tgz (the device returns at most 8 files), refreshed every 20 s while the phase runs, so a call cut
# off at the device's limit still returns what ran. LIMIT (default 500) counts from this script's start, setup
# included: keep it 30 s under the call's timeout. Command: `LIMIT=500 bash bench/gpu_session.sh alone`
# (carry [".whl"]).
O=${OUT:-/tmp/out}; W=/tmp/o/$1; mkdir -p "$W" "$O"; t0=$(date +%s)
export PYTHONPATH=$PWD/src KBV_CACHE_DIR=/tmp/kbvcache PYTHONUNBUFFERED=1
( while sleep 20; do tar czf "$O/$1.tgz.part" -C /tmp/o "$1" 2>/dev/null && mv "$O/$1.tgz.part" "$O/$1.tgz"; done ) &
packer=$!
if [ ! -f /tmp/zygote.ok ] && [ ! -f /tmp/zygote.no ]; then
  KBV_ZYGOTE=1 timeout 150 python3 -m kbv eval src/kbv/data/problems/level1/4_Square_matmul.py \
    src/kbv/data/candidates/matmul_tf32.py --device cuda --json "$W/zygote_smoke.json" > "$W/zygote_smoke.log" 2>&1
  if grep -qE '"status": "(PASS|SHORTCUT)"' "$W/zygote_smoke.json" 2>/dev/null; then touch /tmp/zygote.ok; else touch /tmp/zygote.no; fi
fi
[ -f /tmp/zygote.ok ] && export KBV_ZYGOTE=1
echo "zygote: ${KBV_ZYGOTE:-off} (smoke and setup $(( $(date +%s) - t0 )) s)" | tee -a "$W/summary.txt"
LIMIT=$(( ${LIMIT:-500} - $(date +%s) + t0 - 15 )) OUT=$W bash bench/gpu_trusted_side.sh "$1"
kill $packer 2>/dev/null
tar czf "$O/$1.tgz" -C /tmp/o "$1"; rm -f "$O/$1.tgz.part"; cat "$W/summary.txt"
