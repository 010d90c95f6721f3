"""Process handles with deadlines: the candidate worker (untrusted) and the reference worker.

Every call has a timeout. A worker that misses it is killed with its whole process group and the
call raises :class:`WorkerTimeout`; a worker that dies (signal, early exit, even exit code 0)
raises :class:`WorkerDied` with the exit code, the signal name and the tail of its log. The
caller turns both into verdicts (TIMEOUT, CRASH); a batch never dies with a worker. A candidate
worker is spawned with the scrubbed environment of :func:`kbv.sandbox.worker_environment`, and
closing it kills every process it started (:class:`kbv.sandbox.ProcessJail`). A reference worker
killed by a signal during a verification (a candidate can signal it) answers a CRASH verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Iterator

from kbv import protocol
from kbv.candidate_worker import candidate_main
from kbv.sandbox import ProcessJail, WorkerSetup, kill_cgroups, worker_environment

POLL_S = 0.05
LOG_TAIL_CHARS = 4000


class WorkerTimeout(RuntimeError):
    def __init__(self, phase: str, seconds: float, log_tail: str = ""):
        self.phase = phase
        self.seconds = seconds
        self.log_tail = log_tail
        super().__init__(f"{phase} did not finish within {seconds:g} s; worker killed")


class WorkerDied(RuntimeError):
    def __init__(self, phase: str, exitcode: int | None, log_tail: str = ""):
        self.phase = phase
        self.exitcode = exitcode
        self.log_tail = log_tail
        if exitcode is not None and exitcode < 0:
            try:
                how = f"killed by {signal.Signals(-exitcode).name}"
            except ValueError:
                how = f"killed by signal {-exitcode}"
        else:
            how = f"exited with code {exitcode} before replying"
        super().__init__(f"worker died during {phase}: {how}")


def _ctx():
    import torch.multiprocessing as mp

    return mp.get_context("spawn")


def _tail(path: Path, n: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _kill_group(proc: Any) -> None:
    if proc.pid is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    try:
        proc.kill()
    except Exception:  # noqa: BLE001 - already gone
        pass
    proc.join(timeout=10)


_ENVIRON_LOCK = threading.Lock()


@contextmanager
def _environment(env: dict[str, str]):
    """``os.environ`` is ``env`` inside (a spawned process inherits it at ``start()``)."""
    with _ENVIRON_LOCK:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)


def _wait_readable(conn: Connection, proc: Any, timeout: float) -> bool:
    """True when ``conn`` has data (or EOF); False on timeout or when ``proc`` died silently."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if conn.poll(min(POLL_S * 4, left)):
            return True
        if not proc.is_alive():
            return conn.poll(0)


class CandidateProcess:
    """A fresh spawned candidate worker. Use as a context manager; on exit it is killed with every
    process it started, even ones that left its session (:class:`kbv.sandbox.ProcessJail`: this
    process becomes a child subreaper)."""

    def __init__(self, *, device: str, build_dir: Path):
        self.workdir = Path(tempfile.mkdtemp(prefix="kbv-cand-"))
        self.log_path = self.workdir / "worker.log"
        self.jail = ProcessJail()
        self.setup = WorkerSetup(workdir=str(self.workdir), build_dir=str(build_dir),
                                 log_path=str(self.log_path), device=device, cgroup=self.jail.cgroup)
        ctx = _ctx()
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=candidate_main, args=(child, self.setup), daemon=False,
                                name="kbv-candidate")
        try:
            with _environment(worker_environment(self.setup)):  # /proc/<worker>/environ: no secrets
                self.proc.start()
        except BaseException:
            self.jail.kill()
            raise
        self.jail.watch()
        child.close()

    def log_tail(self) -> str:
        return _tail(self.log_path)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing of the candidate runs inside (:meth:`kbv.sandbox.ProcessJail.pause`): wrap the
        timing of the baselines, so the candidate's own threads or processes cannot slow them."""
        pids = self.jail.pause(self.proc.pid) if self.proc.is_alive() and self.proc.pid else ()
        try:
            yield
        finally:
            self.jail.resume(pids)

    def call(self, request: Any, *, phase: str, timeout: float) -> Any:
        """Send a request and return the decoded reply.

        Raises:
            WorkerTimeout: no reply within ``timeout`` seconds (the worker is killed).
            WorkerDied: the worker exited or was killed by a signal.
            protocol.ProtocolError: the reply is not a well-formed protocol message.
        """
        if not self.proc.is_alive():
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail())
        try:
            protocol.send(self.conn, request)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self.proc.join(timeout=5)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail()) from None
        if not _wait_readable(self.conn, self.proc, timeout):
            if self.proc.is_alive():
                _kill_group(self.proc)
                raise WorkerTimeout(phase, timeout, self.log_tail())
            self.proc.join(timeout=5)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail())
        try:
            data = self.conn.recv_bytes(protocol.MAX_REPLY_BYTES)
        except (EOFError, ConnectionResetError, OSError):
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                _kill_group(self.proc)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail()) from None
        return protocol.decode_reply(data)

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                protocol.send(self.conn, protocol.Shutdown())
            except OSError:
                pass
            self.proc.join(timeout=5)
        _kill_group(self.proc)
        self.jail.kill()
        self.conn.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "CandidateProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Reference worker handle (orchestrator side) -----------------------------------------------

@dataclass(frozen=True)
class ReferenceReply:
    """What the reference worker answers for one job: a verdict dict or a problem error."""

    verdict: dict | None = None
    problem_error: str | None = None
    error: str | None = None  #: an internal failure of the reference worker.
    vetting: dict | None = None  #: the answer to a vetting job (``kbv.records.VettingReport``).
    #: answer to a ``{"kind": "baselines"}`` job: ``{"environment": dict, "measurements": {label: dict}}``.
    baselines: dict | None = None


class ReferenceProcess:
    """The trusted reference worker for one device. Jobs and replies are plain JSON."""

    def __init__(self, device: str):
        from kbv.reference_worker import reference_main

        self.device = device
        ctx = _ctx()
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=reference_main, args=(child, device), daemon=False,
                                name=f"kbv-reference-{device}")
        self.proc.start()
        child.close()

    def evaluate(self, job: dict, timeout: float) -> ReferenceReply:
        """Run one verification job (see :func:`kbv.reference_worker.reference_main`).

        A worker that dies answers an error, except one killed by a signal during a verification:
        that is a CRASH verdict for the candidate (it can signal its parent). Either way the
        processes its candidate workers started are killed (:func:`kbv.sandbox.kill_cgroups`).
        """
        if not self.proc.is_alive():
            return ReferenceReply(error=f"reference worker is not running (exit code {self.proc.exitcode})")
        self.conn.send_bytes(json.dumps(job).encode())
        if not _wait_readable(self.conn, self.proc, timeout):
            if self.proc.is_alive():
                _kill_group(self.proc)
                kill_cgroups(self.proc.pid)
                return ReferenceReply(error=f"reference worker did not answer within {timeout:g} s")
            return self._died(job)
        try:
            data = json.loads(self.conn.recv_bytes())
        except (EOFError, OSError):
            return self._died(job)
        return ReferenceReply(**data)

    def _died(self, job: dict) -> ReferenceReply:
        """The worker died during ``job``: a CRASH verdict when a signal killed it while it verified
        a candidate (which may have sent it), else an error. What the candidate started is killed."""
        self.proc.join(timeout=5)
        kill_cgroups(self.proc.pid)
        code = self.proc.exitcode
        if job.get("kind") is not None or "candidate" not in job or code is None or code >= 0:
            return ReferenceReply(error=f"reference worker died (exit code {code})")
        from kbv.orchestrator import minimal_environment
        from kbv.records import to_dict

        try:
            how = signal.Signals(-code).name
        except ValueError:
            how = f"signal {-code}"
        name = Path(job["candidate"]["path"]).name
        return ReferenceReply(verdict={
            "status": "CRASH", "problem": job["problem"], "candidate": job["candidate"], "config": job["config"],
            "message": f"{name}: the reference worker was killed by {how} while it verified this candidate "
                       "(taxonomy 26: a candidate can signal it)",
            "environment": to_dict(minimal_environment(self.device)),
            "evidence": {"phase": "reference worker", "reference_exitcode": code}})

    def close(self) -> None:
        if self.proc.is_alive():
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
