"""The build stage of ``kbv run``: candidates' extensions built in a pool of sandboxed processes
ahead of the lanes that verify them.

Building a candidate imports it (``load_inline`` runs at import or construction), so it is
untrusted code: each build runs in a fresh candidate worker, sandboxed as for a verification,
started by a reference worker of the pool's own (:class:`kbv.processes.reference_jobs.BuildJob` jobs of
:mod:`kbv.pipeline.reference_worker`, one pair per job). The build fills the content-hash build cache
(:func:`kbv.intake.candidates.build_dir`), so the lane's own load of the candidate finds it built.

A candidate whose build-only load fails gets its verdict in the pool: the reference worker runs its
verification, which stops at that same load before anything is timed (COMPILE_ERROR, or HACK when
the static scan caught a cheat), so a build failure is decided before any lane or GPU time is
spent. A build that timed out, whose worker died, or whose verification went past the load (the
candidate built the second time) gives no verdict here: the job goes to a lane as if never built.

Builds must not slow the timing in the lanes. With ``pause_dir`` (``kbv run``'s default, see
:mod:`kbv.processes.quiet`) every build process is stopped while any lane is in its timed rounds
or sync pass and continued after. Besides, every build process runs under ``SCHED_IDLE`` with
nice 19 (set on the pool's reference worker as soon as it is spawned; Linux passes both on to the
threads and processes it starts, so the candidate workers and their compilers inherit them). A ``SCHED_IDLE``
process gets a core only when no normal process wants it, so a lane's timing loop (a normal
process) takes the core back at once. ``MAX_JOBS`` (ninja's parallel jobs per build) is set in the
build workers' environment.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kbv.batch.evaluator import job_timeout_s
from kbv.model.records import EvalConfig, Status, Verdict, verdict_from_dict
from kbv.processes.reference_jobs import BuildJob, BuildPair

#: backends whose import or construction compiles something (``load_inline``/``load``). Triton
#: compiles at the first call: on cuda its build is a load and one call ahead
#: (:mod:`kbv.pipeline.warm_call`).
BUILT_BACKENDS = ("cpp", "cuda")

#: ninja's parallel jobs per build: a ``load_inline`` extension has one or two translation units.
DEFAULT_JOBS_PER_BUILD = 2


def pool_size(cores: int | None = None, jobs_per_build: int = DEFAULT_JOBS_PER_BUILD) -> int:
    """Builds run at once: the usable cores (``os.sched_getaffinity``) over ``jobs_per_build``, at
    least 1."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return max(1, cores // max(1, jobs_per_build))


def needs_build(backend: str, device: str = "cpu") -> bool:
    """True for a candidate backend whose import builds an extension, or which compiles at its
    first call on ``device`` (:func:`kbv.pipeline.warm_call.compiles_at_first_call`)."""
    from kbv.pipeline.warm_call import compiles_at_first_call

    return backend in BUILT_BACKENDS or compiles_at_first_call(backend, device)


@dataclass(frozen=True)
class BuildResult:
    """What the build stage found for one job."""

    built: str  #: ``"ok"``, or the one-line failure of the build-only load.
    verdict: Verdict | None = None  #: the job's verdict when the build failed (see the module doc).
    seconds: float = 0.0  #: wall time of the build (s).
    cpu_s: float = 0.0  #: CPU time of the build's processes (s): compilers, ninja, the build's worker.


def _lower_priority(pid: int) -> None:
    """Process ``pid`` (its main thread, and every thread and process it starts from now on) gets
    CPU only when nothing else wants it: ``SCHED_IDLE`` and nice 19."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, 19)
    except (AttributeError, OSError):
        pass
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def tree_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` and of its children it has reaped (a build's
    worker, ninja and the compilers, once the build's worker is closed), from /proc/<pid>/stat."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _accepted(verdict: Verdict | None) -> Verdict | None:
    """A pool verdict counts only when it stopped at the load, before anything was timed."""
    if verdict is None or verdict.timing or verdict.status not in (Status.COMPILE_ERROR, Status.HACK):
        return None
    if verdict.status is Status.HACK and any(r for r in verdict.input_sets):
        return None  # got past the load: a lane must verify it
    return dataclasses.replace(verdict, evidence={**verdict.evidence, "decided_in": "build pool"})


class BuildPool:
    """``size`` build threads, each with a reference worker of its own at idle CPU priority.

    :meth:`submit` queues one job; the result arrives as ``on_done(item, BuildResult)`` called from
    a pool thread. Use as a context manager; :meth:`close` stops every build (their processes are
    killed with their reference workers).

    Args:
        config: the batch's configuration (device, compile timeout).
        size: builds at once (see :func:`pool_size`).
        jobs_per_build: ``MAX_JOBS`` of each build.
        visible_devices: on cuda, ``CUDA_VISIBLE_DEVICES`` of each build thread in turn (the
            candidate is constructed on the device, so it needs one); None leaves it as it is.
        pause_dir: the lanes' timing-flag directory: every build process is stopped while a lane
            times (:class:`kbv.processes.quiet.BuildPauser`); None: idle priority only.

    Attributes:
        cpu_s, build_s, builds: CPU seconds, wall seconds and number of the builds done so far.
        pauser: the :class:`~kbv.processes.quiet.BuildPauser` (None without ``pause_dir``).
    """

    def __init__(self, config: EvalConfig, on_done: Callable[[Any, BuildResult], None], *, size: int,
                 jobs_per_build: int = DEFAULT_JOBS_PER_BUILD, visible_devices: Sequence[str] | None = None,
                 pause_dir: str | None = None):
        from kbv.processes.quiet import BuildPauser

        self.cpu_s = self.build_s = 0.0
        self.builds = 0
        self.config = config
        self.size = max(1, int(size))
        self.jobs_per_build = max(1, int(jobs_per_build))
        self._on_done = on_done
        self._queue: queue.Queue = queue.Queue()
        self._closed = threading.Event()
        self._refs: list = []
        self._lock = threading.Lock()
        devices = list(visible_devices or [])
        self._threads = [threading.Thread(target=self._serve, args=(devices[i % len(devices)] if devices else None,),
                                          name=f"kbv-build-{i}", daemon=True) for i in range(self.size)]
        self.pauser = BuildPauser(pause_dir, self._pids) if pause_dir else None
        for t in self._threads:
            t.start()

    def _pids(self) -> list[int]:
        """The pool's reference workers (roots of every build process tree)."""
        with self._lock:
            return [r.proc.pid for r in self._refs if r.proc.pid and r.proc.is_alive()]

    def submit(self, item: Any, problem, candidate, hidden_tests: str | None = None) -> None:
        """Queue the build of ``candidate`` (a :class:`~kbv.model.records.CandidateRef`) for ``problem``."""
        self._queue.put((item, problem, candidate, hidden_tests))

    def _spawn(self, visible: str | None):
        from kbv.pipeline.reference_worker import reference_main
        from kbv.processes.reference import ReferenceProcess
        from kbv.processes.handles import environ_set

        env = {**os.environ, "MAX_JOBS": str(self.jobs_per_build)}
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        with environ_set(env):  # inherited at spawn; os.environ is restored after
            ref = ReferenceProcess(self.config.device, reference_main)
        # at once, while the worker is still unpickling its start-up data (before torch makes a
        # thread): spawning at normal priority keeps this thread from holding the spawn lock at idle
        _lower_priority(ref.proc.pid)
        with self._lock:
            self._refs.append(ref)
        return ref

    def _serve(self, visible: str | None) -> None:
        import time

        ref = None
        timeout = self.config.compile_timeout_s + job_timeout_s(self.config)
        while not self._closed.is_set():
            try:
                got = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            item, problem, candidate, hidden = got
            t0 = time.monotonic()
            result = BuildResult("build stage failed")
            cpu0, restart = None, False
            try:
                if ref is None or not ref.proc.is_alive():
                    ref = self._spawn(visible)
                cpu0 = tree_cpu_s(ref.proc.pid)
                job = BuildJob((BuildPair(problem, candidate, hidden),), self.config, verify_failures=True)
                reply = ref.evaluate(job, timeout)
                if reply.error or reply.built is None:
                    ref.close()  # a fresh one for the next build
                    ref = None
                    why = reply.error.message.splitlines()[0] if reply.error and reply.error.message else "no reply"
                    result = BuildResult(f"build stage failed: {why}")
                else:
                    built = reply.built.get(candidate.path, "no result")
                    verdict = None
                    if reply.verdict is not None:
                        verdict = _accepted(verdict_from_dict(reply.verdict))
                    result = BuildResult(built, verdict)
                    restart = bool(reply.restart)  # it holds device memory it cannot free (kbv.pipeline.warm_call)
            except Exception as exc:  # noqa: BLE001 - the lane verifies the job as if never built
                result = BuildResult(f"build stage failed: {type(exc).__name__}: {exc}")
            cpu1 = tree_cpu_s(ref.proc.pid) if ref is not None else None
            if restart and ref is not None:
                ref.close()
                ref = None
            result = dataclasses.replace(result, seconds=time.monotonic() - t0,
                                         cpu_s=max(0.0, cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else 0.0)
            with self._lock:
                self.cpu_s += result.cpu_s
                self.build_s += result.seconds
                self.builds += 1
            if not self._closed.is_set():
                self._on_done(item, result)
        if ref is not None:
            ref.close()

    def close(self) -> None:
        """Stop the pool: builds in progress are killed, queued ones dropped. Returns when every
        build thread has ended (at most the reference workers' close time)."""
        self._closed.set()
        if self.pauser is not None:  # nothing left stopped
            self.pauser.close()
        with self._lock:
            refs = list(self._refs)
        for ref in refs:  # ends a build in progress at once (its evaluate sees the worker gone)
            try:
                ref.proc.kill()
            except Exception:  # noqa: BLE001 - already gone
                pass
        for t in self._threads:
            t.join(timeout=30)
        for ref in refs:
            ref.close()

    def __enter__(self) -> "BuildPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BuildPool", "BuildResult", "pool_size", "needs_build", "tree_cpu_s", "BUILT_BACKENDS", "DEFAULT_JOBS_PER_BUILD"]
