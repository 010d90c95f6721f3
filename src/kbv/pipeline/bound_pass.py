"""The bound pass: the trusted side's own clock around the candidate's calls, so that no speedup is
credited on a time only the candidate's process measured (:mod:`kbv.checks.bound_rules` has the rule).

After the timed rounds the candidate runs ``calls`` forward calls back to back in one
:class:`kbv.sandbox.protocol.Time` request, on input sets of their own: one per call, in memory
this process shares with the worker (:class:`kbv.sandbox.protocol.SetBoundInputs`, sent once), into
which this process writes each pass's values while the worker's tree is stopped: for every call a
fresh draw of the problem's ``get_inputs()`` under a secret seed, values the candidate has never
been sent, with a timed call's share of elements from a timing set (so its patterns are the timed
calls'), so the pass's floor is what its calls cost on new values: a cache of any key (the whole
input, a row, a block, an element's value at its position over the timing sets: red-team rows
t11-bound-pass-drift-cache, t11-bound-pass-row-cache, t11-element-memo-cpp) answers at most the
mixed share of them.
Where such draws do not fit kbv's memory bound (:func:`kbv.checks.bound_plan.fresh_draws_fit`:
large inputs whose outputs are much smaller) or do not give the timing sets' shapes, each call
gets a timing set with half of each tensor's elements (at random positions) from another set and
one element changed, so no call's inputs, rows or blocks repeat a timing set's and a cache that
patches its last answer redoes at least half the work. The loop does nothing per call but the
call, the L2 flush on cuda and the raw copy of its outputs into a slot of its own, so its floor is
the calls' cost and not the cost of making their inputs. The clock starts before the worker is
resumed. The reference worker's ``perf_counter`` measures the request from send to reply. Two calls
chosen here (never sent) are judged against the reference on the inputs written for them, so a
pass answered with unwritten outputs is caught like any timed call (taxonomy 5, 6). With the
candidate's tree stopped, the reference worker then times the same loop with a null forward (the
loop's own cost) and with each baseline (how disturbed this pass was), on its own clock.
"""

from __future__ import annotations

import os
import secrets
import threading
import time

import numpy as np
import torch

from kbv.checks import bound_rules as rule
from kbv.checks import bound_plan
from kbv.pipeline.bound_inputs import PassValues
from kbv.pipeline.context import Context
from kbv.pipeline.judging import Judging
from kbv.pipeline.outcome import Outcome, Stop
from kbv.pipeline.schedule import Recheck
from kbv.processes import footprint as fp
from kbv.processes import gpushare
from kbv.processes import procfs
from kbv.processes.candidate import CandidateProcess
from kbv.reference import inputs as inp
from kbv.sandbox import numeric_flags as bl
from kbv.sandbox import protocol, rawcopy
from kbv.sandbox.timer import time_calls

#: timed calls of a bound pass judged against the reference (kbv choice: each costs one reference
#: run and oracle; two secret calls out of three or more catch a pass that skips its work).
BOUND_JUDGED = 2
#: the bound pass's calls start at this call id in findings and re-checks (apart from the rounds').
BOUND_CALL_BASE = 100_000
class BoundStage:
    """The bound pass and the credit it allows."""

    def __init__(self, ctx: Context, judge: Judging) -> None:
        self.ctx, self.judge = ctx, judge
        self.values = PassValues(ctx)  # the passes' calls' values

    def _bound(self, worker: CandidateProcess, sets: list, flush: int | None, samples: dict) -> None:
        """Run the bound pass (twice when the first contradicts the claim) and apply
        :func:`kbv.checks.bound_rules.decide`: the candidate's samples are scaled so that their median is
        the credited figure, and the evidence ``trusted_bound`` says what was measured."""
        t0 = time.perf_counter()
        claimed = float(np.median(samples["candidate"]))  # as Measurement.median_ms is
        base = {b: self.ctx.state.timing[b].median_ms for b in self.ctx.config.baselines if b in self.ctx.state.timing}
        in_bytes = sum(a.numel() * a.element_size() for a in sets[0] if isinstance(a, torch.Tensor))
        n = bound_plan.bound_calls(claimed, self.ctx._slot_count, self.ctx.rp.device.type)
        n = min(n, bound_plan.max_bound_calls(in_bytes, self.ctx.rp.device.type))  # n sets: at least one
        draw_ms, reproducible = self.values.fresh_draw_ms(sets)
        # a get_inputs() a seed does not reproduce: each draw kept for its pass (the pass's sets' own
        # budget, or one large set: the draw fresh_draws_fit counted as the re-check's copy), never the
        # timing sets' mix, where a table of seen values answers everything (red-team helper, twentieth
        # session: a 68 MiB unseeded problem, one call a pass, PASS at 2.34x against 0.26x honest)
        self.values.fresh = "" if draw_ms is None else "seed" if reproducible else "kept"
        if self.values.fresh:
            n = bound_plan.fresh_draw_calls(n, draw_ms)
        # the pass's own input sets, one per call, shared with the worker once (the primed call before
        # each pass is its warmup, on the previous values)
        bound_sets = [inp.shared_clone(sets[i % len(sets)]) for i in range(n)]
        if not isinstance(self.ctx._call(worker, protocol.SetBoundInputs(tuple(tuple(b) for b in bound_sets)), "time",
                                     self.ctx.config.call_timeout_s), protocol.Pong):
            raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: time: malformed reply")
        if self.ctx.rp.device.type == "cuda":  # the worker's call buffers freed: the shared sets serve
            self.ctx._staged_bytes = max(0, self.ctx._staged_bytes - min(2, n) * in_bytes)
        floors, walls, passes = [], [], []
        device = self.ctx.rp.device.type
        call_bytes = (self.ctx.rp.output_bytes or 0) + in_bytes
        for attempt in range(bound_plan.MAX_PASSES.get(device, 2)):
            p = self._bound_pass(worker, sets, bound_sets, flush, n, attempt)
            passes.append(p)
            floors.append(rule.floor_ms(p, base))
            walls.append((rule.wall_floor_ms(p, base) if rule.wall_floor_counts([p]) else 0.0)
                         if device == "cpu" else floors[-1])
            # the loop's own per-call cost, the floors' main noise (kbv.checks.bound_rules.CPU_CAP_SLACK_MS)
            loop_ms = max(max(q.null_ms, q.null_cpu_ms or 0.0, q.null_all_cpu_ms or 0.0) for q in passes)
            noise = rule.floor_noise_ms(passes, base) if device == "cpu" else 0.0
            if not rule.needs_another_pass(claimed, floors, walls, device, loop_ms, noise, call_bytes):
                break
        del bound_sets
        shared = device == "cuda" and gpushare.read(self.ctx.rp.device.index or 0).others > 0
        d = rule.decide(claimed, floors, device, walls, call_bytes, loop_ms, noise, gpu_shared=shared)
        self.ctx.state.evidence["trusted_bound"] = {
            "claimed_median_ms": claimed, "credited_median_ms": d.credited_ms, "floor_ms": floors,
            "wall_floor_ms": walls, "gpu_shared": shared, "loop_per_call_ms": loop_ms, "floor_noise_ms": noise,
            "calls": n, "fresh_draws": self.values.fresh or None, "wall_ms": [p.wall_ms for p in passes], "request_allow_ms": [p.request_allow_ms for p in passes],
            "host_wait_ms": [p.host_wait_ms for p in passes], "null_per_call_ms": [p.null_ms for p in passes],
            "busiest_thread_ms": [p.busiest_thread_ms for p in passes],
            "all_threads_ms": [p.all_threads_ms for p in passes], "null_cpu_per_call_ms": [p.null_cpu_ms for p in passes],
            "null_all_cpu_per_call_ms": [p.null_all_cpu_ms for p in passes],
            "baseline_cpu_ms": [dict(p.baseline_cpu_ms) for p in passes],
            "baseline_floor_ms": [dict(p.baseline_floor_ms) for p in passes],
            "disturbance": [rule.disturbance(p, base, cpu=p.busiest_thread_ms is not None) for p in passes]}
        if d.finding is not None:
            self.ctx.state.findings.append(d.finding)
        if d.credited_ms > claimed > 0:
            k = d.credited_ms / claimed
            samples["candidate"] = [t * k for t in samples["candidate"]]
        self.ctx.state.phase_seconds["bound-pass"] = time.perf_counter() - t0  # what the check costs

    def _bound_pass(self, worker: CandidateProcess, sets: list, bound_sets: list, flush: int | None, calls: int,
                    attempt: int) -> rule.BoundPass:
        """One bound pass (module docstring); two judged calls chosen here, never sent."""
        cfg = self.ctx.config
        warmup = 0  # the primed call below warms up, on values no measured call gets
        judged = sorted(secrets.SystemRandom().sample(range(calls), min(BOUND_JUDGED, calls)))
        base_id = BOUND_CALL_BASE + attempt * calls
        req = protocol.Time(warmup, calls, flush, 0, refresh=False, slots=True, defer_checks=True, bound_inputs=True)
        # one pass call first, its outputs not judged: the worker's allocator then holds the pass's
        # outputs, whose first allocation would be charged to the few calls a pass over large inputs
        # has; on cuda its wall, timed as the pass's (the worker stopped, then resumed inside the
        # clock), is the request's fixed cost (kbv.checks.bound_plan.cuda_request_allow)
        # and held as the pass's is (the tree stopped before its wall is read): a stop of the worker's
        # tree costs milliseconds on cuda (its driver threads), and in a pass of one call over a large
        # input that stop alone was a floor of 4-6 ms for a 0.13-1 ms ReLU (H200, 2026-12-04)
        with worker.paused():
            t1 = time.perf_counter()
        with self.ctx._held(worker, protocol.Time(0, 1, flush, 0, refresh=False, slots=True, defer_checks=True,
                                              bound_inputs=True), "time", cfg.timing_timeout_s, hold=True) as primed:
            one_call_ms = (time.perf_counter() - t1) * 1e3
            # where the request's fixed cost goes (evidence only): the resume and the stop inside the clock
            costs = {"one_call_ms": one_call_ms, "resume_ms": worker.last_resume_ms, "stop_ms": worker.last_pause_ms}
            if not isinstance(primed, protocol.Times):
                raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: time: malformed reply")
            del primed
        # the harness check runs now, in reply to a ping, so the measured request holds the calls alone
        if not isinstance(self.ctx._call(worker, protocol.Ping(), "time", cfg.call_timeout_s), protocol.Pong):
            raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: ping: malformed reply")
        entries = []
        cpu = self.ctx.rp.device.type == "cpu"
        plan = self.values.plan(sets, len(bound_sets))
        with worker.paused():  # the values written and the clock started before the worker runs again
            self.values.write(sets, bound_sets, plan)
            if self.ctx.rp.device.type == "cuda":
                torch.cuda.synchronize(self.ctx.rp.device)
            threads0, all0 = worker.tree_cpu()
            wait0 = procfs.run_delay_ms(worker.proc.pid)
            t0 = time.perf_counter()
        with self.ctx._held(worker, req, "time", cfg.timing_timeout_s, hold=True) as reply:
            wall = (time.perf_counter() - t0) * 1e3
            costs.update(pass_resume_ms=worker.last_resume_ms, pass_stop_ms=worker.last_pause_ms)
            self.ctx.state.evidence.setdefault("bound_request_costs", []).append(costs)
            # the worker's tree is stopped: its CPU time over the request is what it is now
            threads1, all1 = worker.tree_cpu()
            wait1 = procfs.run_delay_ms(worker.proc.pid)
            if (not isinstance(reply, protocol.Times) or len(reply.times_ms) != calls
                    or type(reply.outputs) is not tuple or len(reply.outputs) != calls):
                raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: time: malformed reply")
            try:  # the worker is stopped: the slots as the calls left them
                for j, i in enumerate(judged):
                    outs = [v.clone() for v in rawcopy.view(self.ctx._slots, reply.outputs[i])]
                    entries.append((base_id + i, j, outs))
            except ValueError as exc:
                raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: time: {exc}") from None
            fp.drop_view(self.ctx._slots)
            del reply
        # the judged calls first, their outputs dropped before the trusted loops make their own (a
        # 1 GiB ReLU's pass went 0.45 GiB over 4·B + 1 GiB holding both). No copy of their values is
        # held through the pass (a 1 GiB row sum's went 0.33 GiB over): on cpu they are written
        # again into the pass's own sets while the worker is stopped (a stopped process writes
        # nothing; it may have written into them during the pass); on cuda a stopped process's
        # queued GPU work still runs, so each judged call's values are made again from the plan in
        # this process's own memory, one call at a time
        recheck = Recheck()
        if cpu:
            with worker.paused():
                self.values.write(sets, bound_sets, plan)
                self.judge._recheck(entries, [bound_sets[warmup + i] for i in judged], recheck)
        else:
            while entries and not recheck.failed:  # a failed call ends the re-check (Judging._recheck)
                entry = entries.pop(0)
                call = plan[warmup + judged[entry[1]]]
                # the reference runs on these values uncopied, written again before the oracle side
                self.judge._recheck([entry], {entry[1]: self.values.call_inputs(sets, call)}, recheck,
                                    remake=lambda args, call=call: self.values.call_inputs(sets, call, args))
                recheck.refs.clear()  # one call's reference side at a time: no later call reads it
                recheck.stale.clear()
                del entry
        self.ctx.state.evidence.setdefault("bound_rechecks", []).extend(recheck.checked)
        del recheck
        self.ctx._phase_peak("bound-recheck")  # the re-check apart from the trusted loops that follow
        self._null_wait_share = 0.0
        null, null_cpu, floors = self._trusted_loops(worker, bound_sets, flush, calls, warmup,
                                                     lambda: self.values.write(sets, bound_sets, plan))
        self.values.kept = {}  # the pass's kept draws (a get_inputs() no seed reproduces) not held past it
        self.ctx._phase_peak("bound-pass")  # each pass's loops apart from the next pass's re-check
        cpu_figures = {}
        if cpu and threads1 and all1.get("worker") is not None and all0.get("worker") is not None:
            spent = [ms - threads0.get(tid, 0.0) for tid, ms in threads1.items()]
            # each process's own figure, and the cgroup's: a process that began and ended inside
            # the request is in the cgroup's figure and, once waited for, in its parent's
            counted = [p for p in all1 if p not in ("worker", "cgroup")]
            processes = sum(all1[p] - all0.get(p, 0.0) for p in counted)
            group = (all1["cgroup"] - all0["cgroup"]) if all1.get("cgroup") is not None \
                and all0.get("cgroup") is not None else None
            tick_ms = 1e3 / os.sysconf("SC_CLK_TCK")
            cpu_figures = dict(busiest_thread_ms=max(spent),
                               all_threads_ms=bound_plan.tree_cpu_ms(sum(spent), processes, group, len(counted), tick_ms),
                               null_cpu_ms=null_cpu[0], null_all_cpu_ms=null_cpu[1], baseline_cpu_ms=null_cpu[2],
                               cores=procfs.affinity_cores(worker.proc.pid),
                               cgroup_cpu=all1.get("cgroup") is not None and all0.get("cgroup") is not None)
        # the one call is not taken off (its claimed time is the candidate's figure): the allowance errs
        # toward the candidate by at most that call
        allow = bound_plan.REQUEST_ALLOW_MS if cpu else bound_plan.cuda_request_allow(one_call_ms, 0.0)
        host_wait = 0.0
        if not cpu and wait0 is not None and wait1 is not None:
            main = (worker.proc.pid, worker.proc.pid)
            main_cpu = threads1.get(main, 0.0) - threads0.get(main, 0.0)
            live = sum(ms - threads0.get(t, 0.0) for t, ms in threads1.items())
            # each process's figure holds its ended threads and waited-for children; the cgroup's,
            # every process that ran in the jail
            procs = sum(ms - all0.get(p, 0.0) for p, ms in all1.items()
                        if p not in ("worker", "cgroup") and ms is not None and all0.get(p) is not None)
            group = (all1["cgroup"] - all0["cgroup"]) if all1.get("cgroup") is not None \
                and all0.get("cgroup") is not None else 0.0
            host_wait = bound_plan.outside_wait_ms(wait1 - wait0, max(live, procs, group) - main_cpu,
                                             self._null_wait_share * wall)
        return rule.BoundPass(wall_ms=wall, calls=calls + warmup, null_ms=null, baseline_floor_ms=floors,
                              request_allow_ms=allow, host_wait_ms=host_wait, **cpu_figures)

    def _trusted_loops(self, worker: CandidateProcess, bound_sets: list, flush: int | None, calls: int,
                       warmup: int, rewrite) -> tuple[float, tuple, dict]:
        """The loop of the pass run here on the pass's own input sets, with the candidate's tree
        stopped (``rewrite()`` first puts the pass's values back: the sets are shared, and the
        candidate may have written into them), on this process's clock: with a null forward (its
        outputs made once) and with each baseline. Returns (the null's wall ms per call, (the null's busiest thread and all threads,
        CPU ms per call, {baseline: (busiest thread, all threads) CPU ms per call}), {baseline: wall
        per call minus the null's, ms})."""
        rp = self.ctx.rp
        bl.apply_flags(self.ctx.fp32_flags)

        def loop(fn) -> tuple[float, float, float]:
            """(wall, busiest thread's CPU, all threads' CPU) per call of this process, ms."""
            def copy_out(i: int, out: object) -> None:
                copier.copy(tuple(out) if isinstance(out, (tuple, list)) else (out,), i)

            me = os.getpid()
            th0, c0, t0 = procfs.thread_cpu_ms(me), time.process_time(), time.perf_counter()
            time_calls(fn, bound_sets, device=rp.device, warmup=warmup, trials=calls, flush_bytes=flush,
                       first_set=0, copy_out=copy_out)
            wall, c1, th1 = time.perf_counter() - t0, time.process_time(), procfs.thread_cpu_ms(me)
            per = calls + warmup
            busiest = max((ms - th0.get(tid, 0.0) for tid, ms in th1.items()), default=0.0)
            return wall * 1e3 / per, busiest / per, (c1 - c0) * 1e3 / per

        # cuda: the least wall of a few repeats (kbv.checks.bound_plan.CUDA_LOOP_REPEATS); cpu: one
        # loop, its CPU time the figure
        repeats = bound_plan.CUDA_LOOP_REPEATS if rp.device.type == "cuda" else {}
        floors, cpu = {}, {}
        with worker.paused():  # one stop: the candidate writes nothing into the shared sets meanwhile
            rewrite()
            with torch.no_grad():  # the set itself where the reference writes no input (no clone held)
                made = rp.model(*(inp.clone_args(bound_sets[0]) if rp.mutates_inputs else bound_sets[0]))
            made = tuple(made) if isinstance(made, (tuple, list)) else (made,)
            # the loops' slots hold the reference's outputs alone, not the candidate worker's slack of
            # SLOT_SLACK x (on cuda an output-heavy problem's largest buffer here); a reference whose
            # output size follows its values (nonzero, unique: these outputs' bytes are not the
            # nominal ones) may make a larger one in a later loop, and gets the worker's slot size
            fixed = sum(t.numel() * t.element_size() for t in made) == rp.output_bytes
            slot = min(self.ctx._slot_bytes, max(rawcopy.ALIGN, rawcopy.slot_need(made, rp.device.type))) \
                if fixed else self.ctx._slot_bytes
            copier = rawcopy.SlotCopier(rp.device, slot, calls, self.ctx._slot_touch)
            tid = threading.get_native_id()
            wait0, t0 = procfs.run_delay_ms(os.getpid(), tid), time.perf_counter()
            null, null_busiest, null_all = min(loop(lambda *args: made) for _ in range(repeats.get("null", 1)))
            wait1, span = procfs.run_delay_ms(os.getpid(), tid), (time.perf_counter() - t0) * 1e3
            #: the share of its time this process's timing thread waited for a CPU in the null loops:
            #: the host's load as the trusted side sees it (kbv.checks.bound_plan.outside_wait_ms)
            self._null_wait_share = (wait1 - wait0) / span if wait0 is not None and wait1 is not None \
                and span > 0 else 0.0
            # the null's outputs are not held through the baselines' loops, where each call makes its
            # own: an output-heavy problem's loop held the slot (2·O), them and two calls' outputs,
            # 5·O (KernelBench-Verified's small-K matmul: 20.2 GiB of a 17.1 GiB bound, H100, 2026-12-07)
            del made
            for b in self.ctx.config.baselines:
                bl.apply_flags(bl.flags_for(b))
                runs = []
                for _ in range(repeats.get("baseline", 1)):
                    if rp.mutates_inputs:  # a reference that writes its inputs leaves the next loop the same values
                        rewrite()
                    runs.append(loop(rp.model))
                w, busiest, all_ = min(runs)
                floors[b], cpu[b] = w - null, (busiest, all_)
        bl.apply_flags(self.ctx.fp32_flags)
        del copier
        return null, (null_busiest, null_all, cpu), floors
