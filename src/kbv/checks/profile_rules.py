"""Rules on what the op counts, the kernel profile and the candidate's native objects show
(:mod:`kbv.pipeline.profile_stage`): the reference's own ops re-run (taxonomy 15, 16), kernels registered
for torch's ops or PyTorch's kernels called past the dispatcher, a forward that refuses to be
counted, a profiled call under its DRAM floor (taxonomy 7). Pure functions of the readings."""

from __future__ import annotations

from typing import Sequence

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity

#: taxonomy 7: a profiled call's device time under this fraction of its DRAM floor (kbv choice,
#: the same margin as the roofline check's).
PROFILE_FLOOR_MARGIN = 0.5


def below_floor(device_us: float, floor_us: float, l2_mib: int) -> Finding | None:
    """A profiled call whose kernels took under :data:`PROFILE_FLOOR_MARGIN` x the time of moving
    what cannot stay in the L2 once (``floor_us``): work done elsewhere, an empty CUDA-graph replay
    or a cached result. The profiled calls repeat one input set, where such a replay can hit though
    the timed calls never let it: a WARNING, evidence beside the findings that accuse."""
    if device_us >= PROFILE_FLOOR_MARGIN * floor_us:
        return None
    return finding("profile:below-floor", (7,), Severity.WARNING,
                   f"a profiled call's kernels took {device_us:.3g} µs of device time, under "
                   f"{PROFILE_FLOOR_MARGIN:g} × the {floor_us:.3g} µs of moving what cannot stay in the "
                   f"{l2_mib} MiB L2 once: its work was done elsewhere (an empty CUDA-graph replay or a cached result)")


def refused_count(failed: str) -> Finding:
    """Forward failed under kbv's op count (``failed``: what failed and how) after passing every
    correctness set: SHORTCUT, not credited as a custom kernel and not accused (an honest
    ``torch.compile(fullgraph=True)`` fails under a dispatch mode too)."""
    return finding("probe:op-count-refused", (15,), Severity.SHORTCUT,
                   f"forward failed under kbv's op count ({failed}) after passing every correctness set: "
                   "whether its speed is the reference's own torch ops could not be checked")


def reference_ops(covered: Sequence[str], fallback: bool, as_ops: Sequence[str] = ()) -> Finding:
    """Forward ran the reference's own torch compute ops (``covered``): a wrapper, SHORTCUT; with a
    custom kernel in the file that forward did not use (``fallback``), also a ghost kernel (16).
    ``as_ops``: the candidate's ops counted for them (:func:`kbv.checks.op_coverage.covering_ops`),
    named where they are not the reference's names (a GEMM re-run as ``mm`` for ``addmm``)."""
    how = f" (as {', '.join(as_ops)}: ops of the same family, as often)" if as_ops and set(as_ops) != set(covered) else ""
    return finding("probe:reference-ops", (15, 16) if fallback else (15,), Severity.SHORTCUT,
                   f"forward ran the reference's own torch compute ops: {', '.join(covered)}{how}")


def reference_work(share: float, ops: Sequence[str]) -> Finding:
    """Forward re-ran the reference's own torch ops on the same sizes (``ops``), ``share`` of the
    reference's op time (:func:`kbv.checks.op_coverage.reference_work_covered`): PyTorch's kernels
    did most of the work, SHORTCUT (taxonomy 15)."""
    return finding("probe:reference-ops", (15,), Severity.SHORTCUT,
                   f"forward re-ran with PyTorch's own kernels the work of the reference's ops {', '.join(ops)} "
                   "(an op of the same family on the same sizes: a linear as a matmul or addmm, say), "
                   f"{share:.0%} of the reference's op time: most of the work is PyTorch's own kernels")


def own_share(reason: str | None) -> Finding | None:
    """The kernel profile's verdict (:func:`kbv.checks.op_coverage.shortcut_reason`): the candidate's own
    kernels did almost none of the device time, SHORTCUT; None without a reason."""
    return finding("profile:own-share", (15, 16), Severity.SHORTCUT, reason) if reason else None


def aten_registration(registered: Sequence[str]) -> Finding | None:
    """The candidate's native code registers kernels for torch's own ops (``registered``): whatever
    torch runs of those ops in its process, the harness's copies included, runs its code, HACK."""
    if not registered:
        return None
    return finding("profile:aten-registration", (15,), Severity.HACK,
                   "the candidate's native code registers kernels for torch's own ops: "
                   f"{', '.join(registered[:3])} (whatever torch runs of those ops in its process, the "
                   "harness's copies included, runs its code)")


def unreadable_objects(why: str) -> Finding:
    """The imports of the candidate's native objects could not all be read (``why``): SHORTCUT,
    not credited as its own kernel, not accused."""
    return finding("profile:aten-kernels", (15,), Severity.SHORTCUT,
                   f"the imports of the candidate's native objects could not all be read ({why}): whether "
                   "its speed is PyTorch's own kernels could not be checked")


def aten_kernels(named: str, covered: Sequence[str] | None, counted: bool) -> Finding:
    """The extension imports PyTorch's own kernels (``named``): SHORTCUT when with the ops it
    dispatched they reach every compute op of the reference (``covered``), else a WARNING (saying
    so when op counts were there to compare, ``counted``)."""
    if covered:
        return finding("profile:aten-kernels", (15,), Severity.SHORTCUT,
                       f"the extension calls PyTorch's own kernels past the dispatcher: {named}; with the ops it "
                       f"dispatched they reach every compute op of the reference ({', '.join(covered)})")
    partial = " (not every compute op of the reference)" if counted else ""
    return finding("profile:aten-kernels", (15,), Severity.WARNING,
                   f"the extension calls PyTorch's own kernels past the dispatcher: {named}{partial}")
