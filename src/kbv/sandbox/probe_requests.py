"""The candidate worker's probe requests (:class:`kbv.sandbox.protocol.CountOps`,
:class:`~kbv.sandbox.protocol.MeasureMemory`) and its read of kernels registered for torch's ops since
load: a part of :class:`kbv.sandbox.worker._Server`, which holds the state they use (the model, the
timing sets, torch's op registry as it was before the candidate loaded). Untrusted side."""

from __future__ import annotations

import os
from typing import Any


class ProbeRequests:
    """Mixed into :class:`kbv.sandbox.worker._Server`: reads ``self.torch``, ``self.model``,
    ``self.timing_sets``, ``self.timing``, ``self.device``, ``self.protocol``, ``self.integrity``,
    ``self._op_impls``, ``self._ops_before``, ``self._registry_at_load``, ``self._dispatcher`` and
    calls ``self._check_flags()``."""

    def _new_op_kernels(self, full: bool = True) -> list[str]:
        """Reports of kernels registered through ``torch.library`` since the last check that replace
        one of torch's own ops as it existed before the candidate loaded, from outside torch
        (:func:`kbv.sandbox.call_probes.torch_op_overrides`): a wrapper hidden behind another op. The new
        ops and kernels torch registers itself (inductor's ``prims::`` ops) are left alone. A registry
        readable at load that no longer is was replaced: that is reported too, not taken as empty.
        Then the dispatcher's own registry (:class:`kbv.sandbox.op_kernels.DispatcherWatch`), which also
        holds kernels registered from C++ (``TORCH_LIBRARY_IMPL(aten, CPU, m)``)."""
        torch = self.torch
        watch = getattr(self, "_dispatcher", None)
        native = watch.check(full) if watch else []
        try:
            impls = set(torch.library._impls) - self._op_impls
            sites = {}
            for entry in impls:
                ns, _, rest = str(entry).partition("/")
                qualname = f"{ns}::{rest.rpartition('/')[0]}"
                if ns in self.integrity.TORCH_OP_NAMESPACES and qualname not in sites:
                    try:
                        sites[qualname] = self.integrity.registration_sites(torch._C._dispatch_dump(qualname))
                    except Exception:  # noqa: BLE001 - an op the dump does not know: no site
                        sites[qualname] = {}
            found = self.integrity.torch_op_overrides(impls, self._ops_before, sites, os.path.dirname(torch.__file__))
        except Exception as exc:  # noqa: BLE001 - a torch without the registry, or a replaced one
            found = [] if not self._registry_at_load else [
                f"torch.library's registry (unreadable since load: {type(exc).__name__})"]
            return found + [f"torch op kernel {op} registered with the dispatcher" for op in native]
        self._op_impls |= impls
        seen = {op.split(" ")[0] for op in found}  # each kernel once, as torch.library names it
        return [*(f"torch op kernel {op} registered from Python" for op in found),
                *(f"torch op kernel {op} registered with the dispatcher" for op in native
                  if op.split(" ")[0] not in seen)]

    def count_ops(self, req: Any) -> Any:
        from kbv.sandbox import kernels as kernel_timeline
        from kbv.sandbox import profiling
        from kbv.sandbox.op_tables import union

        # made in a call buffer as a timed call's inputs are (kbv.sandbox.timed_inputs.call_inputs): the
        # same values as a mix into new tensors, with no input-sized copy beside the worker's sets. Each
        # counted call gets its inputs written again, into the next of the two buffers as a timed call
        # does: two calls on one buffer with no write between told a counted call from a timed one
        # (red-team helper, 2026-12-06)
        turns = tuple(req.inputs) or ((None, req.set_index, req.mix, req.mutate),)
        written = 0

        def inputs(turn: tuple) -> list:  # the buffers in the timed calls' alternation (their count is not moved)
            nonlocal written
            buf = self._call_buffers[(self._call_count + written) % 2]
            written += 1
            fresh, k, mix, mutate = turn
            mix = (*mix[:2], tuple(mix[2]) if len(mix) > 2 else ()) if mix else ()
            if fresh is None:
                return self._call_inputs(buf, self.timing_sets, k, mix, tuple(mutate))
            # a fresh set in the timing set's place, mixed with the timing sets as a timed call's inputs are
            return self._call_inputs(buf, [list(fresh), *self.timing_sets], 0, mix, tuple(mutate))

        # each count on every turn's inputs, its ops the most any call ran (op_tables.union): a forward
        # that branches on what it has seen is counted on the path the timed calls take and on the one
        # new values take
        counted = []
        for turn in turns:
            counted.append(profiling.compute_ops(self.model, inputs(turn)))
            self._modes.clear()
        ops = union(counted)
        # the same calls again under the profiler, which records every thread and the dispatcher
        # itself (ops run on the candidate's threads or with the Python key excluded)
        counted = []
        for turn in turns:
            args = inputs(turn)
            counted.append(profiling.recorded_ops(self.model, args))
            self._modes.clear()
        recorded = union(counted)
        kernels, share, error, probe_failed, busy = (), None, ops.error, ops.probe_failed, None
        if self.device.type == "cuda":
            prof = kernel_timeline.kernel_profile(self.model, args, self.device)
            kernels = tuple(prof.kernels)
            share = prof.own_share
            busy = prof.busy_us if prof.error is None else None
            if error is None and prof.error is not None:
                error, probe_failed = prof.error, prof.probe_failed
        changes = self._check_flags()
        return self.protocol.OpCounts(ops=dict(ops.ops), kernels=kernels, own_share=share, error=error,
                                      recorded=dict(recorded.ops), recorded_error=recorded.error,
                                      recorded_shaped=dict(recorded.shaped),
                                      flag_changes=changes, probe_failed=probe_failed,
                                      recorded_probe_failed=recorded.probe_failed, kernel_busy_us=busy)

    def memory(self, req: Any) -> Any:
        from kbv.sandbox.peak_memory import forward_peak_bytes, nbytes

        args = self.timing_sets[req.set_index]
        peak = forward_peak_bytes(self.model, args, self.device)
        changes = self._check_flags()
        return self.protocol.MemoryFigures(forward_peak_bytes=peak, input_bytes=nbytes(args),
                                           flag_changes=changes)
