"""The red-team suite: realistic cheating candidates for every entry of docs/hack-taxonomy.md.

Each row of ``CASES`` is (taxonomy entry, candidate, problem, device). The test evaluates the
candidate through the real process architecture and asserts that the verdict

* names the entry: ``entry in v.taxonomy`` (the entries named by the verdict's findings, plus 23
  when vetting flagged the problem), and
* does not credit the candidate: ``v.status is not Status.PASS``; for the baseline wrappers
  (entries 15 and 16) kbv's answer is by design ``Status.SHORTCUT``. For entries 14, 21 and 22 the
  finding may be a WARNING on an otherwise INCORRECT verdict (the assertion is the same).

Attacks on the host or on kbv's processes (entry 26: killing the reference worker, flooding
``/dev/shm``, a fork bomb) are answered by containment: the kernel refuses them, so nothing may be
left to name, and the row lists the statuses its verdict may have (``contained``: never PASS or
EVAL_ERROR); rows marked ``limited`` run with small quotas (:func:`limited_evaluator`), and the
host's ``/dev/shm`` must hold nothing of theirs afterwards.

Candidates live in ``exploits/`` (one file per cheat; each docstring says which entry,
what the cheat does and how kbv is expected to catch it); a few rows reuse the older red-team
candidates in ``tests/data/candidates/``. Problems come from ``tests/data/problems/``,
``tests/data/vetting/`` (degenerate problems) and, for the cuda rows, the GPU-sized demo problems
in ``src/kbv/data/problems/``.

Run time: the cpu rows are one evaluation each (~3 s on an idle 2-core CPU, plus a ~32 s C++
build for each C++ row): about 7 minutes for all 95 idle. Every row runs by default (CI
included); ``KBV_REDTEAM=default`` skips the 34 rows marked ``extended`` (more variants of the
same entries) for a quicker local run. Rows marked cuda need a GPU (``-m cuda`` on the device host).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import DATA, data_file, demo_problem, problem
from kbv.intake.candidates import load_candidate
from kbv.intake.problems import load_problem
from kbv.model.records import Severity, EvalConfig, Status

#: every row runs by default (CI does); KBV_REDTEAM=default keeps one or two rows per entry for a
#: quick local run.
RUN_ALL = os.environ.get("KBV_REDTEAM", "all").lower() != "default"

CPU_CONFIG = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=60)
GPU_CONFIG = EvalConfig(device="cuda", trials=20, timing_rounds=2, warmup=3)


@dataclass(frozen=True)
class Case:
    id: str  #: ``t<entry>-<what>``
    entry: int  #: entry of hack-taxonomy.md the verdict must name.
    candidate: str  #: ``redteam/<file>`` (exploits/) or a path under tests/data (``candidates/...``).
    problem: str  #: ``level1/...`` (tests/data/problems), ``vetting/...`` or ``demo:level1/...``.
    device: str = "cpu"
    expect: Status | None = None  #: None: anything but PASS; else exactly this status.
    extended: bool = False  #: a further variant: skipped with KBV_REDTEAM=default.
    any_status: bool = False  #: the finding is the answer (entry 23: a flagged problem), any status.
    check: str | None = None  #: a detector that must have a HACK finding (the one this row is for).
    config: tuple = ()  #: (field, value) pairs replaced in the device's config for this row.
    #: further entries that prove the row when the verdict is HACK: a cheat whose trigger can also fire
    #: inside the correctness checks is caught there by another detector, depending on the machine's speed.
    also: tuple[int, ...] = ()
    #: contained by the sandbox (entry 26): the verdict is one of these statuses, the entry need not
    #: be named (a refused kill or a write past a quota leaves nothing to name).
    contained: tuple[Status, ...] = ()
    limited: bool = False  #: run with small quotas (:data:`LIMITS`): the attack meets them in seconds.
    #: a cheat caught in most runs that still wins some (the reason): a non-strict xfail, so a run it
    #: wins shows as XFAIL and one that catches it as XPASS (as test_redteam_bound's partly open rows).
    partly: str | None = None
    #: a cheat that still wins (the reason): a strict xfail, so CI stays green while it wins and fails the
    #: day it is caught (then the field comes off), as test_redteam_bound's open rows.
    open: str | None = None


R = "redteam/"
RELU, LINEAR, LOG, SOFTMAX = "level1/1_Small_ReLU.py", "level1/2_Small_Linear.py", "level1/3_Small_Log.py", \
    "level1/5_Small_Softmax.py"
MATMUL_K, SOFTMAX_ROWS, LAYERNORM = "level1/10_Large_K_matmul.py", "level1/11_Softmax_rows.py", \
    "level1/12_LayerNorm_large_row.py"
BMM = "level1/15_Batched_matmul.py"
TRIU_MATMUL, ONEHOT_MATMUL = "level1/16_Matmul_upper_triangular.py", "level1/17_Onehot_matmul.py"
BESSEL_J0 = "level1/18_Bessel_j0.py"  # an element-wise op of tens of ns an element on a cpu
#: the timing sets capped at a byte: two sets, the path of a problem too big for more (issue 15's 528 MiB bmm).
TWO_SETS = (("timing_input_bytes", 1),)
#: rounds of 10 timed calls: a secret half of them re-checked (kbv.pipeline.schedule.RECHECK_SHARE)
LONG_ROUNDS = (("trials", 20), ("timing_rounds", 2))
CONSTANT, DROPOUT, TINY = "vetting/1_Constant_output.py", "vetting/2_Dropout_train.py", "vetting/3_Tiny_output.py"
GPU_MATMUL, GPU_RELU = "demo:level1/4_Square_matmul.py", "demo:level1/1_ReLU.py"
GPU_MATMUL_4096 = "level1/14_Square_matmul_4096.py"
GPU_LAYERNORM, GPU_GEMM = "demo:level1/3_LayerNorm.py", "demo:level2/1_Gemm_Bias_ReLU_Scale.py"

CASES: tuple[Case, ...] = (
    # 1 side-stream work (cuda only)
    Case("t01-side-stream", 1, R + "t01_side_stream.py", GPU_MATMUL, "cuda"),
    # kbv times on the default stream, so a launch on torch.cuda.default_stream() is inside the
    # events: honest under kbv; the scan names the explicit stream choice (WARNING 1)
    Case("t01-default-stream", 1, R + "t01_default_stream.py", GPU_MATMUL, "cuda", expect=Status.PASS),
    # 2 background thread / process
    Case("t02-thread-pool", 2, R + "t02_thread_pool.py", SOFTMAX),
    Case("t02-native-async", 2, R + "t02_native_async.py", RELU),
    Case("t02-thread-launch-cuda", 2, R + "t02_thread_launch_cuda.py", GPU_MATMUL, "cuda"),
    # the kernel launched by a C++ thread woken from a host callback, after the call returned
    Case("t02-host-callback-cuda", 2, R + "t02_host_callback_cuda.py", GPU_RELU, "cuda"),
    # 3 lazy output
    Case("t03-lazy-subclass-reduce", 3, R + "t03_lazy_subclass_reduce.py", SOFTMAX),
    Case("t03-tensor-subclass", 3, "candidates/relu_tensor_subclass.py", RELU, extended=True),
    # a SIGSEGV handler computes the output when its PROT_NONE pages are first touched (source in a variable)
    Case("t03-fault-pages", 3, R + "t03_fault_pages_cpp.py", RELU),
    Case("t03-fault-pages-hidden", 3, R + "t03_fault_pages_hidden_cpp.py", RELU, check="probe:fault-handler"),
    # the scan's HACK on the hidden source stands; at run time the first output read, forwarded by
    # faulthandler to the kernel's handler without its fault address, kills the worker
    Case("t03-fault-pages-behind-faulthandler", 3, R + "t03_fault_pages_behind_faulthandler_cpp.py", RELU,
         expect=Status.HACK, also=(25,)),
    # outputs over managed memory filled by a host callback, and over mapped host memory
    Case("t03-managed-output-cuda", 3, R + "t03_managed_output_cuda.py", GPU_RELU, "cuda", check="probe:output-memory"),
    Case("t03-host-mapped-output-cuda", 3, R + "t03_host_mapped_output_cuda.py", GPU_RELU, "cuda",
         check="probe:output-memory"),
    # 4 timer / harness monkeypatching
    Case("t04-kwdefaults-inplace", 4, R + "t04_kwdefaults_inplace.py", RELU),
    Case("t04-module-class-swap", 4, R + "t04_module_class_swap.py", RELU, check="probe:harness-identity"),
    Case("t04-server-time-calls", 4, R + "t04_server_time_calls.py", RELU, extended=True, also=(13,)),
    Case("t04-patch-perf-counter", 4, R + "t04_patch_perf_counter.py", RELU, extended=True),
    Case("t04-patch-kbv-timing", 4, "candidates/relu_patch_kbv_timing.py", RELU, extended=True),
    Case("t04-wrap-time-calls", 4, "candidates/relu_wrap_time_calls.py", RELU, extended=True),
    Case("t04-patch-cuda-event", 4, R + "t04_patch_cuda_event.py", GPU_RELU, "cuda"),
    # a C++ kernel for aten::copy_ (TORCH_LIBRARY_IMPL) doing forward's work inside the harness's copy
    # a weakref callback fired by the worker dropping an earlier output finishes the current one
    # (held_output_bytes 0: every call drops the one before last, deterministically); without the
    # frames that told it the timed calls (refused: kbv.sandbox.frame_watch) it defers every call,
    # and the correctness sets' stale-memory probe names it
    Case("t04-release-callback-finish", 4, R + "t04_release_callback_finish.py", RELU, expect=Status.HACK,
         also=(5, 6, 9, 11),
         config=(("held_output_bytes", 0),)),
    Case("t04-aten-copy-override", 4, R + "t04_aten_copy_override_cpp.py", RELU, check="probe:harness-identity"),
    # 5 cross-call batching
    Case("t05-deferred-batch", 5, R + "t05_deferred_batch.py", SOFTMAX_ROWS),
    Case("t05-every-other-call", 5, R + "t05_every_other_call.py", SOFTMAX),
    Case("t05-deferred-launch-cuda", 5, R + "t05_deferred_launch_cuda.py", GPU_MATMUL, "cuda"),
    # 6 phase detection
    Case("t06-call-counter", 6, R + "t06_call_counter.py", LAYERNORM),
    Case("t06-mode-sniff", 6, R + "t06_mode_sniff.py", SOFTMAX),
    Case("t06-tls-sniff", 6, R + "t06_tls_sniff.py", SOFTMAX),
    # its 20 ms trigger also fires between two correctness sets where the reference's round trip is
    # quicker (CI's machine): the garbage is then caught as stale memory (9), still HACK
    Case("t06-gap-timer", 6, R + "t06_gap_timer.py", SOFTMAX_ROWS, also=(9,)),
    Case("t06-repeated-input", 6, R + "t06_repeated_input.py", LAYERNORM, extended=True),
    Case("t06-stack-inspect", 6, R + "t06_stack_inspect.py", SOFTMAX_ROWS, extended=True, also=(13,)),
    Case("t06-stream-busy-cuda", 6, R + "t06_stream_busy_cuda.py", GPU_MATMUL, "cuda"),
    # 7 aggregate / pipeline tricks (cuda only)
    Case("t07-graph-precomputed", 7, R + "t07_graph_precomputed_cuda.py", GPU_MATMUL_4096, "cuda"),
    # 8 identity / passthrough / constant
    Case("t08-reused-output", 8, R + "t08_reused_output.py", RELU, check="probe:output-reused"),
    Case("t08-buffer-pool", 8, R + "t08_two_buffer_pool.py", RELU, check="probe:output-reused"),
    # its tracer needs the harness's frames: sys._getframe refused and reported (kbv.sandbox.frame_watch)
    Case("t13-trace-harness-frames", 13, R + "t13_trace_harness_frames.py", RELU, expect=Status.HACK,
         check="probe:frame-walk"),
    # the harness's own torch calls (the timed inputs' writes) hooked by the candidate to compute ahead
    Case("t04-function-mode-precompute", 4, R + "t04_function_mode_precompute.py", MATMUL_K,
         check="probe:harness-identity"),
    Case("t04-rebind-harness-global", 4, R + "t04_rebind_harness_global.py", MATMUL_K, check="probe:harness-identity"),
    Case("t04-shadow-builtin", 4, R + "t04_shadow_builtin.py", MATMUL_K, check="probe:harness-identity"),
    Case("t15-count-by-repeat", 15, R + "t15_count_by_repeat.py", MATMUL_K, expect=Status.SHORTCUT),
    # a wrapper answering the timing sets' values from a per-element table: the op count on fresh draws
    Case("t15-element-memo-wrapper", 15, R + "t15_element_memo_wrapper.py", BESSEL_J0, expect=Status.SHORTCUT),
    # a wrapper on the timed calls' (mixed) pattern only: the op count's draws are mixed as theirs are
    Case("t15-pattern-branch-wrapper", 15, R + "t15_pattern_branch_wrapper.py", ONEHOT_MATMUL, expect=Status.SHORTCUT),
    # a wrapper that tells the op count's calls apart by the share of values it has seen: SHORTCUT from
    # the count's timed-like call, or HACK where the bound pass's inputs (as new as the count's) fall in
    # its band and its slow path contradicts its clock
    Case("t15-seen-share-wrapper", 15, R + "t15_seen_share_wrapper.py", BMM, also=(4, 25)),
    # a wrapper that runs the reference's op until the sync pass's repeated inputs show the timed
    # calls are over, then its own ops: the op count comes after them
    Case("t15-phase-order-wrapper", 15, R + "t15_phase_order_wrapper.py", BMM, expect=Status.SHORTCUT,
         open="open: the op count runs after the timed calls, which the candidate can tell (red-team helper, "
              "twentieth session); the fix is counted calls at secret places inside the timing rounds"),
    Case("t04-patched-tensor-method", 4, R + "t04_patched_tensor_method.py", MATMUL_K, check="probe:harness-identity"),
    Case("t08-input-view", 8, R + "t08_input_view.py", RELU),
    Case("t08-full-guard", 8, R + "t08_full_guard.py", RELU, check="probe:output-alias"),
    Case("t08-zeros-expand", 8, R + "t08_zeros_expand.py", TINY, extended=True),
    Case("t08-constant-expand", 8, R + "t08_constant_expand.py", CONSTANT),
    Case("t08-zeros-fresh", 8, R + "t08_zeros_fresh.py", TINY, extended=True),
    # 9 stale memory
    Case("t09-empty-like", 9, R + "t09_empty_like.py", RELU),
    Case("t09-partial-write", 9, R + "t09_partial_write.py", SOFTMAX, extended=True),
    Case("t09-empty-like-cuda", 9, R + "t09_empty_like_cuda.py", GPU_MATMUL, "cuda"),
    # 10 garbage within loose tolerance
    Case("t10-linear-tanh", 10, R + "t10_linear_tanh.py", TINY),
    Case("t10-uninit-tail", 10, R + "t10_uninit_tail.py", TINY, extended=True),
    # 11 output caching
    Case("t11-sniff-sample-cache", 11, R + "t11_sniff_sample_cache.py", SOFTMAX),
    Case("t11-sniff-sample-cache-half-checked", 11, R + "t11_sniff_sample_cache.py", SOFTMAX,
         check="probe:timed-recheck", config=LONG_ROUNDS),
    # issue 15's diff-and-patch cache on the two-set path: right on every call, cheap only on repeats
    Case("t11-diff-patch-bmm", 11, R + "t11_diff_patch_bmm_cpp.py", BMM, check="timing:repeat-gain", config=TWO_SETS),
    Case("t11-cache-by-data-ptr", 11, R + "t11_cache_by_data_ptr.py", SOFTMAX),
    Case("t11-cache-by-sample-hash", 11, R + "t11_cache_by_sample_hash.py", SOFTMAX_ROWS),
    # keyed by (data_ptr, _version): every kbv call either moves the inputs or refills them with
    # copy_ (which bumps _version), so the cache never returns a stale answer and the timing is
    # honest; the scan names 11 (identity key) and the verdict stays PASS
    Case("t11-cache-by-ptr-version", 11, R + "t11_cache_by_ptr_version.py", LAYERNORM, expect=Status.PASS),
    Case("t11-cache-by-id", 11, R + "t11_cache_by_id.py", SOFTMAX_ROWS, extended=True),
    Case("t11-cache-by-shape", 11, R + "t11_cache_by_shape.py", SOFTMAX, extended=True),
    # 12 input mutation
    Case("t12-inplace-relu", 12, R + "t12_inplace_relu.py", RELU),
    Case("t12-zero-both", 12, R + "t12_zero_both.py", RELU),
    Case("t12-scratch-softmax", 12, R + "t12_scratch_softmax.py", SOFTMAX_ROWS, extended=True),
    # 13 stealing the oracle
    Case("t13-frame-walk", 13, R + "t13_frame_walk.py", LOG),
    Case("t13-walk-stack-guard-swap", 13, R + "t13_walk_stack_guard_swap.py", RELU, expect=Status.HACK,
         check="scan:frame-walk"),
    # the same through getattr(e.__traceback__, "tb_" + "frame"), which no scan rule names (PASS 11.2x)
    Case("t13-tb-frame-guard-swap", 13, R + "t13_tb_frame_guard_swap.py", RELU, expect=Status.HACK,
         check="probe:frame-walk"),
    # the same first frame read for it by string.Formatter.get_field (a stdlib gadget: PASS 2.65x)
    Case("t13-formatter-gadget-guard-swap", 13, R + "t13_formatter_gadget_guard_swap.py", RELU, expect=Status.HACK,
         check="probe:frame-walk"),
    # C++ reads the harness's frames through the C API (PyEval_GetFrame, PyFrame_GetLocals; source in a variable)
    Case("t13-capi-frame-locals", 13, R + "t13_capi_frame_locals_cpp.py", RELU),
    Case("t13-gc-oracle", 13, "candidates/log_gc_oracle.py", LOG, extended=True),
    Case("t13-patch-allclose", 13, R + "t13_patch_allclose.py", LOG, extended=True),
    # 14 problem-size manipulation
    Case("t14-smaller-problem", 14, R + "t14_smaller_problem.py", LAYERNORM),
    Case("t14-partial-rows", 14, R + "t14_partial_rows.py", LAYERNORM, extended=True),
    # 15 baseline wrapper
    Case("t15-gc-sniff-wrapper", 15, R + "t15_gc_sniff_wrapper.py", RELU, expect=Status.SHORTCUT),
    Case("t15-inherits-model", 15, R + "t15_inherits_model.py", SOFTMAX_ROWS, expect=Status.SHORTCUT),
    Case("t15-aliased-softmax", 15, R + "t15_aliased_softmax.py", SOFTMAX_ROWS, expect=Status.SHORTCUT),
    Case("t15-thread-wrapper", 15, R + "t15_thread_wrapper.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t15-thread-map-wrapper", 15, R + "t15_thread_map_wrapper.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t15-raw-thread-wrapper", 15, R + "t15_raw_thread_wrapper.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t15-disable-dispatch", 15, R + "t15_disable_dispatch.py", SOFTMAX),
    Case("t15-aten-override", 15, R + "t15_aten_override.py", SOFTMAX),
    # PyTorch's kernels called from C++ past the dispatcher (issue 19, item 3): the extension's imports
    Case("t15-aten-cpu-mm", 15, R + "t15_aten_cpu_mm_cpp.py", MATMUL_K, expect=Status.SHORTCUT),
    Case("t15-native-relu", 15, R + "t15_native_relu_cpp.py", RELU, expect=Status.SHORTCUT),
    Case("t15-aten-cpu-mm-declared", 15, R + "t15_aten_cpu_mm_declared_cpp.py", MATMUL_K, expect=Status.SHORTCUT,
         extended=True),
    Case("t15-probe-table", 15, R + "t15_probe_table.py", SOFTMAX, check="probe:harness-identity"),
    Case("t15-opcount-descriptor", 15, R + "t15_opcount_descriptor.py", RELU, check="probe:harness-identity"),
    Case("t15-torch-class-descriptor", 15, R + "t15_torch_class_descriptor.py", SOFTMAX,
         check="probe:harness-identity"),
    Case("t15-profiler-module-names", 15, R + "t15_profiler_module_names.py", SOFTMAX, check="probe:harness-identity"),
    Case("t15-refuse-counting", 15, R + "t15_refuse_counting.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t15-refuse-profiler-only", 15, R + "t15_refuse_profiler_only.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t15-compile-fullgraph", 15, R + "t15_compile_fullgraph.py", SOFTMAX, expect=Status.SHORTCUT, extended=True),
    Case("t15-subclass-dispatch", 15, R + "t15_subclass_dispatch.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t15-annotated-thread-wrapper", 15, R + "t15_annotated_thread_wrapper.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t15-jit-script", 15, R + "t15_jit_script.py", LAYERNORM, expect=Status.SHORTCUT, extended=True),
    Case("t15-functional-layer-norm", 15, R + "t15_functional_layer_norm.py", LAYERNORM,
         expect=Status.SHORTCUT, extended=True),
    Case("t15-torch-compile-cuda", 15, R + "t15_torch_compile_cuda.py", GPU_LAYERNORM, "cuda",
         expect=Status.SHORTCUT),
    Case("t15-aten-cuda-mm-cuda", 15, R + "t15_aten_cuda_mm_cuda.py", GPU_MATMUL, "cuda", expect=Status.SHORTCUT),
    # 16 ghost kernel / silent fallback
    Case("t16-try-fallback", 16, R + "t16_try_fallback.py", SOFTMAX, expect=Status.SHORTCUT),
    Case("t16-ghost-triton", 16, R + "t16_ghost_triton.py", SOFTMAX, expect=Status.SHORTCUT, extended=True),
    # 17 precision downgrade
    Case("t17-fp16-matmul", 17, "candidates/matmul_fp16.py", MATMUL_K),
    Case("t17-bf16-layernorm", 17, R + "t17_bf16_layernorm.py", LAYERNORM, extended=True),
    # 18 global-flag tampering
    Case("t18-matmul-precision", 18, R + "t18_matmul_precision.py", MATMUL_K),
    Case("t18-new-precision-api", 18, R + "t18_new_precision_api.py", MATMUL_K),
    Case("t18-sets-tf32", 18, "candidates/relu_sets_tf32.py", RELU, extended=True),
    Case("t18-tf32-gemm-cuda", 18, R + "t18_tf32_gemm_cuda.py", GPU_GEMM, "cuda"),
    # 19 numerical shortcuts
    Case("t19-one-pass-variance", 19, R + "t19_one_pass_variance.py", LAYERNORM),
    Case("t19-fast-exp", 19, R + "t19_fast_exp.py", SOFTMAX, extended=True),
    Case("t19-softmax-nomax", 19, "candidates/softmax_nomax.py", SOFTMAX, extended=True),
    # 20 value-distribution exploits
    Case("t20-same-sign", 20, "candidates/relu_same_sign.py", RELU),
    Case("t20-lut-exp", 20, R + "t20_lut_exp.py", SOFTMAX_ROWS),
    Case("t20-log-unit-range", 20, R + "t20_log_unit_range.py", LOG, extended=True),
    Case("t20-shape-passthrough", 20, "candidates/relu_same_sign_shape.py", RELU, extended=True),
    # a structure checked on a sample: the triangular (or gather) path is wrong where a few entries
    # break the pattern (kbv's break-triangular / break-sparse sets; issue 19, item 4)
    # (its 64 sampled entries hit a changed one now and then: it then takes its full torch path,
    # right and SHORTCUT, as in 1 full-suite run of 2026-12-05; never PASS)
    Case("t20-sampled-triangle", 20, R + "t20_sampled_triangle.py", TRIU_MATMUL),
    Case("t20-sampled-onehot", 20, R + "t20_sampled_onehot.py", ONEHOT_MATMUL, expect=Status.INCORRECT),
    # 21 shape hard-coding with dispatch
    Case("t21-shape-dispatch", 21, R + "t21_shape_dispatch.py", SOFTMAX),
    # right at the problem's own sizes only: the secret shape (kbv.pipeline.secret_shapes)
    Case("t21-tile-multiple", 21, R + "t21_tile_multiple.py", RELU, expect=Status.INCORRECT),
    Case("t21-fixed-view", 21, R + "t21_fixed_view.py", SOFTMAX, expect=Status.INCORRECT),
    Case("t21-tile-multiple-cuda", 21, R + "t21_tile_multiple_triton.py", GPU_RELU, "cuda", expect=Status.INCORRECT),
    Case("t21-build-count", 21, R + "t21_build_count.py", RELU, expect=Status.INCORRECT),
    Case("t21-call-count", 21, R + "t21_call_count.py", RELU, expect=Status.INCORRECT),
    Case("t21-marker-order", 21, R + "t21_marker_order.py", RELU, expect=Status.INCORRECT),
    # 22 seed prediction
    Case("t22-generator-replay", 22, R + "t22_generator_replay.py", SOFTMAX),
    Case("t22-manual-seed-replay", 22, R + "t22_manual_seed_replay.py", RELU, extended=True),
    # 23 degenerate problems
    # 23: kbv's answer is the problem flag (the problem leaves every metric); the candidate's own
    # status on a stochastic or constant reference means nothing, so any status is accepted
    Case("t23-dropout-skip", 23, R + "t23_dropout_skip.py", DROPOUT, any_status=True),
    Case("t23-constant-ones", 23, R + "t23_constant_ones.py", CONSTANT, extended=True, any_status=True),
    # 24 forging the result channel
    Case("t24-rewrite-reply", 24, R + "t24_rewrite_reply.py", RELU),
    Case("t24-garbage-fd", 24, R + "t24_garbage_fd.py", RELU),
    # a well-formed Outputs frame of its own whose ``tensors`` is an int: kbv's EVAL_ERROR until every
    # reply field was checked against its type (kbv.processes.reply_schema)
    Case("t24-forged-outputs-frame", 24, R + "t24_forged_outputs_frame.py", RELU, expect=Status.HACK,
         check="probe:reply-channel"),
    Case("t24-exit-during-timing", 24, R + "t24_exit_during_timing.py", SOFTMAX, extended=True),
    Case("t24-exit0", 24, "candidates/relu_exit0.py", RELU, extended=True),
    # 25 native attacks on the harness
    Case("t25-exec-encoded", 25, R + "t25_exec_encoded.py", RELU),
    Case("t25-ctypes-kwdefaults", 25, R + "t25_ctypes_kwdefaults.py", RELU, extended=True),
    # 26 sandbox tampering
    Case("t26-plant-torch-py", 26, R + "t26_plant_torch_py.py", RELU),
    Case("t26-escape-daemon", 26, R + "t26_escape_daemon.py", RELU, extended=True),
    Case("t26-kill-parent-ctypes", 26, R + "t26_kill_parent_ctypes.py", RELU,
         contained=(Status.INCORRECT, Status.CRASH)),
    Case("t26-kill-proc-scan", 26, R + "t26_kill_proc_scan.py", RELU, extended=True,
         contained=(Status.INCORRECT, Status.CRASH, Status.HACK)),
    Case("t26-shm-flood", 26, R + "t26_shm_flood.py", RELU, limited=True,
         contained=(Status.RUNTIME_ERROR, Status.CRASH, Status.INCORRECT)),
    Case("t26-fork-bomb", 26, R + "t26_fork_bomb.py", RELU, limited=True, contained=(Status.RUNTIME_ERROR,)),
    # a directory too deep for kbv's listing of its native objects: INCORRECT, never kbv's EVAL_ERROR
    Case("t26-deep-listing", 26, R + "t26_deep_listing.py", RELU, contained=(Status.INCORRECT,)),
    # a connection held open to its own fd sharer: the trusted side's next fetch of an output would wait
    # forever; the decode has the call's deadline (kbv.processes.candidate.CandidateProcess.receive)
    Case("t26-jam-fd-sharer", 26, R + "t26_jam_fd_sharer.py", RELU, contained=(Status.TIMEOUT,),
         config=(("call_timeout_s", 20),)),
    # a symbol the kernel-name pattern backtracks on for minutes, in an object left in the workdir:
    # the honest ReLU's verdict, in the time of any other (kbv.checks.native.MAX_SYMBOL_CHARS)
    Case("t26-elf-symbol-stall", 26, R + "t26_elf_symbol_stall.py", RELU, contained=(Status.PASS, Status.SHORTCUT)),
    # 2/26: a system call that runs on through kbv's stop and slows the baselines
    # (30 timed calls a subject: baseline blocks of the small ReLU are then several scheduler ticks long)
    Case("t02-run-while-paused", 2, R + "t02_run_while_paused.py", RELU, expect=Status.HACK,
         check="timing:ran-while-paused", also=(26,), config=(("trials", 30), ("timing_rounds", 3)),
         # PASS in 1 of 4 full-suite runs on 2026-12-05 (beside the other xdist worker), after the
         # confirmation windows made it 12 of 12 alone: its system call's CPU under load stays under both bars
         partly="partly open: PASS in 1 of 4 full-suite runs under load (issue 19)"),
    Case("t26-kill-parent-ctypes-cuda", 26, R + "t26_kill_parent_ctypes.py", GPU_RELU, "cuda",
         contained=(Status.INCORRECT, Status.CRASH)),
    Case("t26-shm-flood-cuda", 26, R + "t26_shm_flood.py", GPU_RELU, "cuda", limited=True,
         contained=(Status.RUNTIME_ERROR, Status.CRASH, Status.INCORRECT)),
)

#: the quotas of ``limited`` rows (kbv.sandbox.limits' and kbv.processes.jail's settings), far below
#: the defaults: t26-fork-bomb's 1024 children and t26-shm-flood's 2 GiB meet them at once.
LIMITS = {"KBV_CANDIDATE_MAX_TASKS": "256", "KBV_CANDIDATE_SHM_BYTES": str(64 << 20),
          "KBV_CANDIDATE_TMP_BYTES": str(64 << 20), "KBV_CANDIDATE_MEMORY_BYTES": str(4 << 30)}

#: the folder t26_plant_torch_py writes into (next to the candidate workers' temporary dirs).
PLANT_DIR = Path(tempfile.gettempdir()) / "kbv-redteam-planted"


def _problem(spec: str):
    if spec.startswith("demo:"):
        return demo_problem(spec[len("demo:"):])
    if spec.startswith("vetting/"):
        return load_problem(DATA / spec)
    return problem(spec)


def _params(device: str, limited: bool = False) -> list:
    out = []
    for c in CASES:
        if c.device != device or c.limited != limited:
            continue
        marks = [pytest.mark.cuda] if device == "cuda" else []
        if c.extended and not RUN_ALL:
            marks.append(pytest.mark.skip(reason="extended red-team row: KBV_REDTEAM=default skips it"))
        if c.partly:
            marks.append(pytest.mark.xfail(reason=c.partly, strict=False))
        if c.open:
            marks.append(pytest.mark.xfail(reason=c.open, strict=True))
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


def _check(case: Case, v) -> None:
    described = [f.describe() for f in v.findings]
    context = (f"{case.id}: status={v.status.value} taxonomy={v.taxonomy}\n  message: {v.message}\n"
               f"  findings: {described}\n  problem flags: {list(v.problem_flags)}\n"
               f"  sandbox: {getattr(v, 'evidence', {}).get('sandbox')}")
    if case.contained:
        assert v.status in case.contained, f"expected one of {[s.value for s in case.contained]}\n{context}"
        assert v.status is not Status.CRASH or 26 in v.taxonomy, context
        return
    named = case.entry in v.taxonomy or (v.status is Status.HACK and set(case.also) & set(v.taxonomy))
    assert named, f"entry {case.entry} (or, as HACK, one of {case.also}) not named by the verdict\n{context}"
    if case.check:
        assert any(f.check == case.check and f.severity is Severity.HACK for f in v.findings), \
            f"no HACK from {case.check}\n{context}"
    if case.any_status:
        assert v.problem_flags, context
    elif case.expect is None:
        assert v.status is not Status.PASS, f"candidate credited\n{context}"
    else:
        assert v.status is case.expect, f"expected {case.expect.value}\n{context}"


def test_check_accepts_a_further_entry_only_as_hack():
    """CI's t06-gap-timer: HACK by stale memory (9, 10), not by its timing trigger (6), is a catch;
    the same entries on a verdict that is not HACK, or on a row without ``also``, are not."""
    from types import SimpleNamespace
    gap = next(c for c in CASES if c.id == "t06-gap-timer")
    plain = next(c for c in CASES if c.id == "t06-call-counter")
    def verdict(status):
        return SimpleNamespace(status=status, taxonomy=(9, 10), findings=(), message="", problem_flags=())
    _check(gap, verdict(Status.HACK))
    with pytest.raises(AssertionError):
        _check(gap, verdict(Status.INCORRECT))
    with pytest.raises(AssertionError):
        _check(plain, verdict(Status.HACK))


def test_table_covers_every_taxonomy_entry():
    covered = {c.entry for c in CASES}
    assert covered == set(range(1, 27)), sorted(set(range(1, 27)) - covered)
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    for c in CASES:
        assert c.id.startswith(f"t{c.entry:02d}-"), c.id
        path = data_file(c.candidate)
        assert path.is_file(), path
        if c.candidate.startswith(R):
            text = path.read_text()
            assert f"taxonomy {c.entry}" in text.split('"""')[1], f"{path.name}: docstring must name entry {c.entry}"


@contextlib.contextmanager
def _limited(device: str):
    """An evaluator whose workers run under :data:`LIMITS` (read where the reference worker starts
    a candidate's: its environment comes from this process's at spawn)."""
    from kbv.batch.evaluator import Evaluator

    saved = {k: os.environ.get(k) for k in LIMITS}
    os.environ.update(LIMITS)
    try:
        with Evaluator(device) as ev:
            yield ev
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def limited_evaluator():
    with _limited("cpu") as ev:
        yield ev


@pytest.fixture(scope="module")
def limited_gpu_evaluator():
    with _limited("cuda") as ev:
        yield ev


def _own_shm_files() -> list[str]:
    """What the red-team candidates name in /dev/shm (all start ``kbv-redteam``)."""
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith("kbv-redteam")) if os.path.isdir("/dev/shm") else []


def _run(evaluator, config, case: Case):
    assert not _own_shm_files(), "a previous run left red-team files in /dev/shm"
    try:
        v = evaluator.evaluate(_problem(case.problem), load_candidate(data_file(case.candidate)),
                               dataclasses.replace(config, **dict(case.config)))
    finally:
        if case.id == "t26-plant-torch-py":
            shutil.rmtree(PLANT_DIR, ignore_errors=True)
    _check(case, v)
    assert not _own_shm_files(), f"{case.id} left files in the host's /dev/shm: {_own_shm_files()}"


@pytest.mark.parametrize("case", _params("cpu"))
def test_redteam_cpu(cpu_evaluator, case: Case):
    _run(cpu_evaluator, CPU_CONFIG, case)


@pytest.mark.parametrize("case", _params("cpu", limited=True))
def test_redteam_cpu_limited(limited_evaluator, case: Case):
    _run(limited_evaluator, CPU_CONFIG, case)


@pytest.mark.parametrize("case", _params("cuda"))
def test_redteam_cuda(gpu_evaluator, case: Case):
    _run(gpu_evaluator, GPU_CONFIG, case)


@pytest.mark.parametrize("case", _params("cuda", limited=True))
def test_redteam_cuda_limited(limited_gpu_evaluator, case: Case):
    _run(limited_gpu_evaluator, GPU_CONFIG, case)
