"""The op-count check (taxonomy 15/16): the candidate re-running the reference's own torch
compute ops, or its own kernels doing too little of the device time."""

from __future__ import annotations

import secrets

from kbv.checks.profile import reference_covered, shortcut_reason
from kbv.sandbox.kernels import KernelProfile
from kbv.checks.probes import op_counts_ok
from kbv.model.records import Severity, Status
from kbv.pipeline.context import Context, Stop
from kbv.processes.candidate import CandidateProcess
from kbv.reference import inputs as inp
from kbv.sandbox import flags as bl
from kbv.sandbox import protocol


class ProfileCheck(Context):
    """Reference ops and own-kernel share."""

    def _reference_ops(self, worker: CandidateProcess, sets: list) -> None:
        """The candidate re-running the reference's own torch compute ops is a wrapper (taxonomy 15/16)."""
        try:
            from kbv.sandbox import profiling
        except ImportError:
            return
        skip = self._structured()
        mix = (1, secrets.randbits(62), skip) if len(sets) > 1 else ()
        reply = self._call(worker, protocol.CountOps(0, mix), "profile", self.config.call_timeout_s)
        if not isinstance(reply, protocol.OpCounts) or not op_counts_ok(reply):
            raise Stop(Status.RUNTIME_ERROR, f"{self.name}: profile: malformed reply")
        bl.apply_flags(self.fp32_flags)
        ref_ops = profiling.compute_ops(self.rp.model, inp.clone_args(sets[0]))
        ref_recorded = profiling.recorded_ops(self.rp.model, inp.clone_args(sets[0]))
        evidence = {"candidate_ops": dict(reply.ops), "reference_ops": dict(ref_ops.ops),
                    "candidate_ops_recorded": dict(reply.recorded), "reference_ops_recorded": dict(ref_recorded.ops),
                    "own_share": reply.own_share, "error": reply.error or ref_ops.error,
                    "recorded_error": reply.recorded_error or ref_recorded.error}
        if reply.kernels:
            evidence["kernels"] = [list(k) for k in reply.kernels[:20]]
        self.state.evidence["profile"] = evidence
        covered = None
        if not (reply.error or ref_ops.error):
            covered = reference_covered(ref_ops.ops, dict(reply.ops))
        # the profiler's count (top-level ops on both sides) sees every thread and the dispatcher
        # itself: torch ops handed to a thread or run with the Python dispatch key excluded (taxonomy 15)
        if covered is None and not (reply.recorded_error or ref_recorded.error):
            covered = reference_covered(ref_recorded.ops, dict(reply.recorded))
        if covered is None and (reply.error or ref_ops.error):
            return
        # a custom kernel in the file that forward did not use instead of torch: a ghost kernel
        fallback = self.candidate.backend in ("cuda", "triton", "cpp") or any(
            f.check == "scan:try-fallback" for f in self.state.findings)
        if covered:
            self._found("probe:reference-ops", (15, 16) if fallback else (15,), Severity.SHORTCUT,
                        f"forward ran the reference's own torch compute ops: {', '.join(covered)}")
        elif reply.own_share is not None and reply.kernels:
            kernels = tuple((str(n), float(us), bool(own)) for n, us, own in reply.kernels)
            own_us = sum(us for _, us, own in kernels if own)
            total_us = sum(us for _, us, _ in kernels)
            reason = shortcut_reason(KernelProfile(
                kernels=kernels, own_us=own_us, total_us=total_us,
                own_share=own_us / total_us if total_us > 0 else None, repeats=1))
            if reason:
                self._found("profile:own-share", (15, 16), Severity.SHORTCUT, reason)
