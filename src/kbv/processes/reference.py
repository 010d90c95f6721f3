"""The handle of a reference worker (trusted): JSON jobs in, JSON replies out, an EVAL_ERROR
verdict when a signal kills it during a verification. The worker's main function is passed in
(:func:`kbv.pipeline.reference_worker.reference_main`), so this layer imports no pipeline."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from multiprocessing.connection import Connection
from typing import Callable

from kbv import __version__
from kbv.model.records import Environment
from kbv.processes.handles import POLL_S, spawn_context, kill_group, plain_main, wait_readable
from kbv.processes.jail import kill_cgroups


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


@dataclass(frozen=True)
class ReferenceReply:
    """What the reference worker answers for one job: a verdict dict or a problem error."""

    verdict: dict | None = None
    problem_error: str | None = None
    error: str | None = None  #: an internal failure of the reference worker.
    vetting: dict | None = None  #: the answer to a vetting job (``kbv.model.records.VettingReport``).
    #: answer to a ``{"kind": "baselines"}`` job: ``{"environment": dict, "measurements": {label: dict}}``.
    baselines: dict | None = None
    #: answer to a ``{"kind": "build"}`` job: candidate path -> ``"ok"`` or the one-line failure.
    built: dict | None = None


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


def _memory_sample(pid: int | None) -> tuple[int, int] | None:
    """(resident bytes of ``pid``, available host bytes) now, or None (:mod:`kbv.processes.footprint`)."""
    from kbv.processes.footprint import host_available_bytes, host_rss_bytes

    rss = host_rss_bytes(pid) if pid is not None else None
    return None if rss is None else (rss, host_available_bytes())


class ReferenceProcess:
    """The trusted reference worker for one device. Jobs and replies are plain JSON.

    The worker dies with the process that made this handle (``PR_SET_PDEATHSIG``, bound to the
    creating *thread*: make it from a thread that lives as long as the handle, as kbv's main thread
    does), and its candidate workers, and what they started, die with it (:func:`start_sentinel`).
    """

    def __init__(self, device: str, main: Callable[[Connection, str], None]):
        """Spawn the worker for ``device`` running ``main(conn, device)``
        (:func:`kbv.pipeline.reference_worker.reference_main`)."""
        self.device = device
        ctx = spawn_context()
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=main, args=(child, device), daemon=False,
                                name=f"kbv-reference-{device}")
        with plain_main():  # works from a script without a __main__ guard
            self.proc.start()
        child.close()

    def evaluate(self, job: dict, timeout: float, answer: Callable[[dict], dict] | None = None) -> ReferenceReply:
        """Run one verification job (see :func:`kbv.pipeline.reference_worker.reference_main`).

        A question the worker asks during the job (a message with ``"ask"``: which candidate comes
        next) is answered with ``answer(message)`` (``{}`` without one) and the wait goes on.
        A worker that dies answers an error, except one killed by a signal during a verification:
        that is an EVAL_ERROR verdict naming what is known of the cause (its resident memory
        against the host's, sampled while it ran), never the candidate's fault without proof.
        Either way the processes its candidate workers started are killed
        (:func:`kbv.processes.jail.kill_cgroups`).
        """
        if not self.proc.is_alive():
            return ReferenceReply(error=f"reference worker is not running (exit code {self.proc.exitcode})")
        self.conn.send_bytes(json.dumps(job).encode())
        self._rss = (0, 0)  # (the worker's last resident bytes, host bytes available then)
        deadline = time.monotonic() + timeout
        while True:
            while time.monotonic() < deadline and self.proc.is_alive() and not self.conn.poll(0.25):
                self._rss = _memory_sample(self.proc.pid) or self._rss
            if not wait_readable(self.conn, self.proc, max(0.0, deadline - time.monotonic()) + POLL_S):
                if self.proc.is_alive():
                    kill_group(self.proc)
                    kill_cgroups(self.proc.pid)
                    return ReferenceReply(error=f"reference worker did not answer within {timeout:g} s")
                return self._died(job)
            try:
                data = json.loads(self.conn.recv_bytes())
            except (EOFError, OSError):
                return self._died(job)
            if "ask" not in data:
                return ReferenceReply(**data)
            try:
                self.conn.send_bytes(json.dumps(answer(data) if answer is not None else {}).encode())
            except OSError:
                return self._died(job)

    def _died(self, job: dict) -> ReferenceReply:
        """The worker died during ``job``: an EVAL_ERROR verdict when a signal killed it while it
        verified a candidate, else an error. What the candidate started is killed."""
        self.proc.join(timeout=5)
        kill_cgroups(self.proc.pid)
        code = self.proc.exitcode
        if job.get("kind") is not None or "candidate" not in job or code is None or code >= 0:
            return ReferenceReply(error=f"reference worker died (exit code {code})")
        from kbv.model.records import to_dict

        try:
            how = signal.Signals(-code).name
        except ValueError:
            how = f"signal {-code}"
        name = Path(job["candidate"]["path"]).name
        rss, avail = getattr(self, "_rss", (0, 0))
        if how == "SIGKILL" and _oom_killed(self.proc.pid):
            cause = f"the kernel's OOM killer ended it (its resident memory had reached {rss / 2**30:.1f} GiB)"
        elif how == "SIGKILL" and rss and avail < max(rss // 4, 1 << 30):
            cause = (f"out of memory: its resident memory had reached {rss / 2**30:.1f} GiB with "
                     f"{avail / 2**30:.1f} GiB of host memory left")
        else:
            cause = "cause unknown" + (f" (last resident memory {rss / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB "
                                       "of host memory left)" if rss else "")
        return ReferenceReply(verdict={
            "status": "EVAL_ERROR", "problem": job["problem"], "candidate": job["candidate"], "config": job["config"],
            "message": f"{name}: kbv's reference worker was killed by {how} while it verified this candidate: "
                       f"{cause}; an evaluation failure, not the candidate's",
            "environment": to_dict(minimal_environment(self.device)),
            "evidence": {"phase": "reference worker", "reference_exitcode": code,
                         "reference_last_rss_bytes": rss, "host_available_bytes": avail}})

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
