"""The roofline check (cuda, taxonomy 7): no call beats reading its inputs once and writing its
outputs once at the measured copy bandwidth."""

from __future__ import annotations

import numpy as np

from kbv.checks.timing_rules import roofline_finding, roofline_suspect
from kbv.pipeline.context import Context
from kbv.pipeline.schedule import MIN_TRIALS_PER_ROUND
from kbv.processes.candidate import CandidateProcess
from kbv.sandbox import protocol
from kbv.pipeline import rates
from kbv.sandbox.peak_memory import nbytes
from kbv.sandbox.timer import l2_flush_bytes



class Roofline:
    """The input-read floor of the candidate's median."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _roofline(self, worker: CandidateProcess, sets: list) -> None:
        """No call can beat reading its forward inputs once from DRAM and writing its outputs once
        (every timed call starts after an L2 flush), at the measured copy bandwidth (taxonomy 7).

        Bytes only, never the reference's FLOPs: a correct kernel's least work is unknown (a row
        scaling for ``diag(A) @ B``, ``x @ W.sum(0)`` for a summed linear layer are legitimate),
        and parameters are left out (precomputing from weights in ``__init__`` is legitimate). A
        median under the floor is re-measured before it counts."""
        if self.ctx.rp.device.type != "cuda":
            return
        bw = rates.copy_bandwidth(self.ctx.rp.device)
        in_bytes = nbytes(sets[0])
        out_bytes = self.ctx.rp.output_bytes
        floor_ms = (in_bytes + out_bytes) / bw * 1e3
        cand = self.ctx.state.timing["candidate"].median_ms
        ref = self.ctx.state.timing.get("eager-fp32")
        self.ctx.state.evidence["roofline"] = {"copy_bandwidth_bytes_per_s": bw, "input_bytes": in_bytes,
                                           "output_bytes": out_bytes, "floor_ms": floor_ms}
        if not roofline_suspect(cand, ref.median_ms if ref is not None else None, floor_ms):
            return
        flush = l2_flush_bytes(self.ctx.rp.device)
        reply = self.ctx._call(worker, protocol.Time(1, MIN_TRIALS_PER_ROUND * 2, flush, 0, refresh=True), "time",
                           self.ctx.config.timing_timeout_s)
        again = float(np.median(reply.times_ms)) if isinstance(reply, protocol.Times) and reply.times_ms else cand
        self.ctx.state.evidence["roofline"]["remeasured_ms"] = again
        self.ctx._add(roofline_finding(cand, again, floor_ms, in_bytes, out_bytes, bw))
