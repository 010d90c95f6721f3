"""How a bound pass is planned (:mod:`kbv.pipeline.bound_pass`): its calls, its passes, the
request's fixed cost it allows for and the host wait it takes off the wall. The rules on what the
pass's figures allow are :mod:`kbv.checks.bound_rules`."""

from __future__ import annotations

import math

#: fixed cost of one request allowed for (ms): the pipe both ways, the worker's unpickling of the
#: request and pickling of the reply, its harness check before the loop. Measured here at
#: 0.2-0.6 ms for a 100-call request on a 2-core machine (docs/anti-cheat.md); kbv allows 2 ms.
REQUEST_ALLOW_MS = 2.0
#: cuda: the request's fixed cost allowed for is what the trusted side measured for a request of one
#: call just before the pass (the same pause, input write and resume: :attr:`BoundPass.request_allow_ms`),
#: less a claimed call where given (kbv passes none: a claim is the candidate's figure), between
#: :data:`REQUEST_ALLOW_MS` and this (ms, kbv choice). On the H200 beside a kbv run a request of two
#: calls of a 0.43 ms Triton matmul took 11-13.6 ms (docs/gpu-runs.md, 2026-12-03): the host's fixed
#: cost, not the calls'. The cap bounds what a candidate gains by
#: slowing that request: 10 ms spread over a pass's calls. On an H100 the one-call request took
#: 8.6-15.7 ms while the worker checked its whole harness before the reply, and 4.2-4.8 ms once a
#: deferred request checks only the reply path (docs/gpu-runs.md, 2026-12-06): over the cap, the
#: rest was spread over a pass's four calls as a false floor.
CUDA_REQUEST_ALLOW_MAX_MS = 10.0


#: bound passes at most (kbv choice): on cpu a second pass confirms a floor over the claim; on cuda a
#: pass is repeated while every pass so far puts the floor far over the claim (:func:`cuda_far_over`),
#: and the least floor counts: beside the cuda suite on one H200 a single pass's trusted null loop
#: measured 21.95 ms a call against ~0.1 ms alone (docs/gpu-runs.md, 2026-12-02 third session).
MAX_PASSES = {"cpu": 2, "cuda": 3}
#: on cuda the trusted null loop and each baseline loop of a pass run this many times and the least
#: wall per call counts (kbv choice: a GPU shared with other work only ever adds time; the null loop is
#: cheap, a baseline loop costs up to :data:`BOUND_BUDGET_MS` of calls a repeat).
CUDA_LOOP_REPEATS = {"null": 3, "baseline": 2}


def cuda_request_allow(one_call_wall_ms: float, claimed_ms: float) -> float:
    """:data:`CUDA_REQUEST_ALLOW_MAX_MS`'s rule: ``one_call_wall_ms - claimed_ms`` between
    :data:`REQUEST_ALLOW_MS` and :data:`CUDA_REQUEST_ALLOW_MAX_MS` (ms)."""
    if not math.isfinite(one_call_wall_ms):
        return REQUEST_ALLOW_MS
    return min(CUDA_REQUEST_ALLOW_MAX_MS, max(REQUEST_ALLOW_MS, one_call_wall_ms - max(0.0, claimed_ms)))


#: wall milliseconds of candidate calls one bound pass aims at (kbv choice: the allowance is then
#: at most a few % of the wall).
BOUND_BUDGET_MS = {"cpu": 100.0, "cuda": 60.0}
#: the fewest timed calls of a bound pass.
MIN_BOUND_CALLS = 3

#: bytes of the bound pass's own input sets at most, per device (kbv choice): fewer calls where one
#: call's inputs are large, never fewer than one set. One set of a large input keeps a verification
#: within kbv's memory bound (4·B + 1 GiB, kbv.processes.footprint; on cpu four sets of a 256 MiB
#: ReLU's input took the reference worker 0.7 GB over it, two 5 MB over). On cuda a quarter of the
#: bound's 1 GiB: with 64 MiB a 32 MiB matmul had passes of two calls, whose wall was mostly the
#: request's fixed cost (docs/gpu-runs.md, 2026-12-03).
BOUND_INPUT_BYTES = {"cpu": 64 << 20, "cuda": 256 << 20}


def max_bound_calls(in_bytes: int, device: str) -> int:
    """The most calls a bound pass can have: one input set of ``in_bytes`` (one call's inputs) per
    call within :data:`BOUND_INPUT_BYTES`, at least one. The candidate worker's output slots are
    sized to it (a slot per call: more would never be written)."""
    cap = BOUND_INPUT_BYTES.get(device, BOUND_INPUT_BYTES["cpu"])
    return max(1, cap // max(1, int(in_bytes)))


#: how much more of its time the worker's launching thread may be taken to have waited for a CPU
#: than the trusted side's own timing thread waited in the same pass's null loops (kbv choice: the
#: two threads share the host's load, not its exact timing).
HOST_WAIT_FACTOR = 2.0


def outside_wait_ms(main_wait_ms: float, own_other_cpu_ms: float, trusted_wait_ms: float = math.inf) -> float:
    """The part of the worker's main thread's run-queue wait over a request (``schedstat``'s second
    field, ms) that the rest of the machine caused: the wait less all the CPU time the worker's
    other threads and processes used meanwhile (ended ones included: they may have kept it waiting,
    and a candidate that starves its own launching thread gets nothing off), and at most
    :data:`HOST_WAIT_FACTOR` times ``trusted_wait_ms``, what the same host load cost the trusted
    side's own timing thread over as long (its null loops' share of waiting, times the request's
    wall): a wait the trusted side did not see is not the host's. At least 0.

    Why (H200, 2026-12-04, a 40-kernel batch alone): while kbv's own build pool compiled CUDA
    candidates on every core, passes of four 0.035 ms Triton calls took 15-19 ms of wall, 3 ms a
    call of host time, and two honest kernels were credited 1.4-1.6 ms (0.025x); the events the
    claim comes from hide host time (the launch cover), so a wall floor must leave it out too."""
    if not (math.isfinite(main_wait_ms) and math.isfinite(own_other_cpu_ms)) or math.isnan(trusted_wait_ms):
        return 0.0
    return max(0.0, min(main_wait_ms - max(0.0, own_other_cpu_ms), HOST_WAIT_FACTOR * max(0.0, trusted_wait_ms)))


def tree_cpu_ms(live_ms: float, processes_ms: float, group_ms: float | None, processes: int,
                tick_ms: float) -> float:
    """CPU time (ms) the worker's tree used over a request, all its threads together, the most of: the
    live threads' sum (``schedstat``, ns resolution); the jail's cgroup figure where there is one
    (``group_ms``: ``cpu.stat``, µs resolution, every process that ran in it, ended threads and
    children too); the tree's processes' ``/proc/<pid>/stat`` figures (``processes_ms``: their threads,
    ended ones too, and waited-for children; a process outside the cgroup too) in clock ticks of
    ``tick_ms``, less two ticks per process (``processes``): each reading truncates utime and stime, so
    a difference of two overshoots by up to that. Without the slack a pass's figure rounded up by a
    tick put an honest loop's floor at 0.56 ms against 0.20 ms in its other pass (10 ms over 16 calls;
    a red-team helper's evidence, 2026-12-06); a candidate gains at most the slack over a pass's calls,
    and none where the cgroup figure holds its work."""
    return max(live_ms, group_ms if group_ms is not None else 0.0,
               processes_ms - 2 * tick_ms * max(1, processes))


#: bytes of one call's inputs up to which a bound pass's calls always take fresh draws of
#: ``get_inputs()`` (:func:`fresh_draws_fit`; kbv choice: the cuda pass's own budget, within the
#: bound's 1 GiB of slack, so the draw's transient copy never matters).
FRESH_DRAW_MAX_BYTES = 256 << 20
#: milliseconds of draws one write of a bound pass's values may take (kbv choice): a pass has fewer
#: calls where ``get_inputs()`` is slow (:func:`fresh_draw_calls`), never fewer than
#: :data:`MIN_BOUND_CALLS` or than it had.
FRESH_DRAW_BUDGET_MS = 300.0


def fresh_draws_fit(in_bytes: int, out_bytes: int, timing_sets: int) -> bool:
    """Whether a bound pass's calls can take fresh draws of ``get_inputs()`` within kbv's memory bound
    (4·B + 1 GiB, B = ``in_bytes + out_bytes``, one call's): always up to :data:`FRESH_DRAW_MAX_BYTES`
    of inputs; above it, where the timing sets, the pass's one set, the call's values made again for
    its re-check and the draw's transient copy hold at most 4·B (an element-wise problem's: its
    outputs the size of its inputs). A reduction or a matrix-vector product over large inputs keeps
    the mix of two timing sets (:data:`kbv.pipeline.bound_inputs.BOUND_MIX_FRACTION`)."""
    if in_bytes <= FRESH_DRAW_MAX_BYTES:
        return True
    return (timing_sets + 3) * in_bytes <= 4 * (in_bytes + max(0, out_bytes))


def fresh_draw_calls(calls: int, draw_ms: float) -> int:
    """A bound pass's calls where each takes a fresh draw costing ``draw_ms``: at most
    :data:`FRESH_DRAW_BUDGET_MS` of draws a write, at least :data:`MIN_BOUND_CALLS` (or ``calls``
    where it is fewer)."""
    if not (draw_ms > 0 and math.isfinite(draw_ms)):
        return calls
    return max(min(calls, MIN_BOUND_CALLS), min(calls, int(FRESH_DRAW_BUDGET_MS // draw_ms)))


def same_layout(args: list, like: list) -> bool:
    """Whether ``args`` (a draw) can be written into a copy of ``like`` (a timing set): as many
    arguments, each tensor of the same shape, dtype and device, every other argument equal."""
    import torch

    if len(args) != len(like):
        return False
    for a, b in zip(args, like):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (type(a) is type(b) is torch.Tensor and a.shape == b.shape and a.dtype == b.dtype
                    and a.device == b.device):
                return False
        else:
            try:
                if type(a) is not type(b) or not bool(a == b):
                    return False
            except Exception:  # noqa: BLE001 - an argument without a plain equality: not written
                return False
    return True


def bound_calls(claimed_ms: float, slots: int, device: str) -> int:
    """Timed calls of a bound pass: :data:`BOUND_BUDGET_MS` of calls at the claimed median, between
    :data:`MIN_BOUND_CALLS` and ``slots`` (every call's outputs need a slot of their own)."""
    budget = BOUND_BUDGET_MS.get(device, 100.0)
    n = budget / claimed_ms if claimed_ms > 0 and math.isfinite(claimed_ms) else slots
    return int(max(1, min(slots, max(MIN_BOUND_CALLS, math.ceil(n)))))


__all__ = ["REQUEST_ALLOW_MS", "CUDA_REQUEST_ALLOW_MAX_MS", "MAX_PASSES", "CUDA_LOOP_REPEATS", "cuda_request_allow", "BOUND_BUDGET_MS", "MIN_BOUND_CALLS", "BOUND_INPUT_BYTES", "max_bound_calls", "HOST_WAIT_FACTOR", "outside_wait_ms", "tree_cpu_ms", "bound_calls", "FRESH_DRAW_MAX_BYTES", "FRESH_DRAW_BUDGET_MS",
           "fresh_draws_fit", "fresh_draw_calls", "same_layout"]
