"""The timing stage: the candidate and the baselines timed on identical rotating inputs in
interleaved rounds, every timed call's inputs changed, and the outputs of a secret subset of
timed calls re-checked against the reference (taxonomy 5, 6, 11); more rounds until each
speedup's interval is narrow enough (the adaptive stop, :mod:`kbv.pipeline.adaptive`); then the
sync pass, the roofline and op-count checks and memory (their own modules). The rounds and the
sync pass run in the job's quiet context (builds and the next job's worker stopped)."""

from __future__ import annotations

import contextlib
import math
import secrets
import time
from typing import Callable

import numpy as np
import torch

from kbv.checks import bound_plan
from kbv.checks import memory_growth_rules as growth_rule
from kbv.checks import output_rules as out_rule
from kbv.checks import worker_calls as calls_rule
from kbv.checks.timing_rules import implausible_times, plan_leak
from kbv.model.records import Measurement
from kbv.pipeline.bound_pass import BoundStage
from kbv.pipeline.context import Context
from kbv.pipeline.memory_stage import MemoryStage
from kbv.pipeline.profile_stage import ProfileCheck
from kbv.pipeline.repeat import RepeatGain
from kbv.pipeline.roofline import Roofline
from kbv.pipeline.sync import SyncChecks
from kbv.pipeline.adaptive import StopRule, decide, half_widths
from kbv.pipeline.adaptive import evidence as stop_evidence
from kbv.pipeline.outcome import Outcome, Stop
from kbv.pipeline.paused_baselines import PausedCpu, confirm_paused, time_paused
from kbv.pipeline.judging import Judging
from kbv.pipeline.schedule import (  # noqa: F401 - the stage's names, also used from here
    CPU_TIMING_INPUT_BYTES, MAX_TIMING_SETS, MIN_TRIALS_PER_ROUND, RECHECK_BYTES_PER_ROUND, RECHECK_BYTES_PER_ROUND_CPU,
    RECHECKS_PER_ROUND, TIMING_INPUT_MEMORY_FRACTION, TIMING_SETS_SMALL_BYTES, Recheck, baseline_refresh, judged_at_once,
    recheck_at_once, recheck_plan, trials_within_budget)
from kbv.processes import footprint as fp
from kbv.processes import gpushare
from kbv.processes.candidate import CandidateProcess
from kbv.processes.held_memory import HeldMemory
from kbv.reference import inputs as inp
from kbv.reference.mutation import timed_mutation
from kbv.sandbox import numeric_flags as bl
from kbv.sandbox import protocol, rawcopy
from kbv.sandbox.peak_memory import nbytes
from kbv.sandbox.limits import shm_quota_bytes
from kbv.sandbox.timer import l2_flush_bytes, time_calls

#: bytes reserved per call in the output slots: the reference's outputs twice (an honest output with
#: padded strides spans more than its elements), plus a page (kbv choice).
SLOT_SLACK = 2
#: the slot buffer's share of free device memory (cuda) or available host memory (cpu), and its cap
#: in bytes: the bound pass copies every timed call's outputs into its own slot (kbv choice).
SLOT_MEMORY_FRACTION = 1 / 16
SLOT_BUFFER_CAP = {"cpu": 256 << 20, "cuda": 4 << 30}
#: the most slots (calls of one bound-pass request).
MAX_SLOTS = 512


def slot_plan(output_bytes: int, device: torch.device) -> tuple[int, int]:
    """(bytes per slot, slots) of the candidate worker's output slot buffer (:mod:`kbv.sandbox.rawcopy`):
    each slot holds one call's outputs (``output_bytes``, the reference's, times :data:`SLOT_SLACK`
    plus 4 KiB, 256-byte aligned); as many slots as fit in :data:`SLOT_MEMORY_FRACTION` of free memory
    and :data:`SLOT_BUFFER_CAP` (on cpu also a quarter of the candidate's /dev/shm quota), between 1
    and :data:`MAX_SLOTS`."""
    per = rawcopy.aligned(int(output_bytes) * SLOT_SLACK + 4096)
    free = fp.device_free_bytes(device) if device.type == "cuda" else fp.host_available_bytes()
    budget = min(SLOT_BUFFER_CAP.get(device.type, 256 << 20), free * SLOT_MEMORY_FRACTION)
    if device.type == "cpu":  # the buffer lives in the candidate's /dev/shm, beside an output it shares
        budget = min(budget, shm_quota_bytes() // 4)
    return per, int(max(1, min(MAX_SLOTS, budget // per)))


class Timing:
    """Timed rounds and the timed re-checks."""

    def __init__(self, ctx: Context, judge: Judging, bound: BoundStage, repeat: RepeatGain, sync: SyncChecks,
                 roofline: Roofline, profile: ProfileCheck, memory: MemoryStage) -> None:
        """``judge`` judges the re-checked calls; the others run after the rounds, in this order:
        the repeat-gain check, the bound pass, the sync pass, the roofline, the op count and, on
        cuda, memory."""
        self.ctx, self.judge, self.bound, self.repeat = ctx, judge, bound, repeat
        self.sync, self.roofline, self.profile, self.memory = sync, roofline, profile, memory

    def _timing_sets(self) -> list:
        """Up to :data:`MAX_TIMING_SETS` rotating timing sets, drawn on the device, as many as fit
        in :data:`TIMING_INPUT_MEMORY_FRACTION` of free device memory (cuda) or of available host
        memory (cpu, at most :data:`CPU_TIMING_INPUT_BYTES`), and in ``EvalConfig.timing_input_bytes``
        when set, each counted three times (ours, the staging copy, the candidate's); never fewer
        than two."""
        get_inputs = self.ctx.rp.module.get_inputs
        dev = self.ctx.rp.device
        first = inp.to_device(inp.draw(get_inputs, inp.secret_seed(), dev), dev, self.ctx.config.precision)
        size = max(1, nbytes(first))
        if dev.type == "cuda":
            budget = fp.device_free_bytes(dev) * TIMING_INPUT_MEMORY_FRACTION / 3
        else:
            budget = min(CPU_TIMING_INPUT_BYTES, fp.host_available_bytes() * TIMING_INPUT_MEMORY_FRACTION / 3)
        if self.ctx.config.timing_input_bytes:
            budget = min(budget, self.ctx.config.timing_input_bytes / 3)
        # at least two, whatever the size: every timed call takes a fraction of its values from
        # another set (kbv.sandbox.timed_inputs.mix_values), so no call repeats another's inputs
        count = int(max(2, min(MAX_TIMING_SETS, budget // size, max(TIMING_SETS_SMALL_BYTES, 2 * size) // size)))
        sets = [first] + [inp.to_device(inp.draw(get_inputs, inp.secret_seed(), dev), dev,
                                         self.ctx.config.precision) for _ in range(count - 1)]
        return sets

    def _timing(self, worker: CandidateProcess, after_timed: Callable[[], None] | None = None) -> None:
        """The timing stage; ``after_timed`` runs once the timed calls are over, before the op
        count (whose dispatch mode a torch.compile'd forward cannot run under, and does not forget)."""
        t0 = time.perf_counter()
        cfg = self.ctx.config
        sets = self._timing_sets()
        slot_bytes, slots = slot_plan(self.ctx.rp.output_bytes, self.ctx.rp.device)
        # no more slots than a bound pass can fill: the buffer is shared (on cpu written whole when
        # it is made), and its size was 256 MiB for a 1 MiB ReLU whose passes fill 64 slots
        in_bytes = sum(a.numel() * a.element_size() for a in sets[0] if isinstance(a, torch.Tensor))
        slots = min(slots, bound_plan.max_bound_calls(in_bytes, self.ctx.rp.device.type))
        # on cpu each slot is written up to the reference's outputs (plus a page) when it is made:
        # the slack behind them is backed only where an output needs it
        touch = min(slot_bytes, rawcopy.aligned(max(self.ctx.rp.output_bytes, 0) + 4096))
        self.ctx._slot_touch = touch
        if self.ctx.rp.device.type == "cuda":  # what of the candidate worker's device memory is kbv's, from now on
            fp.release_device_cache(self.ctx.rp.device)  # the correctness stage's cache: room for the staging
            self.ctx._held_before_staging = calls_rule.candidate_at_most(*fp.device_memory(self.ctx.rp.device))
            self.ctx._staged_bytes = calls_rule.staged_timing_bytes(in_bytes, len(sets), 2, slot_bytes * slots)
            self.ctx._staged_kept = calls_rule.kept_output_bytes(self.ctx.rp.output_bytes, cfg.held_output_bytes)
        ready = self.ctx._call(worker, protocol.SetTimingInputs(tuple(tuple(inp.shared_clone(s)) for s in sets),
                                                            slot_bytes, slots, cfg.held_output_bytes, touch),
                           "time", cfg.call_timeout_s)
        if (not isinstance(ready, protocol.TimingReady) or type(ready.slots) is not torch.Tensor
                or ready.slots.dtype != torch.uint8 or ready.slots.numel() < slot_bytes * slots):
            raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: time: malformed reply")
        self.ctx._slots, self.ctx._slot_bytes, self.ctx._slot_count = ready.slots, slot_bytes, slots
        self.ctx._staging_done = True
        fp.release_device_cache(self.ctx.rp.device)  # the sets' IPC clones, once the worker holds its copies
        flush = l2_flush_bytes(self.ctx.rp.device)
        if self.ctx.rp.device.type == "cuda":  # other work on the GPU, recorded beside every figure it may slow
            self.ctx.state.evidence["gpu_share"] = {"start": gpushare.read(self.ctx.rp.device.index or 0).evidence()}
        if self.ctx.elf_prefetch is not None:  # no nm and no parsing beside a timed call
            self.ctx.elf_prefetch.stop()
        with self._quiet_timing():  # the build pool's builds and the next job's worker stopped
            samples, clock = self._rounds(worker, sets, flush)
            self.ctx._phase_peak("rounds")  # apart from the bound pass's: where a device peak rose
            bad = implausible_times(samples["candidate"])
            if bad:
                self.ctx._add(out_rule.implausible_times_finding(bad))
                raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: implausible candidate times {bad[:3]} ms")
            for subject, times in samples.items():
                self.ctx.state.timing[subject] = Measurement(subject, cfg.device, tuple(times), cfg.warmup, flush, clock)
            if cfg.integrity:  # the trusted side's own clock bounds what the candidate's claims may credit
                self.bound._bound(worker, sets, flush, samples)
                self.ctx.state.timing["candidate"] = Measurement("candidate", cfg.device, tuple(samples["candidate"]),
                                                             cfg.warmup, flush, clock)
                self.ctx._phase_peak("bound-pass")
            cand = self.ctx.state.timing["candidate"].median_ms
            for b in cfg.baselines:
                self.ctx.state.speedup[b] = self.ctx.state.timing[b].median_ms / cand
            self.ctx.state.evidence["timing_input_sets"] = len(sets)
            self.ctx.state.evidence["baselines"] = bl.baseline_flags(cfg.baselines)
            self.ctx._phase_peak("timing-rounds")
            if cfg.integrity:
                self.sync._sync_pass(worker, sets)
                self.ctx._phase_peak("sync-pass")
        if after_timed is not None:
            after_timed()
        if cfg.integrity:
            self.roofline._roofline(worker, sets)
            self.profile._reference_ops(worker, sets)
            self.ctx._phase_peak("op-count")
        if self.ctx.rp.device.type == "cuda":
            self.ctx.state.evidence["gpu_share"]["end"] = gpushare.read(self.ctx.rp.device.index or 0).evidence()
            self.memory._memory(worker, sets[0])
        del sets
        self.ctx.state.phase_seconds["timing"] = time.perf_counter() - t0
        self.ctx._phase_peak("timing")

    @contextlib.contextmanager
    def _quiet_timing(self):
        """The context of the timed work (``quiet`` of the job: :func:`kbv.pipeline.prestart.quiet`);
        records whether the build pool had stopped its builds (``builds_during_timing``)."""
        if self.ctx.quiet is None:
            yield
            return
        with self.ctx.quiet() as flag:
            yield
        ack = getattr(flag, "acknowledged", None)
        if ack is not None:
            self.ctx.state.evidence["builds_during_timing"] = "stopped" if ack else "not acknowledged"

    def _rounds(self, worker: CandidateProcess, sets: list, flush: int | None) -> tuple[dict, str]:
        """The interleaved timing rounds, planned and adaptive (:mod:`kbv.pipeline.adaptive`).
        Returns the per-call times of every subject and the clock."""
        cfg = self.ctx.config
        # cfg.trials timed calls per subject, split as evenly as possible over the rounds; after the
        # first round a round is cut to fit cfg.time_budget_ms at the slowest subject's median so far
        # (the same count for every subject, so they stay side by side); rounds past the planned ones
        # (the adaptive stop) are the size of the last planned one, cut the same way
        rounds = min(cfg.timing_rounds, cfg.trials)
        split = [cfg.trials // rounds + (1 if r < cfg.trials % rounds else 0) for r in range(rounds)]
        rule = StopRule.from_config(cfg)
        subjects = ["candidate", *cfg.baselines]
        samples: dict[str, list] = {s: [] for s in subjects}
        # eager-tf32 is eager-fp32 where the reference runs no op the TF32 switches reach, or on cpu
        # where both flag sets give the same bits: timed once
        mirrored = ({"eager-tf32": "eager-fp32"} if {"eager-tf32", "eager-fp32"} <= set(cfg.baselines)
                    and (self.judge._tf32_inert(sets[0]) or self.judge.tf32_same_on_cpu(sets[0])) else {})
        clock = "cuda-event" if self.ctx.rp.device.type == "cuda" else "perf_counter"
        model = self.ctx.rp.model
        recheck = Recheck()
        kept: list = []
        g = torch.Generator().manual_seed(secrets.randbits(62))
        skip = self.ctx._structured()
        plain_round = secrets.randbelow(rounds)
        refresh = baseline_refresh(bool(flush), self.ctx.rp.mutates_inputs)
        done = 0  # timed calls per subject so far
        per_round_done = []
        paused = PausedCpu()  # what the stopped candidate tree ran over the baseline blocks
        # what the candidate's tree holds after each round (a leak: kbv.checks.memory_growth_rules); the
        # first reading follows round 1, whose first calls make the timing path's one-time allocations
        shared = (self.ctx.state.evidence.get("gpu_share", {}).get("start", {}).get("other_processes") or 0) > 0
        calls, held = 0, HeldMemory(lambda: worker.jail.tree(worker.proc.pid), worker.proc.pid, self.ctx.rp.device,
                                    gpu_shared=shared)
        started = time.perf_counter()
        r = 0
        while True:
            round_start = time.perf_counter()
            per_round = split[min(r, rounds - 1)]
            if r:
                cost = max(float(np.median(t)) if t and all(math.isfinite(x) for x in t) else math.inf
                           for t in samples.values())
                per_round = trials_within_budget(per_round, cost if math.isfinite(cost) else 0.0,
                                                 cfg.time_budget_ms)
            order = subjects[r % len(subjects):] + subjects[: r % len(subjects)]  # rotate: no fixed position
            # a secret number of extra warmup calls, and timed calls whose outputs are re-checked (all, or a
            # secret subset): the candidate cannot tell a checked call from a timed one (taxonomy 5, 6)
            warmup = cfg.warmup + secrets.randbelow(cfg.warmup + 1) if cfg.integrity else cfg.warmup
            keep = planned = recheck_plan(per_round, self.ctx.rp.output_bytes, self.ctx.rp.device.type) \
                if cfg.integrity else ()
            first = done % len(sets)
            # every timed call of the candidate: with two or more sets, 1/8 of its elements from another
            # set (kbv.sandbox.timed_inputs.mix_values), so a whole-input or diff-and-patch cache never gains; then one
            # element per tensor changed. One secret call per round of three or more instead gets the
            # values of this round's first warmup call with the single change only: a cache keyed by a
            # sample of the input hits there and answers wrongly, so it is named, not only defeated
            # (t11-sniff-sample-cache; with the plain rotating set it hit only by chance)
            # (rounds of fewer than three calls: one secret planned round carries it, so a verification
            # with few trials still has one; kbv eval --trials 6 splits into rounds of 2)
            plain = secrets.randbelow(per_round) if cfg.integrity and cfg.trials >= 3 and (
                per_round >= 3 or r == plain_round) else -1
            if plain >= 0:  # the plain call is always judged: a sample-keyed cache is named only there
                keep = tuple(sorted({*keep, plain}))
            mix = tuple((i, (first, 0, skip, 1.0) if i == plain else
                         ((first + warmup + i + 1 + secrets.randbelow(len(sets) - 1)) % len(sets),
                          secrets.randbits(62), skip))
                        for i in range(per_round)) if cfg.integrity and len(sets) > 1 else ()
            base = {i: first if i == plain else (first + warmup + i) % len(sets) for i in range(per_round)}
            # the changed element's value comes from the next timing set (another draw, so inside
            # the problem's domain): no spare draw of the problem's size is held
            mutate = tuple((i, timed_mutation(sets[base[i]], sets[(base[i] + 1) % len(sets)], g, skip, self.ctx._kinds()))
                           for i in range(per_round)) if cfg.integrity else ()
            mixes = dict(mix)
            mutations = {done + i: (mixes.get(i), m) for i, m in mutate}
            at_once = None
            if cfg.integrity and judged_at_once(per_round, len(planned), self.ctx.rp.output_bytes,
                                                self.ctx.rp.device.type):
                def at_once(entry, mutations=mutations):
                    self.judge._recheck([entry], sets, recheck, mutations)
            for subject in order:
                if subject in mirrored:
                    continue
                if subject == "candidate":
                    times, kept, clock = self._time_candidate(worker, sets, first, warmup, per_round, flush,
                                                              dict(mix), dict(mutate), set(keep), done, skip,
                                                              at_once)
                else:
                    bl.apply_flags(bl.flags_for(subject))
                    times, clock = time_paused(worker, paused, lambda: time_calls(
                        model, sets, device=self.ctx.rp.device, warmup=warmup, trials=per_round, flush_bytes=flush,
                        first_set=first, refresh=refresh, sync_each=True))
                samples[subject].extend(times)
            for subject, twin in mirrored.items():  # the same calls, the same times (kbv.checks.tf32_rules)
                samples[subject] = list(samples[twin])
            if cfg.integrity:  # judged and dropped round by round: at most one round's outputs held
                self.judge._recheck(kept, sets, recheck, mutations)
            kept = []
            done += per_round
            calls += warmup + per_round + (1 if cfg.integrity and per_round else 0)  # the repeat call
            # a full collection in the worker first, its freed heap given back (a Ping): cyclic garbage
            # of the round's calls, which the timed calls only defer (kbv.sandbox.timer.gc_paused), is not held
            self.ctx._call(worker, protocol.Ping(trim=True), "time", cfg.call_timeout_s)
            held.sample(calls)
            per_round_done.append(per_round)
            r += 1
            widths = (half_widths(samples, cfg.baselines, self.ctx.rp.ref.sha256, self.ctx.candidate.sha256, per_round_done)
                      if r >= rounds and rule.target > 0 else {})
            now = time.perf_counter()
            reason = decide(rule, r, now - started, now - round_start, widths)
            if reason is not None:
                self.ctx.state.evidence["timing_stop"] = stop_evidence(reason, rule, r, now - started, widths)
                break
        bl.apply_flags(self.ctx.fp32_flags)
        self.ctx.state.evidence["timed_rechecks"] = recheck.checked
        if cfg.integrity and paused.needs_confirmation():  # ran while stopped, short of proof: look again
            confirm_paused(worker, paused, lambda: self._untimed_call(worker, flush))
        self.ctx.state.evidence["paused_cpu_ms"] = paused.evidence()
        self.ctx._add(paused.finding())
        self.ctx._add(paused.processes_finding())
        growth, found = growth_rule.judge(held.host, held.device, held.source, self.ctx.rp.output_bytes or 0,
                                          cfg.held_output_bytes, held.note)
        self.ctx.state.evidence["memory_growth"] = growth
        for f in found:
            self.ctx._add(f)
        self._plan_leak()
        if cfg.integrity:
            self.repeat._repeat_gain(worker, sets)
        self.ctx.state.evidence["timed_calls_per_round"] = per_round_done
        self.ctx.oracle.release()
        return samples, clock

    def _time_candidate(self, worker: CandidateProcess, sets: list, first: int, warmup: int, per_round: int,
                        flush: int | None, mix: dict, mutate: dict, keep: set, done: int, skip: tuple,
                        at_once: Callable[[tuple], None] | None = None) -> tuple[list, list, str]:
        """One round of the candidate's calls, one request each (:class:`kbv.sandbox.protocol.TimedCall`):
        each call's input changes are revealed with it, warmup and timed calls look the same, and
        every call's output comes back shared; the outputs of the calls in ``keep`` (chosen here,
        never sent) are copied while the worker is stopped, so the judged output is the one the
        call returned, read by the trusted side, and the pages of the shared staging buffers read
        for it are unmapped here after the copy (:func:`kbv.processes.footprint.drop_view`). With
        ``at_once`` (:func:`recheck_at_once`) each kept ``(call index, timing set, outputs)`` is
        handed to it once the worker runs again, before the next call; else they are returned.
        With the detectors on, one secret timed call is followed by one more on its values with
        one more element per tensor changed, whose cost is kept apart
        (:meth:`kbv.pipeline.repeat.RepeatGain._repeat_gain`), never a sample.
        Returns (times of the timed calls in ms, kept calls, clock)."""
        cfg = self.ctx.config
        n = len(sets)
        times: list = []
        kept: list = []
        clock = "cuda-event" if self.ctx.rp.device.type == "cuda" else "perf_counter"
        again = secrets.randbelow(per_round) if cfg.integrity and per_round else -1
        calls = []  # (timed index, -1 for the repeat, None for warmup; set index; mix; changes; judged)
        for j in range(warmup + per_round):
            i = j - warmup
            if i < 0:  # warmup: the same kind of request, with a mix of its own (never judged); the
                # first one gets set ``first``'s values whole, in the same form as the secret plain call
                idx = (first + j) % n
                if not cfg.integrity:
                    mx = ()
                elif j == 0:
                    mx = (first, 0, skip, 1.0)
                else:
                    mx = ((idx + 1 + secrets.randbelow(n - 1)) % n, secrets.randbits(62), skip)
                calls.append((None, idx, mx, (), False))
                continue
            idx = (first + warmup + i) % n
            mx, mt = tuple(mix.get(i, ())), tuple(mutate.get(i, ()))
            calls.append((i, idx, mx, mt, cfg.integrity and i in keep))  # judged: decided here, never sent
            if i == again:
                more = timed_mutation(sets[idx], sets[(idx + 1) % n], torch.Generator().manual_seed(
                    secrets.randbits(62)), skip, self.ctx._kinds())
                calls.append((-1, idx, mx, mt + more, False))
        for i, idx, mx, mt, judged in calls:
            entry = None
            with self.ctx._held(worker, protocol.TimedCall(idx, flush, mx, mt), "time", cfg.call_timeout_s,
                            hold=judged) as reply:
                self.ctx._timed_reply(reply)
                if i is not None and i >= 0:
                    times.append(float(reply.time_ms))
                    clock = str(reply.clock)
                    if judged:  # the worker is stopped: the outputs as this call's copy left them
                        entry = (done + i, idx, [t.clone() for t in self.ctx._views])
                        fp.drop_view(self.ctx._slots)
                    if not (len(mx) > 3 and mx[3] >= 1):  # the plain call repeats a warmup call's values
                        self.ctx._repeat_costs["fresh"].append(self.ctx._call_cost(reply))
                elif i == -1:
                    self.ctx._repeat_costs["repeat"].append(self.ctx._call_cost(reply))
                del reply
            if entry is not None:
                if at_once is not None:
                    at_once(entry)
                else:
                    kept.append(entry)
                del entry
        self.ctx._kept_times.setdefault("kept", []).extend(times[i] for i in sorted(keep) if i < len(times))
        self.ctx._kept_times.setdefault("other", []).extend(t for i, t in enumerate(times) if i not in keep)
        return times, kept, clock

    def _untimed_call(self, worker: CandidateProcess, flush: int | None) -> None:
        """One call the worker cannot tell from a timed one (a TimedCall on timing set 0): its reply
        checked as every timed reply is, its time and output unused."""
        with self.ctx._held(worker, protocol.TimedCall(0, flush, (), ()), "time", self.ctx.config.call_timeout_s,
                            hold=False) as reply:
            self.ctx._timed_reply(reply)

    def _plan_leak(self) -> None:
        """Judged timed calls systematically slower than the others (:func:`kbv.checks.timing_rules.plan_leak`);
        the medians go to the evidence."""
        medians, finding = plan_leak(self.ctx._kept_times.get("kept", []), self.ctx._kept_times.get("other", []))
        if medians is not None:
            self.ctx.state.evidence["judged_vs_other_calls_ms"] = medians
        if finding is not None:
            self.ctx.state.findings.append(finding)
