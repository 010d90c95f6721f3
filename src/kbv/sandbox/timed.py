"""The candidate worker's timing requests (:class:`kbv.sandbox.protocol.SetTimingInputs`,
:class:`~kbv.sandbox.protocol.TimedCall`, :class:`~kbv.sandbox.protocol.Time`): a part of
:class:`kbv.sandbox.worker._Server`, which holds the state they use (the model, the timing sets,
its own references to the timing loop taken before the candidate loaded). Untrusted side."""

from __future__ import annotations

from typing import Any


def _flatten(out: Any) -> tuple[tuple, str]:
    if isinstance(out, (tuple, list)):
        return tuple(out), "tuple"
    return (out,), "tensor"


class TimedRequests:
    """The timing handlers of the worker's request loop (mixed into its server)."""

    def set_timing_inputs(self, req: Any) -> Any:
        self.last_args = None  # the correctness calls' inputs: no forward reuses them after this
        self.timing_sets = [self._own(s) for s in req.input_sets]
        #: two buffers per call alternate, so no call gets its inputs at the previous call's addresses
        self._call_buffers = [[a.clone() if isinstance(a, self.torch.Tensor) else a for a in self.timing_sets[0]]
                              for _ in range(2)]
        self._call_count = 0
        self._prev_timed: tuple = ()
        self._sync()
        return self.protocol.Times(times_ms=(), clock="none")

    def timed_call(self, req: Any) -> Any:
        """One call timed (:func:`kbv.sandbox.timing.one_call`) on its inputs, made now from the request;
        the output is returned as it is, shared, and held until the next timed call so that a
        candidate returning the same buffer again is seen (``reused``)."""
        torch = self.torch
        buf = self._call_buffers[self._call_count % 2]
        self._call_count += 1
        args = self._call_inputs(buf, self.timing_sets, req.set_index, tuple(req.mix), tuple(req.mutate))
        c0 = self._thread_time()
        ms, out, clock = self._one_call(self.model, args, device=self.device, flush_bytes=req.l2_flush_bytes)
        cpu_ms = (self._thread_time() - c0) * 1e3
        tensors, structure = _flatten(out)
        del out
        reused = ""
        held = [t for t in self._prev_timed if type(t) is torch.Tensor]
        if held and self.integrity.overlaps(tensors, held):
            reused = "the previous timed call's output"
        elif self.model is not None and isinstance(self.model, torch.nn.Module):
            own = [t for t in (*self.model.parameters(), *self.model.buffers())]
            if own and self.integrity.overlaps(tensors, own):
                reused = "a parameter or buffer of ModelNew"
        self._prev_timed = tensors
        # the outputs are copied, after the call completed (one_call synchronises), into staging
        # buffers shared once: sharing every call's own output would pin its block (CUDA IPC) or
        # pass a new shared segment each call, and the next call's output would need a fresh
        # device allocation inside its timed window (a TF32 matmul measured 2-3x slow that way)
        outs = [t for t in tensors if type(t) is torch.Tensor]
        if len(outs) != len(tensors):
            raise TypeError("forward returned something that is not a torch.Tensor")
        spec = tuple((tuple(t.shape), t.dtype, t.device) for t in outs)
        new = ()
        if spec != getattr(self, "_stage_spec", None):
            self._stage = [torch.empty(sh, dtype=dt, device=dev) for sh, dt, dev in spec]
            if self.device.type == "cpu":
                for b in self._stage:
                    b.share_memory_()
            self._stage_spec = spec
            new = tuple(self._stage)
        for b, t in zip(self._stage, outs):
            b.copy_(t)
        self._sync()
        return self.protocol.CallTimed(time_ms=float(ms), clock=clock, tensors=new, structure=structure,
                                       staged=len(outs), reused=reused, cpu_ms=cpu_ms,
                                       memory=self.pointers.output_memory(outs) if self.device.type == "cuda" else "",
                                       flag_changes=self._check_flags())

    def time(self, req: Any) -> Any:
        tampered = self._tampering()  # put patched clocks back before the timed loop runs
        kept: dict = {}
        times, clock = self._time_calls(
            self.model, self.timing_sets, device=self.device, warmup=req.warmup, trials=req.trials,
            flush_bytes=req.l2_flush_bytes, first_set=req.first_set, refresh=req.refresh,
            keep=req.keep, kept=kept, sync_inside=req.sync_inside, mutate=dict(req.mutate),
            mix=dict(req.mix),
        )
        self._sync()
        changes = self._check_flags()  # serve() checks the harness again before replying
        return self.protocol.Times(times_ms=tuple(times), clock=clock, flag_changes=changes, tampering=tampered,
                                   kept=tuple((i, k, tuple(outs)) for i, (k, outs) in sorted(kept.items())))
