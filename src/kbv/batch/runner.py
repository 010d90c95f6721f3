"""``kbv run``: verify every (problem, candidate) pair of a batch into a resumable store.

Planning (:func:`kbv.batch.plan.plan_batch`, here under the same name) reads only file names and parses files statically
(:mod:`kbv.intake.layout`, :mod:`kbv.intake.problems`, :mod:`kbv.intake.candidates`); running (:func:`run_batch`) sends
each job to an :class:`~kbv.batch.evaluator.Evaluator` and writes its verdict to the
:class:`~kbv.batch.store.Store` the moment it arrives, in one transaction with the job's ``done`` state.

Resume semantics (what the store guarantees, see :mod:`kbv.batch.store`): a rerun skips jobs that are
done and redoes those left ``running`` by a dead process, so a ``kill -9`` at any instant loses at
most the job in flight and never duplicates a verdict. A job is identified by the file hashes, so
when a candidate or problem file changes between runs, the stored job of that (run, problem,
sample) slot is superseded: removed with its verdict (:func:`remove_superseded`) and run anew.

What happens to each kind of failure:

* **Candidate fails static vetting** (unreadable, not UTF-8, over the size limit, syntax error,
  no ``ModelNew``): a ``COMPILE_ERROR`` verdict built in the orchestrator without running anything
  (:func:`kbv.batch.evaluator.rejection_verdict`); the batch goes on.
* **Problem file is broken** (fails static vetting, or the reference worker raises
  :class:`~kbv.intake.problems.ProblemError`: import, constructor, ``get_inputs()``, reference forward on
  nominal inputs): the problem is *excluded* in the store with the reason and the file's hash,
  and its jobs are left **without a verdict** (pending), not stored as candidate failures: a
  broken reference says nothing about the candidates, and blaming them would lower every run's
  score for kbv's or the benchmark's fault. Excluded problems are left out of every metric and
  listed in the report. A rerun skips them while the file is unchanged; when the file changes
  (new hash), its exclusion is dropped and its jobs run; ``--retry-excluded`` retries them anyway
  (e.g. after an out-of-memory reference on a busy GPU).
* **kbv itself fails on a job** (an ``EVAL_ERROR`` verdict: the reference worker died or ran out
  of memory, the oracle failed, the problem does not fit the machine): the verdict is stored with
  its cause, listed in the outcome (``eval_errors``) and printed, and the batch goes on. It is not
  the candidate's verdict: it never counts in the metrics (:mod:`kbv.batch.metrics`), and a rerun
  retries the job (:meth:`kbv.batch.store.Store.requeue_statuses`) until it gets a candidate verdict.
* **kbv itself fails and raises** (:class:`~kbv.batch.evaluator.EvaluationError`): the job is
  released (pending again, so a rerun retries it), the error is recorded in the outcome and
  printed, and the batch goes on; ``kbv run`` then exits with code 3.
* **SIGINT / SIGTERM**: the job in flight is released, the workers are closed, and the outcome
  says ``interrupted`` (``kbv run`` exits 130).

Hidden test files (KernelBench-Verified ``hidden_tests/level<L>/<pid>_hidden.py``) found for a
problem are passed to the reference worker, which adds each list that ``get_hidden_inputs()``
returns (drawn under a secret seed) as a hidden input set ``HT1``, ``HT2``, ... beside D1–D4. A
hidden test file that does not parse or defines no ``get_hidden_inputs`` stops the plan before
anything runs; one that fails when called is recorded in the verdict's evidence
(``hidden_tests_error``) and ``kbv run`` exits 2 naming it. A file's bytes are part of its problem's
job keys, so a file added, fixed or changed supersedes those verdicts.
"""

from __future__ import annotations

import signal
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from kbv.batch.annotate import name_baselines, speedup_intervals
from kbv.batch.baseline_cache import attach_compile_speedup
from kbv.batch.evaluator import EvaluationError, Evaluator, rejection_verdict
from kbv.batch.jobs import hidden_tests_drift, problem_key
from kbv.batch.plan import (_SHA_CHARS, BROKEN_PREFIX, BatchPlan, BrokenProblemFile, ConfigMismatch, PlannedJob,
                            Selection, _sync_exclusions, broken_reason, check_config, check_hidden_tests, parse_ids,
                            plan_batch, record_hidden_tests, remove_superseded)
from kbv.batch.store import Store
from kbv.intake.problems import ProblemError
from kbv.model.records import EvalConfig, Status, Verdict
from kbv.model.measurements import ratio_text


@dataclass
class BatchOutcome:
    """What one ``kbv run`` invocation did."""

    total: int = 0  #: jobs in the plan.
    already_done: int = 0  #: done before this invocation started.
    finished: int = 0  #: verdicts written by this invocation (including static rejections).
    rejected: int = 0  #: of which static-vetting COMPILE_ERRORs.
    skipped_excluded: int = 0  #: jobs of excluded (broken) problems, left without a verdict.
    skipped_claimed: int = 0  #: jobs another live process was running.
    excluded: dict[str, str] = field(default_factory=dict)  #: problem key → reason, this invocation.
    internal_errors: list[tuple[str, str]] = field(default_factory=list)  #: (candidate path, error).
    interrupted: bool = False
    superseded: int = 0  #: stored jobs removed because their candidate or problem file changed.
    eval_errors: list[tuple[str, str]] = field(default_factory=list)  #: (candidate path, cause), this invocation.
    retried_eval_errors: int = 0  #: jobs whose stored EVAL_ERROR verdict this invocation ran again.
    statuses: Counter = field(default_factory=Counter)  #: status → verdicts of the plan's jobs (all time).
    #: why the run stopped early because kbv's source changed (None: it did not), see kbv.batch.provenance.
    source_changed: str | None = None
    builds: int = 0  #: builds the pool did.
    build_cpu_s: float = 0.0  #: CPU seconds of the pool's build processes, compilers included.
    build_s: float = 0.0  #: wall seconds of the pool's builds, summed.
    builds_stopped_s: float = 0.0  #: seconds the pool's builds were held stopped while a lane timed.
    lanes: int = 0  #: lanes that verified jobs.
    lane_busy_s: float = 0.0  #: seconds the lanes spent on jobs, summed.

    @property
    def pending(self) -> int:
        """Jobs of the plan still without a verdict."""
        return self.total - sum(self.statuses.values())


class _Interrupt:
    """Turns SIGTERM into KeyboardInterrupt while a batch runs (main thread only)."""

    def __enter__(self) -> None:
        self.old = None
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum, frame):  # noqa: ARG004
        raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)


def _status_text(counts: Counter) -> str:
    order = [s.value for s in Status]
    parts = [f"{s} {counts[s]}" for s in order if counts.get(s)]
    return " · ".join(parts) or "no verdicts yet"


def run_batch(plan: BatchPlan, store: Store, *, evaluator: Evaluator | None = None,
              console: Console | None = None, retry_excluded: bool = False,
              on_verdict: Callable[[PlannedJob, Verdict], None] | None = None,
              lanes: Sequence | None = None, builds: int = 0, jobs_per_build: int | None = None,
              lane_factory: Callable | None = None, prestart: bool = True, pause_builds: bool = True,
              allow_mixed: bool = False, allow_without_hidden_tests: bool = False) -> BatchOutcome:
    """Run every job of ``plan`` that has no verdict yet, writing each verdict as it finishes.

    Jobs go to *lanes*, each verifying one job at a time: by default one lane in this thread; with
    ``lanes`` (:class:`kbv.batch.executors.lanes.LaneSpec`: one per GPU, or several on cpu) one thread
    and one reference worker per lane; with ``lane_factory`` (``(work, post) -> [lane, ...]``, e.g.
    :func:`kbv.batch.executors.ray_executor.ray_lanes`) the lanes it makes. Claims, verdict writes and
    printing stay in this thread (one SQLite connection). With ``builds`` > 0, candidates whose
    import builds an extension (cpp, cuda) are first built in a pool of that many sandboxed build
    processes at idle CPU priority (:mod:`kbv.batch.executors.builds`), ahead of the lanes, and
    stopped while a lane times (``pause_builds``, :mod:`kbv.processes.quiet`); a build failure is
    decided there. A lane of its own (not a given ``evaluator``) holds its next job and has that
    candidate's worker started while the current job runs (``prestart``,
    :mod:`kbv.pipeline.prestart`). The verdicts do not depend on the lanes, the pool or the early
    workers. The store records the kbv source that made its verdicts (:mod:`kbv.batch.provenance`):
    another source is refused unless ``allow_mixed``, and a source changed on disk during the run
    stops it before a verdict of the changed files is written (``outcome.source_changed``).

    Args:
        evaluator: the evaluator of the single lane (one for ``plan.config.device`` is made, and
            closed, when None); not with ``lanes`` or ``lane_factory``.
        console: where progress and one line per verdict go (a quiet console when None).
        retry_excluded: drop this batch's problem exclusions first and run their jobs again.
        on_verdict: called after each verdict is stored.
        lanes: lane specifications (threads in this process).
        builds: builds at once in the build pool (0: no pool, each lane builds as it loads).
        jobs_per_build: ``MAX_JOBS`` of each build (default :data:`kbv.batch.executors.builds.DEFAULT_JOBS_PER_BUILD`).
        lane_factory: makes the lanes (another executor, e.g. Ray).
        prestart: start each lane's next candidate worker early.
        pause_builds: stop the build pool's processes while any lane times.
        allow_mixed: resume a store another kbv source wrote to, and go on if the source changes.
        allow_without_hidden_tests: replace verdicts made with hidden tests by ones made without
            (:func:`kbv.batch.plan.check_hidden_tests`).
    Raises:
        ConfigMismatch: the store holds results of another configuration, or verdicts made with
            hidden tests that this plan lacks (:func:`kbv.batch.plan.check_hidden_tests`).
        SourceMismatch: the store's verdicts come from another kbv source (and not ``allow_mixed``).
        ValueError: ``evaluator`` given with ``lanes`` or ``lane_factory``.
    """
    import collections
    import queue
    import shutil
    import tempfile

    from kbv.batch.provenance import check_source
    from kbv.model.source import SourceWatch

    from kbv.batch.executors.builds import DEFAULT_JOBS_PER_BUILD, BuildPool, needs_build
    from kbv.batch.executors.lanes import InlineLane, LaneSpec, ThreadLane

    if evaluator is not None and (lanes or lane_factory):
        raise ValueError("give an evaluator or lanes, not both")
    console = console or Console(quiet=True)
    check_config(store, plan.config)
    check_hidden_tests(store, plan, allow_without=allow_without_hidden_tests)
    source = SourceWatch()
    check_source(store, source.digest, allow_mixed=allow_mixed)
    record_hidden_tests(store, plan)
    out = BatchOutcome(total=len(plan.jobs))
    out.superseded = remove_superseded(plan, store)
    store.add_jobs(pj.job for pj in plan.jobs)
    keys = [pj.job.key for pj in plan.jobs]
    out.retried_eval_errors = len(store.requeue_statuses([Status.EVAL_ERROR.value], keys))
    states = store.job_states(keys)
    done_keys = [k for k in keys if states.get(k) == "done"]
    out.already_done = len(done_keys)
    out.statuses.update(store.verdict_statuses(done_keys).values())
    skip = _sync_exclusions(plan, store, retry_excluded)
    for b in plan.broken_files:
        out.excluded[b.key] = f"static vetting: {b.fault}"
    columns = (TextColumn("[bold]kbv run[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    progress = Progress(*columns, console=console, speed_estimate_period=3600.0)
    events: queue.Queue = queue.Queue()
    config, hidden = plan.config, plan.hidden_tests

    quiet_dir: str | None = None  #: the lanes' timing flags, when a pool stops its builds meanwhile

    def work(ev, pj: PlannedJob, peek=None):  # in a lane: the raw verdict, or the exception it raised
        try:
            ht = (hidden or {}).get((pj.problem.level, pj.problem.problem_id))
            extra = {k: v for k, v in (("next_candidate", peek), ("quiet_dir", quiet_dir)) if v is not None}
            return ev.evaluate(pj.problem, pj.candidate, config, hidden_tests=str(ht) if ht else None, **extra)
        except Exception as exc:  # noqa: BLE001 - handled in the dispatcher
            return exc

    def source_moved(res) -> str | None:
        """Why ``res`` must not be stored: kbv's files changed, or another source made it."""
        if allow_mixed:
            return None
        theirs = res.evidence.get("kbv_source") if isinstance(res, Verdict) else None
        if theirs is not None and theirs != source.digest:
            return f"a reference worker ran kbv source {theirs[:12]}, this run {source.digest[:12]}"
        if source.changed():
            return f"kbv's source files changed on disk during the run (it started from {source.digest[:12]})"
        return None

    def say(text: str) -> None:
        progress.console.print(text, highlight=False, markup=False, soft_wrap=True)

    claimed: dict[str, PlannedJob] = {}  #: claimed by this invocation, verdict not yet stored.
    pool: BuildPool | None = None
    runners: list = []
    todo_build: collections.deque = collections.deque()
    todo: collections.deque = collections.deque()
    ready: collections.deque = collections.deque()
    building = 0

    def record(pj: PlannedJob, verdict: Verdict) -> None:
        store.put_verdict(pj.job, verdict)
        claimed.pop(pj.job.key, None)
        out.finished += 1
        out.rejected += pj.rejection is not None
        out.statuses[verdict.status.value] += 1
        note = ""
        if verdict.status is Status.EVAL_ERROR:
            out.eval_errors.append((pj.candidate.path, verdict.message))
            note = " (kbv's failure, not the candidate's: left out of the metrics; a rerun retries it)"
        ci = verdict.evidence.get("speedup_interval_95") or {}
        if ci:
            note += " [" + ", ".join(f"{lb} {ratio_text(verdict.speedup[lb])}x (95% {ratio_text(lo)}-{ratio_text(hi)})"
                                     for lb, (lo, hi) in ci.items() if lb in verdict.speedup) + "]"
        throttled = (verdict.evidence.get("gpu_throttle") or {}).get("throttled")
        if throttled:
            note += f" [GPU clock throttled during this job: {', '.join(sorted(throttled))}; its times are suspect]"
        say(f"{verdict.status.value:<13} {pj.job.run} {problem_key(pj.problem)} sample {pj.candidate.sample_id}: "
            f"{verdict.message}{note}")
        progress.update(task, advance=1, counts=_status_text(out.statuses))
        if on_verdict is not None:
            on_verdict(pj, verdict)

    def release(pj: PlannedJob) -> None:
        store.release(pj.job)
        claimed.pop(pj.job.key, None)

    def result(pj: PlannedJob, res) -> None:
        pkey = problem_key(pj.problem)
        moved = out.source_changed or source_moved(res)
        if moved:
            release(pj)
            if out.source_changed is None:
                out.source_changed = moved
                say(f"KBV STOPPED   {moved}: the verdict of {pj.candidate.path} and those after it are not "
                    "stored (rerun from one kbv source, or --allow-mixed)")
            return
        if isinstance(res, ProblemError):
            release(pj)
            out.skipped_excluded += 1
            if pkey in skip:  # a second job of a problem already excluded
                return
            store.exclude_problem(pj.problem, broken_reason(pj.problem.sha256, res.fault))
            skip[pkey] = pj.problem.sha256[:_SHA_CHARS]
            out.excluded[pkey] = res.fault
            say(f"EXCLUDED      {pkey}: {res.fault} (its jobs get no verdict)")
        elif isinstance(res, BaseException):
            release(pj)
            if not isinstance(res, EvaluationError):
                raise res  # a bug of kbv's own: the batch stops, as it would in a single lane
            text = str(res)
            first = text.strip().splitlines()[0] if text.strip() else "internal error"
            out.internal_errors.append((pj.candidate.path, text))
            say(f"KBV ERROR     {pj.candidate.path}: {first} (job released)")
        else:
            drift = hidden_tests_drift(pj.job.config_hash, res.evidence.get("hidden_tests_sha256"),
                                       (hidden or {}).get((pj.problem.level, pj.problem.problem_id)))
            if drift and not res.evidence.get("hidden_tests_error"):  # the file was edited after the plan
                res = replace(res, evidence={**res.evidence, "hidden_tests_error": drift})
            record(pj, speedup_intervals(name_baselines(attach_compile_speedup(res, store))))

    def built(pj: PlannedJob, b) -> None:  # from a build thread
        events.put(("built", None, pj, b))

    try:
        with _Interrupt(), progress:
            task = progress.add_task("run", total=out.total, completed=out.already_done,
                                     counts=_status_text(out.statuses))
            if lane_factory is not None:
                runners = list(lane_factory(work, events.put))
            elif lanes or evaluator is None:
                runners = [ThreadLane(spec, work, events.put, prestart=prestart)
                           for spec in (lanes or [LaneSpec("main", config.device)])]
            else:
                runners = [InlineLane(evaluator, work, events.put)]
            use_pool = builds > 0 and lane_factory is None
            for pj in plan.jobs:
                if states.get(pj.job.key) == "done":
                    continue
                if use_pool and pj.rejection is None and needs_build(pj.candidate.backend, config.device):
                    todo_build.append(pj)
                else:
                    todo.append(pj)
            if todo_build:
                devices = [spec.env["CUDA_VISIBLE_DEVICES"] for spec in (lanes or [])
                           if "CUDA_VISIBLE_DEVICES" in spec.env] or None
                if pause_builds:
                    quiet_dir = tempfile.mkdtemp(prefix="kbv-quiet-")
                pool = BuildPool(config, built, size=builds, jobs_per_build=jobs_per_build or DEFAULT_JOBS_PER_BUILD,
                                 visible_devices=devices, pause_dir=quiet_dir)

            def take(source: collections.deque) -> PlannedJob | None:
                """The next job of ``source`` this invocation may run, claimed; None when empty."""
                while source:
                    pj = source.popleft()
                    if problem_key(pj.problem) in skip:
                        out.skipped_excluded += 1
                        continue
                    if not store.claim(pj.job):
                        out.skipped_claimed += 1
                        continue
                    claimed[pj.job.key] = pj
                    if pj.rejection is not None:
                        record(pj, rejection_verdict(pj.problem, pj.candidate, config, pj.rejection))
                        continue
                    return pj
                return None

            while True:
                # the build pool runs ahead: two builds queued per build process
                while pool is not None and building < 2 * pool.size and (pj := take(todo_build)) is not None:
                    ht = hidden.get((pj.problem.level, pj.problem.problem_id))
                    pool.submit(pj, pj.problem, pj.candidate, str(ht) if ht else None)
                    building += 1
                # every lane gets a job before any gets the one it holds behind it (prestart)
                for lane, limit in [(ln, 1) for ln in runners] + [(ln, ln.capacity) for ln in runners]:
                    while lane.busy < min(limit, lane.capacity):
                        pj = None
                        while ready and pj is None:
                            pj = ready.popleft()
                            if problem_key(pj.problem) in skip:
                                release(pj)
                                out.skipped_excluded += 1
                                pj = None
                        pj = pj or take(todo)
                        if pj is None:
                            break
                        lane.submit(pj)
                for lane in runners:  # a lane's peek names the job just handed to it (ThreadLane)
                    if hasattr(lane, "offered"):
                        lane.offered()
                busy = sum(lane.busy for lane in runners)
                if not (busy or building or ready or todo or todo_build or not events.empty()):
                    break
                try:
                    kind, lane, pj, payload = events.get(timeout=1.0)
                except queue.Empty:
                    continue
                if kind == "built":
                    building -= 1
                    if payload.verdict is not None:
                        result(pj, payload.verdict)
                    else:
                        ready.append(pj)
                else:
                    lane.busy -= 1
                    result(pj, payload)
                if out.source_changed:
                    break
    except KeyboardInterrupt:
        out.interrupted = True
    finally:
        if pool is not None:
            pool.close()
            out.builds, out.build_cpu_s, out.build_s = pool.builds, round(pool.cpu_s, 1), round(pool.build_s, 1)
            out.builds_stopped_s = round(pool.pauser.paused_s, 1) if pool.pauser is not None else 0.0
        for lane in runners:
            lane.close(abort=out.interrupted or out.source_changed is not None)
        out.lanes = len(runners)
        out.lane_busy_s = round(sum(getattr(lane, "busy_s", 0.0) for lane in runners), 1)
        if quiet_dir is not None:
            shutil.rmtree(quiet_dir, ignore_errors=True)
        for pj in list(claimed.values()):  # claimed, no verdict: pending again for a rerun
            release(pj)
    return out


def _verdict(pj: PlannedJob, ev: Evaluator, config: EvalConfig, store: Store,
             hidden_tests: dict | None = None) -> Verdict:
    if pj.rejection is not None:
        return rejection_verdict(pj.problem, pj.candidate, config, pj.rejection)
    ht = (hidden_tests or {}).get((pj.problem.level, pj.problem.problem_id))
    verdict = ev.evaluate(pj.problem, pj.candidate, config, hidden_tests=str(ht) if ht else None)
    return name_baselines(attach_compile_speedup(verdict, store))


__all__ = ["Selection", "parse_ids", "PlannedJob", "BatchPlan", "BrokenProblemFile", "BatchOutcome",
           "ConfigMismatch", "plan_batch", "run_batch", "check_config", "broken_reason", "BROKEN_PREFIX",
           "name_baselines", "speedup_intervals"]
