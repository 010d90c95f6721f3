#!/usr/bin/env bash
# The trusted side on the H200 (goal: the cuda suite 0 failed beside a run, >= 90 % of rerun speedups inside
# the first run's intervals, the bound's precision, the serve lane busy), in three foreground device calls made back to back on one warm machine
# (carry [".whl"]; each call's logs go straight to $OUT; LIMIT seconds each, default 560):
#   bash bench/gpu_trusted_side.sh alone   # one job profiled (bench/job_profile.py), the 40-kernel batch alone
#                                     # (rerun_coverage first), bytes per job on cuda (bench/bytes_per_job.py), the bound's precision, two honest verifications
#   bash bench/gpu_trusted_side.sh beside  # the same batch again beside the cuda suite's four groups (BATCH=second)
#   bash bench/gpu_trusted_side.sh rest    # the serve GPU lane under eight clients, then the red-team group alone
#   bash bench/gpu_trusted_side.sh suite   # the cuda suite's groups at once (no batch), issue 24's diagnostics
#                                     # rows beside them, then `kbv profile` on the demo ReLU (README's example)
#   bash bench/gpu_trusted_side.sh focus   # the same without the rest group (a short call)
#   bash bench/gpu_trusted_side.sh diag    # issue 24's diagnostics tests and `kbv profile` alone
#   bash bench/gpu_trusted_side.sh verify  # the judging cuda rows (red team, honest, gpu) and bytes per job on cuda
#   bash bench/gpu_trusted_side.sh first   # Triton's first call in a fresh process (cold, warm cache), then as bytes
#   bash bench/gpu_trusted_side.sh full    # TF32 candidates on the matmuls whose device peak went over, then level 1
#   bash bench/gpu_trusted_side.sh h100    # on an 80 GB card: the judging rows beside TF32 matmuls 9 and 11, bytes, level 1 (FULL_PIDS)
#   bash bench/gpu_trusted_side.sh bytes   # bytes per job at full size (6 GiB ReLU, 4096^2 matmul), then level 1 at full size
#   bash bench/gpu_trusted_side.sh paths   # a short call: the gpu, footprint, leak and honest cuda rows, then level 1 (FULL_PIDS)
#   bash bench/gpu_trusted_side.sh gap     # the 40-kernel batch alone (gap between verdicts), one job profiled
# Then, here: `PYTHONPATH=src python3 bench/rerun_coverage.py compare DIR` on the two stores that came back.
T0=$(date +%s)  # LIMIT counts the wheels' install too
[ -d .whl ] && [ ! -d /tmp/site/fastapi ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:/tmp/site KBV_CACHE_DIR=/tmp/kbvcache PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"; LIMIT=${LIMIT:-560}; t0=$T0
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
# the judging cuda rows, three groups at once, each within $1 seconds
judging_rows() {
  local py="timeout $1 python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider" p1 p2 p3
  $py tests/e2e/test_redteam.py tests/e2e/test_redteam_bound.py > "$O/redteam.log" 2>&1 & p1=$!
  $py tests/e2e/test_honest.py > "$O/honest.log" 2>&1 & p2=$!
  $py tests/e2e/test_gpu.py tests/e2e/test_gpu_policy.py tests/pipeline/test_warm_call.py tests/sandbox/test_triton_warm.py tests/pipeline/test_reference_aside.py tests/processes/test_footprint.py tests/e2e/test_memory_growth.py \
    > "$O/gpu.log" 2>&1 & p3=$!
  wait $p1; wait $p2; wait $p3
}
# a request's parts inside a cuda worker (bench/worker_request_costs.py)
worker_parts() {
  timeout 90 python3 bench/worker_request_costs.py --device cuda --json "$O/worker_costs.json" > "$O/worker_costs.log" 2>&1
}
# the 40-kernel batch (rerun_coverage first) with the request trace, stopped within $1 seconds, and its summary
traced_batch() {
  KBV_REQUEST_TRACE="$O/trace.jsonl" timeout "$1" python3 bench/rerun_coverage.py first /tmp/w \
    --deadline-s $(( $1 - 15 )) > "$O/batch_first.log" 2>&1
  cp /tmp/w/first.db "$O/" 2>/dev/null
  python3 bench/request_trace.py "$O/trace.jsonl" --json "$O/trace_summary.json" > /dev/null 2>&1
}
# bytes per job on cuda at full size (bench/bytes_per_job.py), each run within $1 seconds
full_bytes() {
  timeout "$1" python3 bench/bytes_per_job.py --device cuda --sites --problem bench/problems/level1/19_ReLU_full.py \
    --candidate src/kbv/data/candidates/relu_cuda.py --json "$O/bytes_relu_full.json" > "$O/bytes_relu_full.log" 2>&1
  timeout "$1" python3 bench/bytes_per_job.py --device cuda --sites \
    --problem bench/kbv-verified/KernelBench/level1/1_Square_matrix_multiplication_.py \
    --candidate src/kbv/data/candidates/matmul_tf32.py --json "$O/bytes_matmul_full.json" > "$O/bytes_matmul_full.log" 2>&1
}
# KernelBench-Verified's level 1 at full size with the request trace until the limit (bench/kbv-verified carried;
# FULL_PIDS picks the problems, default 1-100)
full_level1() {
  KBV_REQUEST_TRACE="$O/full_trace.jsonl" timeout $(( $(left) - 5 )) python3 bench/full_size.py --device cuda \
    --pids "${FULL_PIDS:-1-100}" --deadline-s $(( $(left) - 30 )) --store /tmp/full.db --json "$O/full_size.json" > "$O/full_size.log" 2>&1
  python3 bench/request_trace.py "$O/full_trace.jsonl" --skip 0 --json "$O/full_trace_summary.json" > /dev/null 2>&1
  # FULL_PIDS_NEXT: the problems to go on with in the time left (the same store: those done are not run again)
  if [ -n "${FULL_PIDS_NEXT:-}" ] && [ "$(left)" -gt 90 ]; then
    timeout $(( $(left) - 5 )) python3 bench/full_size.py --device cuda --pids "$FULL_PIDS_NEXT" \
      --deadline-s $(( $(left) - 30 )) --store /tmp/full.db --json "$O/full_size_next.json" > "$O/full_size_next.log" 2>&1
  fi
}
case "$1" in
  alone)  # two honest evaluations first (relu_cuda, softmax_triton): if either is not PASS, the honest and gpu
           # groups run for the diagnosis instead of the batch; then one job profiled and the batch alone
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    git log --oneline -1 > "$O/head.txt" 2>&1
    ok=1
    for pc in "1_ReLU.py relu_cuda.py" "2_Softmax.py softmax_triton.py"; do
      set -- $pc
      timeout 150 python3 -m kbv eval "src/kbv/data/problems/level1/$1" "src/kbv/data/candidates/$2" --device cuda \
        --json "$O/gate_$2.json" > "$O/gate_$2.log" 2>&1
      grep -q '"status": "PASS"' "$O/gate_$2.json" 2>/dev/null || ok=0
    done
    if [ $ok = 0 ]; then
      py="timeout $(( $(left) - 15 )) python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider"
      $py tests/e2e/test_honest.py > "$O/honest.log" 2>&1 & p1=$!
      $py tests/e2e/test_gpu.py tests/e2e/test_gpu_policy.py > "$O/gpu.log" 2>&1 & p2=$!
      wait $p1; wait $p2
    else
      timeout 60 python3 bench/job_profile.py --json "$O/job_profile.json" > "$O/job_profile.log" 2>&1
      timeout $(( $(left) - 10 )) python3 bench/rerun_coverage.py first /tmp/w --deadline-s $(( $(left) - 25 )) \
        > "$O/batch_first.log" 2>&1
      cp /tmp/w/first.db "$O/" 2>/dev/null
    fi ;;
  beside)  # the same batch again (fresh processes, builds cached) beside the cuda suite's four groups
    BATCH=second LIMIT=$(( $(left) - 10 )) bash bench/gpu_suite_beside.sh ;;
  rest)
    py="python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider"
    timeout $(( $(left) / 3 )) $py "tests/serve/test_serve.py::test_gpu_lane_stays_busy_under_eight_clients" > "$O/serve_gpu.log" 2>&1
    timeout $(( $(left) - 5 )) $py tests/e2e/test_redteam.py tests/e2e/test_redteam_bound.py > "$O/redteam_alone.log" 2>&1 ;;
  suite)
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    { command -v compute-sanitizer ncu; ls /usr/local/cuda/bin 2>&1 | grep -E "sanitizer|ncu"; } > "$O/tools.txt" 2>&1
    py="timeout $(( $(left) - 25 )) python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider"
    $py tests/e2e/test_redteam.py tests/e2e/test_redteam_bound.py > "$O/redteam.log" 2>&1 & p1=$!
    $py tests/e2e/test_honest.py > "$O/honest.log" 2>&1 & p2=$!
    $py tests/e2e/test_gpu.py tests/e2e/test_gpu_policy.py tests/pipeline/test_warm_call.py tests/sandbox/test_triton_warm.py tests/pipeline/test_reference_aside.py tests/processes/test_footprint.py \
    > "$O/gpu.log" 2>&1 & p3=$!
    $py tests/ --ignore=tests/e2e/test_redteam.py --ignore=tests/e2e/test_redteam_bound.py --ignore=tests/e2e/test_honest.py \
      --ignore=tests/e2e/test_gpu.py --ignore=tests/e2e/test_gpu_policy.py --ignore=tests/e2e/test_diagnostics_gpu.py \
      --deselect tests/serve/test_serve.py::test_gpu_lane_stays_busy_under_eight_clients > "$O/rest.log" 2>&1 & p4=$!
    { $py -s tests/e2e/test_diagnostics_gpu.py > "$O/diagnostics.log" 2>&1
      timeout 200 python3 -m kbv profile src/kbv/data/problems/level1/1_ReLU.py src/kbv/data/candidates/relu_cuda.py \
        --device cuda --json "$O/profile.json" > "$O/profile_cli.log" 2>&1; } & p5=$!
    for p in $p1 $p2 $p3 $p4 $p5; do wait $p; done ;;
  focus)  # suite without its rest group, for a short device call: issue 20's, 23's and 24's cuda rows
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    { command -v compute-sanitizer ncu; ls /usr/local/cuda/bin 2>&1 | grep -E "sanitizer|ncu"; } > "$O/tools.txt" 2>&1
    py="timeout $(( $(left) - 20 )) python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider"
    $py tests/e2e/test_redteam.py tests/e2e/test_redteam_bound.py > "$O/redteam.log" 2>&1 & p1=$!
    $py tests/e2e/test_honest.py tests/e2e/test_declared_workloads.py > "$O/honest.log" 2>&1 & p2=$!
    $py tests/e2e/test_gpu.py tests/e2e/test_gpu_policy.py tests/e2e/test_memory_growth.py > "$O/gpu.log" 2>&1 & p3=$!
    { $py -s tests/e2e/test_diagnostics_gpu.py > "$O/diagnostics.log" 2>&1
      timeout 120 python3 -m kbv profile src/kbv/data/problems/level1/1_ReLU.py src/kbv/data/candidates/relu_cuda.py \
        --device cuda --json "$O/profile.json" > "$O/profile_cli.log" 2>&1; } & p5=$!
    for p in $p1 $p2 $p3 $p5; do wait $p; done ;;
  diag)  # issue 24's rows alone: the diagnostics tests, `kbv profile` (README), one --sanitize of each tool's cost
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    timeout $(( $(left) - 150 )) python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider -s \
      tests/e2e/test_diagnostics_gpu.py > "$O/diagnostics.log" 2>&1
    timeout $(( $(left) - 20 )) python3 -m kbv profile src/kbv/data/problems/level1/1_ReLU.py \
      src/kbv/data/candidates/relu_cuda.py --device cuda --json "$O/profile.json" > "$O/profile_cli.log" 2>&1 ;;
  verify)  # after a change to the judging passes: the cuda rows that judge, and the bytes per job on cuda
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    judging_rows "$(( $(left) - 15 ))" & p1=$!
    { timeout 60 python3 bench/bytes_per_job.py --device cuda --sites --candidate src/kbv/data/candidates/relu_cuda.py \
        --json "$O/bytes_relu_cuda.json" > "$O/bytes_relu_cuda.log" 2>&1
      timeout 60 python3 bench/bytes_per_job.py --device cuda --sites --problem src/kbv/data/problems/level1/4_Square_matmul.py \
        --candidate src/kbv/data/candidates/matmul_tf32.py --json "$O/bytes_matmul.json" > "$O/bytes_matmul.log" 2>&1; } & p4=$!
    wait $p1; wait $p4 ;;
  paths)  # a short call after changes to the memory paths: the gpu group with the footprint and leak rows beside
          # the honest group (no red-team group), then level 1 at full size (FULL_PIDS) until the limit
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    py="timeout $(( $(left) > 360 ? 240 : $(left) / 2 )) python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider"
    $py tests/e2e/test_honest.py > "$O/honest.log" 2>&1 & p1=$!
    $py tests/e2e/test_gpu.py tests/e2e/test_gpu_policy.py tests/processes/test_footprint.py tests/e2e/test_memory_growth.py \
      > "$O/gpu.log" 2>&1 & p2=$!
    wait $p1; wait $p2
    full_level1 ;;
  rows)  # after a change to a judging path: the judging cuda rows beside the bytes per job of
        # KernelBench-Verified's 4096^2 matmul, then level 1 at full size until the limit (/tmp/full.db resumes)
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    judging_rows "$(( $(left) > 520 ? 400 : $(left) * 2 / 3 ))" & p1=$!
    timeout 90 python3 bench/bytes_per_job.py --device cuda --sites \
      --problem bench/kbv-verified/KernelBench/level1/1_Square_matrix_multiplication_.py \
      --candidate src/kbv/data/candidates/matmul_tf32.py --json "$O/bytes_matmul_full.json" > "$O/bytes_matmul_full.log" 2>&1
    wait $p1
    full_level1 ;;
  trace)  # the 40-kernel batch alone, cold, with the request trace (bench/request_trace.py: where each job's wall
          # goes), then the worker's parts and the judging cuda rows (as verify) on the same machine
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    traced_batch "$(( $(left) - 230 ))"
    worker_parts
    judging_rows "$(( $(left) - 10 ))" ;;
  short)  # one call for what is left of a device budget: the worker's parts, the judging cuda rows (as verify),
          # then the 40-kernel batch with the request trace until the limit
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    worker_parts
    judging_rows "$(( $(left) > 500 ? 240 : $(left) * 3 / 5 ))"
    traced_batch "$(( $(left) - 5 ))" ;;
  mix)  # one call for a short device budget: the worker's parts, the judging cuda rows (as verify), the bytes
        # per job at full size (the 6 GiB ReLU, KernelBench-Verified's 4096^2 matmul), then
        # KernelBench-Verified's level 1 at full size with the request trace until the limit
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    worker_parts
    judging_rows "$(( $(left) > 500 ? 200 : $(left) / 2 ))"
    full_bytes 90
    full_level1 ;;
  first)  # where a Triton candidate's first call goes (bench/triton_first_call.py), then as `bytes`
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    timeout 120 python3 bench/triton_first_call.py --json "$O/triton_first_call.json" > "$O/triton_first_call.log" 2>&1
    full_bytes 120
    full_level1 ;;
  full)  # the fused passes' cuda rows (tests/reference/test_fused.py), the matmul problems whose reference device peak
         # went over 4·B + 1 GiB, with TF32 candidates (every set through the fp64 oracle), then
         # KernelBench-Verified's level 1 at full size until the limit
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    timeout 90 python3 -m pytest -m cuda -q -rA --tb=short -p no:cacheprovider tests/reference/test_fused.py \
      > "$O/fused.log" 2>&1
    timeout "${TF32_S:-240}" python3 bench/full_size.py --device cuda --tf32 --pids "${TF32_PIDS:-9,11}" \
      --deadline-s $(( ${TF32_S:-240} - 20 )) --store /tmp/tf32.db --json "$O/full_tf32.json" > "$O/full_tf32.log" 2>&1
    full_level1 ;;
  h100)  # what an 80 GB card can take of issue 21's full size: the judging cuda rows beside the matmul problems
         # whose reference device peak went over (TF32 candidates, TF32_PIDS default 9,11: 4, 6 and 7 ran in earlier sessions), then the
         # 4096^2 matmul's bytes per job, then level 1 at full size until the limit
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    judging_rows "$(( $(left) > 480 ? 360 : $(left) * 2 / 3 ))" & p1=$!
    timeout "${TF32_S:-240}" python3 bench/full_size.py --device cuda --tf32 --pids "${TF32_PIDS:-9,11}" \
      --deadline-s $(( ${TF32_S:-240} - 20 )) --store /tmp/tf32.db --json "$O/full_tf32.json" > "$O/full_tf32.log" 2>&1
    wait $p1
    timeout 90 python3 bench/bytes_per_job.py --device cuda --sites \
      --problem bench/kbv-verified/KernelBench/level1/1_Square_matrix_multiplication_.py \
      --candidate src/kbv/data/candidates/matmul_tf32.py --json "$O/bytes_matmul_full.json" > "$O/bytes_matmul_full.log" 2>&1
    full_level1 ;;
  bytes)  # the bytes per job at full size alone, then KernelBench-Verified's level 1 at full size
    nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
    full_bytes 150
    full_level1 ;;
  gap)  # the bound's precision alone, bytes per job on cuda, then the batch a third time alone, builds cached
        # (the gap between verdicts; a third run for the coverage), and one job profiled
    timeout 150 python3 bench/bound_precision.py --device cuda --json "$O/bound_precision.json" > "$O/bound_precision.log" 2>&1
    timeout 60 python3 bench/bytes_per_job.py --device cuda --sites --candidate src/kbv/data/candidates/relu_cuda.py \
      --json "$O/bytes_relu_cuda.json" > "$O/bytes_relu_cuda.log" 2>&1
    mkdir -p /tmp/w3 && cp -r /tmp/w/cache /tmp/w3/ 2>/dev/null
    timeout $(( $(left) - 10 )) python3 bench/rerun_coverage.py first /tmp/w3 --deadline-s $(( $(left) - 25 )) \
      > "$O/batch_third.log" 2>&1
    cp /tmp/w3/first.db "$O/third.db" 2>/dev/null ;;
  full1|full2)  # issue 21's full size: KernelBench-Verified level 1 with hidden tests (bench/kbv-verified carried),
                # problems 1-50 then 51-100, one store resumed across the two calls when the machine stays warm
    p=$([ "$1" = full1 ] && echo 1-50 || echo 51-100)
    timeout $(( $(left) - 5 )) python3 bench/full_size.py --device cuda --pids "$p" --deadline-s $(( $(left) - 30 )) \
      --store /tmp/full.db --json "$O/full_size.json" > "$O/full_size.log" 2>&1 ;;
  *) echo "usage: $0 alone|beside|rest|suite|focus|diag|verify|trace|short|mix|bytes|gap|h100|full1|full2" >&2; exit 2 ;;
esac
echo "$1: wall $(( $(date +%s) - t0 )) s" >> "$O/summary.txt"
for f in "$O"/*.log; do echo "== $f: $(grep -E "passed|failed|error" "$f" | tail -1 | cut -c1-200)"; done
