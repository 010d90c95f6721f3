"""The memory stage (cuda): peak device memory of one forward call, reference and candidate,
measured the same way (:mod:`kbv.sandbox.peak_memory`)."""

from __future__ import annotations

from kbv.pipeline.context import Context
from kbv.pipeline.outcome import Outcome, Stop
from kbv.processes.candidate import CandidateProcess
from kbv.sandbox import numeric_flags as bl
from kbv.processes import footprint as fp
from kbv.sandbox import peak_memory as mem
from kbv.sandbox.peak_memory import nbytes
from kbv.sandbox import protocol


class MemoryStage:
    """Peak forward memory."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _memory(self, worker: CandidateProcess, args: list) -> None:
        reply = self.ctx._call(worker, protocol.MeasureMemory(0), "memory", self.ctx.config.call_timeout_s)
        if not isinstance(reply, protocol.MemoryFigures):
            raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: memory: malformed reply")
        bl.apply_flags(self.ctx.fp32_flags)
        ref_peak = mem.forward_peak_bytes(self.ctx.rp.model, args, self.ctx.rp.device, fp.CARRIED_PEAKS)
        ref_m = mem.measurement("reference", forward_peak=ref_peak, model_bytes=self.ctx.rp.model_bytes or 0,
                                input_bytes=nbytes(args))
        cand_m = mem.measurement("candidate", forward_peak=int(reply.forward_peak_bytes),
                                 model_bytes=int(self.ctx.cand_model_bytes or 0), input_bytes=int(reply.input_bytes))
        self.ctx.state.memory = {"reference": ref_m, "candidate": cand_m}
