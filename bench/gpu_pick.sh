#!/usr/bin/env bash
# One device call that fits the card that came: on a card of over 100 GB (an H200) PHASE_BIG with
# FULL_BIG (the full-size problems an 80 GB card cannot hold), then FULL_BIG_NEXT in the time left, else PHASE_SMALL
# with FULL_SMALL.
# Command: `PHASE_BIG=full FULL_BIG=19-39,45 PHASE_SMALL=rows FULL_SMALL=68-100 LIMIT=560 bash bench/gpu_pick.sh`
mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
if [ "${mib:-0}" -gt 100000 ]; then
  echo "card: ${mib} MiB: ${PHASE_BIG} ${FULL_BIG}"; FULL_PIDS="$FULL_BIG" FULL_PIDS_NEXT="${FULL_BIG_NEXT:-}" exec bash bench/gpu_session.sh "$PHASE_BIG"
else
  echo "card: ${mib} MiB: ${PHASE_SMALL} ${FULL_SMALL}"; FULL_PIDS="$FULL_SMALL" exec bash bench/gpu_session.sh "$PHASE_SMALL"
fi
