"""The op-count check (taxonomy 15/16): the candidate re-running the reference's own torch
compute ops, or its own kernels doing too little of the device time."""

from __future__ import annotations

import secrets
import time

import torch

from kbv.checks.native import aten_kernel_imports, native_covered, torch_registrations
from kbv.checks.op_coverage import (covering_ops, reference_covered, reference_work_covered, refused_counts,
                                   shortcut_reason)
from kbv.sandbox.kernels import KernelProfile
from kbv.checks.probe_rules import op_counts_ok
from kbv.checks import profile_rules as prof_rule
from kbv.checks import cupti_rules as cupti_rule
from kbv.pipeline.context import Context
from kbv.pipeline.outcome import Outcome, Stop
from kbv.processes import elf
from kbv.processes.candidate import CandidateProcess
from kbv.reference import inputs as inp
from kbv.reference.build import first_line
from kbv.reference.mutation import timed_mutation
from kbv.sandbox import numeric_flags as bl
from kbv.sandbox import protocol


class ProfileCheck:
    """Reference ops and own-kernel share."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _profiled_floor(self, reply: protocol.OpCounts) -> None:
        """The device time of a profiled call (the sum of its kernels' durations, from the
        profiler's timeline: host load does not change it) under a margin
        (:func:`kbv.checks.profile_rules.below_floor`) of the
        least DRAM traffic of the call: the calls are profiled back to back on one input set with
        no L2 flush, so at most the L2's size of its inputs and outputs can stay on chip, and the
        rest is read or written once at the measured copy bandwidth. A call under that replayed
        work done elsewhere (an empty CUDA-graph replay, a cached result; taxonomy 7). The profiled
        calls repeat one input set, where such a replay can hit although the timed calls, on fresh
        values, never let it: a WARNING, as evidence beside the findings that accuse. Only where
        the reference itself respects the bytes floor, and the inputs and outputs exceed the L2."""
        roof = self.ctx.state.evidence.get("roofline")
        ref = self.ctx.state.timing.get("eager-fp32")
        if not reply.kernels or reply.error or not roof or ref is None or ref.median_ms < roof["floor_ms"]:
            return
        l2 = int(torch.cuda.get_device_properties(self.ctx.rp.device).L2_cache_size)
        dram = roof["input_bytes"] + roof["output_bytes"] - l2
        if dram <= 0:
            return
        floor_us = dram / roof["copy_bandwidth_bytes_per_s"] * 1e6
        device_us = sum(float(us) for _, us, _ in reply.kernels)
        self.ctx.state.evidence["profile"].update(device_us_per_call=device_us, dram_floor_us=floor_us)
        self.ctx._add(prof_rule.below_floor(device_us, floor_us, l2 >> 20))

    def _cupti(self, reply: protocol.OpCounts) -> None:
        """The profiled calls' kernel time per call (CUPTI, overlaps counted once) beside the timed
        calls' CUDA-event median as the candidate's events gave it (before the bound pass's credit):
        ``evidence["cupti"]`` and :func:`kbv.checks.cupti_rules.cupti_disagrees` (cuda only)."""
        claimed = self.ctx.state.evidence.get("trusted_bound", {}).get("claimed_median_ms")
        timed = self.ctx.state.timing.get("candidate")
        record = cupti_rule.evidence(reply.kernel_busy_us, claimed if claimed is not None else
                                     timed.median_ms if timed is not None else None)
        if record is None:
            return
        self.ctx.state.evidence["cupti"] = record
        self.ctx._add(cupti_rule.cupti_disagrees(record["kernel_ms_per_call"], record["event_median_ms"]))

    def _fresh_sets(self, sets: list) -> list:
        """A fresh draw of ``get_inputs()`` (:meth:`kbv.pipeline.context.Context._fresh_draw_for`)
        made ready to send (:func:`kbv.reference.inputs.shared_clone`, the draw dropped once copied);
        none where no draw may stand in for a timing set: the counts run on a timed call's inputs alone."""
        draw = self.ctx._fresh_draw_for(sets, inp.secret_seed())
        self._counted_fresh = draw is not None
        return [tuple(inp.shared_clone(draw))] if draw is not None else []

    def _reference_ops(self, worker: CandidateProcess, sets: list) -> None:
        """The candidate re-running the reference's own torch compute ops is a wrapper (taxonomy 15/16)."""
        try:
            from kbv.sandbox import profiling
        except ImportError:
            return
        fresh = self._fresh_sets(sets)
        skip, g = self.ctx._structured(), torch.Generator().manual_seed(secrets.randbits(62))
        # a timed call's inputs, which the candidate cannot tell from a timed call's (the path its
        # timed calls take: a wrapper that ran the reference's op only there, telling the counted
        # calls apart by the share of values it had seen, escaped a count on fresh values alone) ...
        k = secrets.randbelow(len(sets))
        mix = (k + 1 + secrets.randbelow(len(sets) - 1)) % len(sets) if len(sets) > 1 else None
        timed_like = (None, k, (mix, secrets.randbits(62), skip) if mix is not None else (),
                      timed_mutation(sets[k], sets[(k + 1) % len(sets)], g, skip, self.ctx._kinds()) if len(sets) > 1 else ())
        # ... and, where a draw fits, new values mixed with a timing set as a timed call's are (the path
        # new values take: a table of seen values answered every timed-like element, and hid the op
        # it ran on a miss; on pure draws a one-hot stays one-hot, which the timed calls' mix breaks)
        turns = [(f, 0, (1 + k, secrets.randbits(62), skip), timed_mutation(list(f), sets[k], g, skip, self.ctx._kinds()))
                 for f in fresh] + [timed_like]
        req = protocol.CountOps(inputs=tuple(turns))
        del fresh, turns
        reply = self.ctx._call(worker, req, "profile", self.ctx.config.call_timeout_s)
        del req
        self.ctx.state.evidence["op_count_inputs"] = ("a fresh draw, mixed, and " if self._counted_fresh else "") \
            + "a timed call's inputs"
        if not isinstance(reply, protocol.OpCounts) or not op_counts_ok(reply):
            raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: profile: malformed reply")
        bl.apply_flags(self.ctx.fp32_flags)
        with worker.paused():  # the reference's op times, which the cpu work share reads, undisturbed by the candidate
            ref_ops = profiling.compute_ops(self.ctx.rp.model, inp.clone_args(sets[0]))
            ref_recorded = profiling.recorded_ops(self.ctx.rp.model, inp.clone_args(sets[0]))
        evidence = {"candidate_ops": dict(reply.ops), "reference_ops": dict(ref_ops.ops),
                    "candidate_ops_recorded": dict(reply.recorded), "reference_ops_recorded": dict(ref_recorded.ops),
                    "own_share": reply.own_share, "error": reply.error or ref_ops.error,
                    "recorded_error": reply.recorded_error or ref_recorded.error}
        if reply.kernels:
            evidence["kernels"] = [list(k) for k in reply.kernels[:20]]
        self.ctx.state.evidence["profile"] = evidence
        self._profiled_floor(reply)
        self._cupti(reply)
        covered = None
        if not (reply.error or ref_ops.error):
            covered = reference_covered(ref_ops.ops, dict(reply.ops))
        # the profiler's count (top-level ops on both sides) sees every thread and the dispatcher
        # itself: torch ops handed to a thread or run with the Python dispatch key excluded (taxonomy 15)
        if covered is None and not (reply.recorded_error or ref_recorded.error):
            covered = reference_covered(ref_recorded.ops, dict(reply.recorded))
        # on cpu (no kernel profile there: kbv.sandbox.kernels is cuda's), a torch-only candidate that
        # re-ran most of the reference's work as the reference's own ops, by the reference's op time
        if covered is None and self.ctx.rp.device.type == "cpu" and self.ctx.candidate.backend == "torch" \
                and not reply.recorded_error:
            # four more recordings of the reference's call, each op's least time over the five (one
            # slow call of one op must not make it most of the reference's work), the candidate
            # stopped meanwhile (its threads cannot slow them)
            with worker.paused():
                again = [profiling.recorded_ops(self.ctx.rp.model, inp.clone_args(sets[0])) for _ in range(4)]
            by_work = reference_work_covered(ref_recorded, dict(reply.recorded_shaped), again)
            if by_work is not None:
                evidence["reference_work_covered"] = round(by_work[0], 3)
                self.ctx._add(prof_rule.reference_work(*by_work))
                return
        # PyTorch's kernels the extension calls past the dispatcher, which neither count sees; the
        # reference's and the candidate's ops from the same count (a candidate whose counts both
        # failed is judged on its imports alone)
        pairs = [(dict(r.ops), dict(c) if not err else {}) for r, c, err in (
            (ref_ops, reply.ops, reply.error), (ref_recorded, reply.recorded, reply.recorded_error)) if not r.error]
        if self._aten_kernels(worker, [] if covered else pairs):
            return
        # a forward that fails only when observed (the calls before it passed every set): SHORTCUT, not
        # credited and not accused (an honest torch.compile(fullgraph=True) fails under a dispatch mode too)
        refused = refused_counts(reply.error, reply.recorded_error, reply.probe_failed, reply.recorded_probe_failed)
        if covered is None and refused and not (ref_ops.error or ref_recorded.error):
            failed = "; ".join(f"{what}: {first_line(err)}" for what, err in refused)
            self.ctx._add(prof_rule.refused_count(failed))
            return
        if covered is None and (reply.error or ref_ops.error):
            return
        # a custom kernel in the file that forward did not use instead of torch: a ghost kernel
        fallback = self.ctx.candidate.backend in ("cuda", "triton", "cpp") or any(
            f.check == "scan:try-fallback" for f in self.ctx.state.findings)
        if covered:
            # the candidate's ops the deciding count matched with the reference's (named where they differ)
            by_dispatch = not (reply.error or ref_ops.error) and reference_covered(ref_ops.ops, dict(reply.ops))
            counts = (ref_ops.ops, reply.ops) if by_dispatch else (ref_recorded.ops, reply.recorded)
            self.ctx._add(prof_rule.reference_ops(covered, fallback, covering_ops(counts[0], dict(counts[1]))))
        elif reply.own_share is not None and reply.kernels:
            kernels = tuple((str(n), float(us), bool(own)) for n, us, own in reply.kernels)
            own_us = sum(us for _, us, own in kernels if own)
            total_us = sum(us for _, us, _ in kernels)
            self.ctx._add(prof_rule.own_share(shortcut_reason(KernelProfile(
                kernels=kernels, own_us=own_us, total_us=total_us,
                own_share=own_us / total_us if total_us > 0 else None, repeats=1))))

    def _aten_kernels(self, worker: CandidateProcess, counts: list[tuple[dict, dict]]) -> bool:
        """What the candidate's native objects hold, read here, on the trusted side, from the ELF
        files under its build and working directories (:mod:`kbv.processes.elf`):

        * registrations for torch's own ops (``TORCH_LIBRARY_IMPL(aten, CPU, m)``,
          :func:`kbv.checks.native.torch_registrations`): ``profile:aten-registration``, HACK;
        * PyTorch's own kernels imported past the dispatcher (``at::cpu::mm``, ``at::native::relu``,
          ``at::_ops::mm::redispatch``, :func:`kbv.checks.native.aten_kernel_imports`):
          ``profile:aten-kernels`` SHORTCUT when they and the ops the candidate dispatched reach
          every compute op of the reference in one of ``counts`` (``(reference ops, candidate
          ops)`` pairs of one counting method; none: not to be judged, e.g. the op counts already
          found it covered), else a WARNING naming them.

        Taxonomy 15. True when SHORTCUT was found. No ``nm`` on this host is kbv's limit: recorded
        in the evidence, nothing found. Objects it cannot read, or more than
        :data:`kbv.processes.elf.MAX_OBJECTS` of them (an honest build leaves a few, all readable),
        leave the imports unknown: SHORTCUT, not credited as the candidate's own kernel and not
        accused, as for a forward that refuses the op counts."""
        evidence = self.ctx.state.evidence.setdefault("profile", {})
        nm = elf.reader()
        if nm is None:
            evidence["aten_kernels_error"] = "binutils' nm is not on PATH: the extensions' imports were not read"
            return False
        t0 = time.monotonic()
        try:
            objects = elf.elf_files([worker.setup.build_dir, str(worker.workdir)])
        except elf.ElfError as exc:  # a listing the candidate made too deep or too large to walk
            self.ctx._add(prof_rule.unreadable_objects(first_line(exc)))
            return True
        symbols, defined, unreadable = [], [], []
        for obj in objects[:elf.MAX_OBJECTS]:
            if time.monotonic() - t0 > elf.SCAN_BUDGET_S or len(symbols) + len(defined) > elf.MAX_SYMBOLS:
                unreadable.append(f"the objects' symbols: over {elf.SCAN_BUDGET_S:g} s or {elf.MAX_SYMBOLS} symbols")
                break
            try:
                imports, own = (self.ctx.elf_prefetch or elf).symbols(obj, nm)
            except elf.ElfError as exc:
                unreadable.append(first_line(exc))
                continue
            symbols += imports
            defined += own
        registered = torch_registrations(defined)
        self.ctx._add(prof_rule.aten_registration(registered))
        if unreadable or len(objects) > elf.MAX_OBJECTS:
            why = f"nm cannot read {unreadable[0]}" if unreadable else \
                f"{len(objects)} native objects, over the {elf.MAX_OBJECTS} read"
            self.ctx._add(prof_rule.unreadable_objects(why))
            return True
        imported = aten_kernel_imports(symbols, torch._C._dispatch_get_all_op_names())
        evidence["native_scan_s"] = round(time.monotonic() - t0, 3)
        if not imported:
            return False
        evidence["aten_kernels"] = {op: syms[:3] for op, syms in imported.items()}
        named = ", ".join(f"{op} ({syms[0].split('(')[0]})" for op, syms in list(imported.items())[:6])
        covered = next((c for c in (native_covered(r, d, imported) for r, d in counts) if c), None)
        self.ctx._add(prof_rule.aten_kernels(named, covered, bool(counts)))
        return bool(covered)
