"""The candidate worker's timing requests (:class:`kbv.sandbox.protocol.SetTimingInputs`,
:class:`~kbv.sandbox.protocol.TimedCall`, :class:`~kbv.sandbox.protocol.Time`): a part of
:class:`kbv.sandbox.worker._Server`, which holds the state they use (the model, the timing sets,
its own references to the timing loop taken before the candidate loaded). Untrusted side."""

from __future__ import annotations

import mmap
import secrets
from typing import Any

#: the host's page size (bytes): :meth:`TimedRequests._prefault` reads one byte of each.
PAGE_BYTES = mmap.PAGESIZE
#: a timed call's outputs are held alive for 1 to HOLD_CALLS later calls, at random, so an output
#: the candidate hands out again from a pool of its own buffers overlaps one still held: a pool of
#: two 64 MiB buffers was PASS 5.7x on a ReLU (0.96x with fresh outputs; red-team helper,
#: 2026-12-04) when only the previous call's output was held (kbv choice).
HOLD_CALLS = 8


def _flatten(out: Any) -> tuple[tuple, str]:
    """The tensors of a forward's result and its structure (``tuple`` or ``tensor``), with exact type
    tests only: ``type()`` runs nothing of the candidate's (``isinstance`` and iterating a subclass of
    tuple or list would)."""
    if type(out) is tuple or type(out) is list:
        return tuple(out), "tuple"
    return (out,), "tensor"


def _reused(out_spans: list, held: list, own_spans: list, n: int) -> str:
    """What timed call ``n``'s output spans overlap (``""``: nothing): an output still held (``held``:
    the worker's ``(call, until, bytes, tensors, spans)`` entries) or ModelNew's own storage. A
    function of its own so that no loop variable of the caller keeps an earlier output alive."""
    from kbv.sandbox import rawcopy

    for entry in reversed(held):
        if rawcopy.overlapping(out_spans, entry[4]):
            call = entry[0]
            return ("the previous timed call's output" if call == n - 1
                    else f"the output of the timed call {n - call} calls before, still held")
    if rawcopy.overlapping(out_spans, own_spans):
        return "a parameter or buffer of ModelNew"
    return ""


class TimedRequests:
    """The timing handlers of the worker's request loop (mixed into its server)."""

    def set_timing_inputs(self, req: Any) -> Any:
        """Keep the timing sets (copied in on cuda), make the two call buffers, allocate the output slots
        (:class:`kbv.sandbox.rawcopy.SlotCopier`) and note the byte spans of ModelNew's parameters
        and buffers, all before any timed call: nothing of the candidate's is called after a timed
        call's clock stops."""
        from kbv.sandbox import rawcopy

        torch = self.torch
        self.last_args = None  # the correctness calls' inputs: no forward reuses them after this
        # on cpu the sets stay where they came, in memory only this process maps once the trusted
        # side has sent them (a copy here held them twice while it was made: a 1 GiB row sum's
        # worker went 1.2 GiB over 4·B + 1 GiB); cuda's come by CUDA IPC and are copied
        self.timing_sets = [list(s) if self.device.type == "cpu" else self._own(s) for s in req.input_sets]
        #: two buffers per call alternate, so no call gets its inputs at the previous call's addresses
        self._call_buffers = [[a.clone() if isinstance(a, torch.Tensor) else a for a in self.timing_sets[0]]
                              for _ in range(2)]
        self._call_count = 0
        #: (call number, held through call number, bytes, tensors, spans) of earlier timed calls' outputs
        self._held_outputs: list = []
        self._hold_bytes = int(req.hold_bytes)
        self._slots = rawcopy.SlotCopier(self.device, req.slot_bytes, req.slots, int(req.touch_bytes))
        own = []
        if self.model is not None and isinstance(self.model, torch.nn.Module):
            own = [t for t in (*self.model.parameters(), *self.model.buffers()) if type(t) is torch.Tensor
                   and t.device.type == self.device.type]
        self._own_spans = rawcopy.spans(own, self.device.type)
        self._sync()
        return self.protocol.TimingReady(slots=self._slots.buffer)

    def set_bound_inputs(self, req: Any) -> Any:
        """Keep the bound pass's input sets as sent (shared with the trusted side, which writes each
        pass's values into them while this process is stopped): no copy."""
        self.bound_sets = [list(s) for s in req.input_sets]
        # the first two (or the one) serve as the timed calls' buffers from now on (the same
        # shapes): the worker's own are freed, so the pass's sets add no input-sized memory here
        # (a pass over a large input has one set: a 1 GiB row sum's worker went 1.2 GiB over
        # 4·B + 1 GiB holding it beside both buffers); freed before the sets are paged in
        self._call_buffers = [list(s) for s in self.bound_sets[:2]] + self._call_buffers[len(self.bound_sets):2]
        self._prefault(self.bound_sets)
        self._sync()
        return self.protocol.Pong()

    def _prefault(self, sets: list) -> None:
        """Read one byte of every page of the host-memory tensors in ``sets`` (shared mappings this
        process has not touched yet): the bound pass's first pass then pays no page faults that the
        second and the trusted null loop never pay, which would raise its CPU-time floor alone
        (:func:`kbv.checks.bound_rules.floor_cap` needs two passes to agree)."""
        torch = self.torch
        seen = set()
        for s in sets:
            for a in s:
                if not isinstance(a, torch.Tensor) or a.device.type != "cpu":
                    continue
                storage = a.untyped_storage()
                if storage.data_ptr() in seen or storage.nbytes() == 0:
                    continue
                seen.add(storage.data_ptr())
                raw = torch.empty(0, dtype=torch.uint8).set_(storage)
                int(raw[::PAGE_BYTES].sum())

    def timed_call(self, req: Any) -> Any:
        """One call timed (:func:`kbv.sandbox.timer.one_call`) on its inputs, made now from the request.
        After the clock stops only harness code runs: the outputs' layouts are read with torch's C
        methods, checked against the previous timed call's outputs (held until the next call, so a
        candidate returning the same buffer again is seen) and ModelNew's own storage (``reused``),
        and their bytes copied into slot 0 without the dispatcher (:mod:`kbv.sandbox.rawcopy`)."""
        from kbv.sandbox import rawcopy

        buf = self._call_buffers[self._call_count % 2]
        self._call_count += 1
        args = self._call_inputs(buf, self.timing_sets, req.set_index, tuple(req.mix), tuple(req.mutate))
        c0 = self._thread_time()
        ms, out, clock = self._one_call(self.model, args, device=self.device, flush_bytes=req.l2_flush_bytes)
        cpu_ms = (self._thread_time() - c0) * 1e3
        self._modes.clear()  # the layouts and the copy below run under no mode the candidate entered
        tensors, structure = _flatten(out)
        del out
        out_spans = rawcopy.spans(tensors, self.device.type)
        n = self._call_count
        # outputs no longer held are dropped only after this call's outputs are copied out and the
        # device is idle: dropping the last reference to an earlier output runs the candidate's
        # weakref callbacks and finalizers, which could otherwise finish this call's output after
        # its clock stopped (row t04-release-callback-finish)
        released = [h for h in self._held_outputs if h[1] < n]
        self._held_outputs = [h for h in self._held_outputs if h[1] >= n]
        reused = _reused(out_spans, self._held_outputs, self._own_spans, n)
        nbytes = sum(e - b for b, e in out_spans)
        self._held_outputs.append((n, n + 1 + secrets.randbelow(HOLD_CALLS), nbytes, tensors, out_spans))
        # this call's always (the next call checks against it); earlier ones while they fit
        while len(self._held_outputs) > 1 and sum(h[2] for h in self._held_outputs[:-1]) > self._hold_bytes:
            released.append(self._held_outputs.pop(0))
        outputs = self._slots.copy(tensors, 0)
        del tensors
        self._sync()
        memory = self.pointers.output_memory(self._held_outputs[-1][3]) if self.device.type == "cuda" else ""
        del released  # the candidate's callbacks may run from here: the outputs are out
        return self.protocol.CallTimed(time_ms=float(ms), clock=clock, outputs=outputs, structure=structure,
                                       reused=reused, cpu_ms=cpu_ms, memory=memory,
                                       flag_changes=self._check_flags())

    def time(self, req: Any) -> Any:
        # put patched clocks back before the timed loop runs (with defer_checks the Ping before did)
        tampered = () if req.defer_checks else self._tampering()
        kept: dict = {}
        layouts: list = []
        structure = ["tensor"]
        copy_out = None
        if req.slots:  # every timed call's outputs into its own slot, without the dispatcher
            if req.trials > self._slots.slots:
                raise ValueError(f"{req.trials} timed calls for {self._slots.slots} output slots")

            def copy_out(i: int, out: Any) -> None:
                tensors, structure[0] = _flatten(out)
                layouts.append(self._slots.copy(tensors, i))

        sets = self.bound_sets if req.bound_inputs else self.timing_sets
        if req.bound_inputs and (req.refresh or req.warmup + req.trials > len(sets)):
            raise ValueError(f"{req.warmup + req.trials} bound calls for {len(sets)} bound input sets")
        if req.bound_inputs:
            # the trusted side wrote this pass's values from its own process, past these tensors'
            # version counters: bump them as a write here would, so code relying on PyTorch's rule
            # (same tensor, same version, same values: a cache keyed on ``_version``, honest) is not
            # handed new values under an old version (row t11-cache-by-ptr-version)
            self.torch.autograd.graph.increment_version(
                [a for s in sets[:req.warmup + req.trials] for a in s if isinstance(a, self.torch.Tensor)])
        times, clock = self._time_calls(
            self.model, sets, device=self.device, warmup=req.warmup, trials=req.trials,
            flush_bytes=req.l2_flush_bytes, first_set=req.first_set, refresh=req.refresh,
            keep=req.keep, kept=kept, sync_inside=req.sync_inside, mutate=dict(req.mutate),
            mix=dict(req.mix), copy_out=copy_out,
        )
        if req.bound_inputs:
            # the collections the pass's calls owe, run inside the trusted clock's window: work a
            # candidate leaves to finalizers of its garbage is then the pass's (timed calls
            # run with the collector off: kbv.sandbox.timer.gc_paused)
            self.timing.collect()
        self._sync()
        changes = self._check_flags()  # serve() checks the harness again before replying
        return self.protocol.Times(times_ms=tuple(times), clock=clock, flag_changes=changes, tampering=tampered,
                                   kept=tuple((i, k, tuple(outs)) for i, (k, outs) in sorted(kept.items())),
                                   outputs=tuple(layouts), structure=structure[0])
