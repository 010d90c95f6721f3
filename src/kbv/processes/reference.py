"""The handle of a reference worker (trusted): JSON jobs in, JSON replies out, a verdict when a
signal kills it during a verification (CRASH when candidate code could run then, else EVAL_ERROR). The worker's main function is passed in
(:func:`kbv.pipeline.reference_worker.reference_main`), so this layer imports no pipeline."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import signal
import socket
import threading
import time
import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from multiprocessing.connection import Connection
from typing import Callable, Iterator

from kbv import __version__
from kbv.model.records import CandidateRef, Environment
from kbv.processes.handles import POLL_S, environ_set, spawn_context, kill_group, plain_main, wait_readable
from kbv.processes import custody, gpushare
from kbv.processes.jail import kill_cgroups
from kbv.processes.procfs import undumpable
from kbv.processes.reference_jobs import Job, NextCandidate, VerifyJob, encode_job
from kbv.sandbox.worker_env import shared_worker_env


def minimal_environment(device: str) -> Environment:
    """The trusted parent's own view of where a verdict was made, without importing torch or
    touching a device: for verdicts decided before any worker ran (static rejections) or after the
    reference worker died. ``device_name`` and ``driver`` stay None: nothing was measured on the
    device."""
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "unknown"
    return Environment(kbv_version=__version__, python=platform.python_version(), torch=torch_version,
                       device=device, hostname=socket.gethostname())


#: why a reference worker gave no answer (:attr:`WorkerError.kind`): it raised, died, did not answer
#: in time, was not running, or sent a reply that is not one of :class:`ReferenceReply`.
RAISED, DIED, TIMEOUT, NOT_RUNNING, MALFORMED = "raised", "died", "timeout", "not-running", "malformed"
ERROR_KINDS = (RAISED, DIED, TIMEOUT, NOT_RUNNING, MALFORMED)


@dataclass(frozen=True)
class ProblemFailure:
    """The job's problem file is broken (the worker's :class:`kbv.intake.problems.ProblemError`):
    the path it read and the fault, one line."""

    path: str
    fault: str


@dataclass(frozen=True)
class WorkerError:
    """A failure of the reference worker itself (kbv's, never the candidate's): ``kind`` one of
    :data:`ERROR_KINDS`, its ``message`` (``Type: text`` when it raised), and the worker's
    traceback tail when there is one."""

    kind: str
    message: str
    traceback: str = ""

    def describe(self) -> str:
        """The message, then the traceback on the lines after it."""
        return self.message + (f"\n{self.traceback}" if self.traceback else "")


@dataclass(frozen=True)
class ReferenceReply:
    """What the reference worker answers for one job: a verdict dict or a problem error."""

    verdict: dict | None = None
    problem_error: ProblemFailure | None = None
    error: WorkerError | None = None  #: an internal failure of the reference worker.
    vetting: dict | None = None  #: the answer to a vetting job (``kbv.model.records.VettingReport``).
    #: answer to a :class:`~kbv.processes.reference_jobs.BaselinesJob` (or an ``EnvironmentJob``): ``{"environment": dict, "measurements": {label: dict}}``.
    baselines: dict | None = None
    #: answer to a :class:`~kbv.processes.reference_jobs.BuildJob`: candidate path -> ``"ok"`` or the one-line failure.
    built: dict | None = None
    #: the worker holds device memory it cannot free after this job (CUDA IPC blocks a candidate
    #: worker held when it was killed): the orchestrator replaces it before the next job.
    restart: bool | None = None

    def to_json(self) -> dict:
        """The wire form (the worker's side): the fields set, the errors as objects."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}
        for name in ("problem_error", "error"):
            if name in out:
                out[name] = dataclasses.asdict(out[name])
        return out

    @classmethod
    def from_json(cls, data: object) -> "ReferenceReply":
        """Decode a reply strictly: an object of known fields, answers as objects, a
        ``problem_error`` of exactly ``path`` and ``fault`` strings, an ``error`` of a known kind
        with string ``message`` and ``traceback``. Anything else is a :data:`MALFORMED` error
        reply (the worker is then restarted, the job's verdict an EVAL_ERROR)."""
        def bad(why: str) -> "ReferenceReply":
            return cls(error=WorkerError(MALFORMED, f"reference worker sent a malformed reply: {why}"))

        if not isinstance(data, dict):
            return bad(f"a {type(data).__name__}, not an object")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            return bad(f"unknown field(s) {sorted(unknown)}")
        fields = dict(data)
        for name in ("verdict", "vetting", "baselines", "built"):
            if fields.get(name) is not None and not isinstance(fields[name], dict):
                return bad(f"{name} is not an object")
        if fields.get("restart") is not None and not isinstance(fields["restart"], bool):
            return bad("restart is not a boolean")
        pe, err = fields.get("problem_error"), fields.get("error")
        if pe is not None:
            if not _strings(pe, {"path", "fault"}, {"path", "fault"}):
                return bad("problem_error is not {path, fault}")
            fields["problem_error"] = ProblemFailure(**pe)
        if err is not None:
            if not _strings(err, {"kind", "message", "traceback"}, {"kind", "message"}) or err["kind"] not in ERROR_KINDS:
                return bad("error is not {kind, message, traceback} of a known kind")
            fields["error"] = WorkerError(**err)
        return cls(**fields)


def _strings(obj: object, allowed: set[str], required: set[str]) -> bool:
    """``obj`` is a dict of string values whose keys include ``required`` and lie in ``allowed``."""
    return (isinstance(obj, dict) and required <= obj.keys() <= allowed
            and all(isinstance(v, str) for v in obj.values()))


def _oom_killed(pid: int | None) -> bool:
    """The kernel log names ``pid`` as killed by the OOM killer (``dmesg``; False where it cannot
    be read)."""
    import subprocess

    if pid is None:
        return False
    try:
        log = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return f"Killed process {pid} " in log


def _oom_score_adj(pid: int | None) -> int:
    """``/proc/<pid>/oom_score_adj`` (-1000 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/oom_score_adj") as f:
            return int(f.read())
    except (OSError, ValueError, TypeError):
        return -1000


def _memory_sample(pid: int | None) -> tuple[int, int] | None:
    """(resident bytes of ``pid``, available host bytes) now, or None (:mod:`kbv.processes.footprint`)."""
    from kbv.processes.footprint import host_available_bytes, host_rss_bytes

    rss = host_rss_bytes(pid) if pid is not None else None
    return None if rss is None else (rss, host_available_bytes())


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored in this process for the block, from the main thread only (elsewhere a no-op):
    a worker spawned inside inherits SIG_IGN, so a Ctrl-C during its start-up, before its main
    function ignores SIGINT itself, prints no KeyboardInterrupt traceback. A Ctrl-C inside the
    block is lost to this process too; the block is one ``start()``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old if old is not None else signal.default_int_handler)


def _job_records(job: "VerifyJob") -> dict:
    """The problem, candidate and config of ``job`` as a verdict's JSON fields."""
    from kbv.model.records import to_dict

    return {"problem": to_dict(job.problem), "candidate": to_dict(job.candidate), "config": to_dict(job.config)}


def _charged_verdict(job: "VerifyJob", device: str, how: str, phase: str, code: int) -> dict:
    """The CRASH verdict (as JSON) of a candidate whose code ran when the reference worker was
    killed by ``how`` during its ``phase`` request: a WARNING naming taxonomy 26 (sandbox
    tampering), no HACK: the kernel does not say who sent the signal."""
    from kbv.model.records import to_dict

    name = Path(job.candidate.path).name
    return {
        "status": "CRASH", **_job_records(job),
        "message": f"{name}: kbv's reference worker was killed by {how} while the candidate's code ran "
                   f"(last request: {phase or 'unknown'}); charged to the candidate, whose process could send it",
        "environment": to_dict(minimal_environment(device)),
        "findings": [{"check": "sandbox:reference-killed", "taxonomy": [26], "severity": "WARNING",
                      "detail": f"the reference worker died of {how} while candidate code ran ({phase or 'unknown'})",
                      "line": None}],
        "evidence": {"phase": "reference worker", "reference_exitcode": code, "candidate_phase": phase}}


class ReferenceProcess:
    """The trusted reference worker for one device. Jobs are typed (:mod:`kbv.processes.reference_jobs`),
    replies :class:`ReferenceReply`, both strict JSON on the wire.

    The worker dies with the process that made this handle (``PR_SET_PDEATHSIG``, bound to the
    creating *thread*: make it from a thread that lives as long as the handle, as kbv's main thread
    does), and its candidate workers, and what they started, die with it (:func:`start_sentinel`).
    """

    def __init__(self, device: str, main: Callable[[Connection, str], None]):
        """Spawn the worker for ``device`` running ``main(conn, device)``
        (:func:`kbv.pipeline.reference_worker.reference_main`)."""
        self.device = device
        undumpable()  # the orchestrator too: no candidate of the same user reads its memory
        ctx = spawn_context()
        self.conn, child = ctx.Pipe(duplex=True)
        # whether candidate code could run when it dies (kbv.processes.custody)
        self.custody = custody.Cell.create(ctx)
        self.proc = ctx.Process(target=custody.entry, args=(main, self.custody, child, device), daemon=False,
                                name=f"kbv-reference-{device}")
        # as in the candidate worker: OpenMP waits passive, no expandable segments (shared_worker_env)
        env = {**os.environ, **shared_worker_env(), gpushare.ORCHESTRATOR_ENV: str(os.getpid())}
        with environ_set(env), plain_main(), _sigint_ignored():  # plain_main: a script without a __main__ guard
            self.proc.start()
        child.close()

    def evaluate(self, job: "Job", timeout: float,
                 answer: Callable[[], "CandidateRef | None"] | None = None) -> ReferenceReply:
        """Run one job (see :func:`kbv.pipeline.reference_worker.reference_main`).

        The question the worker may ask during a verification (:class:`AskNext`: which candidate
        comes next) is answered with :class:`NextCandidate` of ``answer()`` (None without one) and
        the wait goes on.
        A worker that dies answers an error, except one killed by a signal during a verification:
        that is a verdict (:meth:`_died`): CRASH when the candidate's code could run then
        (:mod:`kbv.processes.custody`), else EVAL_ERROR naming what is known of the cause (its
        resident memory against the host's, sampled while it ran).
        Either way the processes its candidate workers started are killed
        (:func:`kbv.processes.jail.kill_cgroups`).
        """
        if not self.proc.is_alive():
            return ReferenceReply(error=WorkerError(NOT_RUNNING, f"reference worker is not running (exit code {self.proc.exitcode})"))
        try:
            self.conn.send_bytes(encode_job(job))
        except OSError:  # it died before the job reached it (BrokenPipeError): nothing of this job ran
            self.proc.join(timeout=5)
            kill_cgroups(self.proc.pid)
            return ReferenceReply(error=WorkerError(NOT_RUNNING, "reference worker died before the job reached it "
                                                                 f"(exit code {self.proc.exitcode})"))
        self._rss = (0, 0)  # (the worker's last resident bytes, host bytes available then)
        self._oom_adj = _oom_score_adj(self.proc.pid)  # raised later: not by kbv (custody.charged)
        self._oom_adj_raised = False
        deadline = time.monotonic() + timeout
        while True:
            while time.monotonic() < deadline and self.proc.is_alive() and not self.conn.poll(0.25):
                self._rss = _memory_sample(self.proc.pid) or self._rss
                self._oom_adj_raised |= _oom_score_adj(self.proc.pid) > self._oom_adj
            if not wait_readable(self.conn, self.proc, max(0.0, deadline - time.monotonic()) + POLL_S):
                if self.proc.is_alive():
                    kill_group(self.proc)
                    kill_cgroups(self.proc.pid)
                    return ReferenceReply(error=WorkerError(TIMEOUT, f"reference worker did not answer within {timeout:g} s"))
                return self._died(job)
            try:
                raw = self.conn.recv_bytes()
            except (EOFError, OSError):
                return self._died(job)
            try:
                data = json.loads(raw)
            except ValueError as exc:
                return ReferenceReply(error=WorkerError(MALFORMED, f"reference worker sent no JSON: {exc}"))
            if not (isinstance(data, dict) and data.get("kind") == "ask-next"):
                return ReferenceReply.from_json(data)
            try:
                self.conn.send_bytes(encode_job(NextCandidate(answer() if answer is not None else None)))
            except OSError:
                return self._died(job)

    def _died(self, job: "Job") -> ReferenceReply:
        """The worker died during ``job``: a verdict when a signal killed it while it verified a
        candidate, else an error. The verdict is CRASH, the candidate's, when its code could run
        then and memory explains nothing (:func:`kbv.processes.custody.charged`), else EVAL_ERROR.
        What the candidate started is killed."""
        self.proc.join(timeout=5)
        kill_cgroups(self.proc.pid)
        code = self.proc.exitcode
        if not isinstance(job, VerifyJob) or code is None or code >= 0:
            return ReferenceReply(error=WorkerError(DIED, f"reference worker died (exit code {code})"))
        from kbv.model.records import to_dict

        try:
            how = signal.Signals(-code).name
        except ValueError:
            how = f"signal {-code}"
        name = Path(job.candidate.path).name
        rss, avail = getattr(self, "_rss", (0, 0))
        oom = how == "SIGKILL" and _oom_killed(self.proc.pid)
        low = how == "SIGKILL" and bool(rss) and avail < max(rss // 4, 1 << 30)
        running, phase = self.custody.read()
        if custody.charged(candidate_running=running, oom_killed=oom, low_memory=low,
                           oom_adj_raised=getattr(self, "_oom_adj_raised", False)):
            return ReferenceReply(verdict=_charged_verdict(job, self.device, how, phase, code))
        if oom:
            cause = f"the kernel's OOM killer ended it (its resident memory had reached {rss / 2**30:.1f} GiB)"
        elif low:
            cause = (f"out of memory: its resident memory had reached {rss / 2**30:.1f} GiB with "
                     f"{avail / 2**30:.1f} GiB of host memory left")
        else:
            cause = "cause unknown" + (f" (last resident memory {rss / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB "
                                       "of host memory left)" if rss else "")
        return ReferenceReply(verdict={
            "status": "EVAL_ERROR", **_job_records(job),
            "message": f"{name}: kbv's reference worker was killed by {how} while it verified this candidate: "
                       f"{cause}; an evaluation failure, not the candidate's",
            "environment": to_dict(minimal_environment(self.device)),
            "evidence": {"phase": "reference worker", "reference_exitcode": code,
                         "reference_last_rss_bytes": rss, "host_available_bytes": avail}})

    def close(self, abort: bool = False) -> None:
        """End the worker: ask it to exit and wait up to 10 s (it finishes the job in flight first),
        then kill it. ``abort`` (Ctrl-C, SIGTERM): kill it now, with the candidate workers it runs."""
        if self.proc.is_alive() and not abort:
            try:
                self.conn.send_bytes(b"null")
            except OSError:
                pass
            self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        kill_cgroups(self.proc.pid)
        self.conn.close()

    def __enter__(self) -> "ReferenceProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
