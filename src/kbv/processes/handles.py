"""Process handles with deadlines: the candidate worker (untrusted) and the reference worker.

Every call has a timeout. A worker that misses it is killed with its whole process group and the
call raises :class:`WorkerTimeout`; a worker that dies (signal, early exit, even exit code 0)
raises :class:`WorkerDied` with the exit code, the signal name and the tail of its log. The
caller turns both into verdicts (TIMEOUT, CRASH); a batch never dies with a worker. A candidate
worker is spawned with the scrubbed environment of :func:`kbv.sandbox.confinement.worker_environment`, and
closing it kills every process it started (:class:`kbv.sandbox.confinement.ProcessJail`). A reference worker
killed by a signal during a verification answers an EVAL_ERROR verdict (kbv's failure, with what is known of the cause).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Iterator

from kbv.sandbox import protocol
from kbv.sandbox.worker import candidate_main
from kbv.sandbox.confinement import (ProcessJail, WorkerSetup, die_with_parent, kill_cgroups,
    worker_environment)

POLL_S = 0.05
LOG_TAIL_CHARS = 4000
#: bytes of a candidate worker's stdout/stderr kept: the first LOG_HEAD_BYTES and the last
#: LOG_KEEP_BYTES - LOG_HEAD_BYTES; the rest is dropped (and counted), the worker never blocks on it.
LOG_KEEP_BYTES = 8 << 20
LOG_HEAD_BYTES = 1 << 20


class _InheritedFd:
    """A file descriptor handed to a spawned process (``multiprocessing.reduction.DupFd``: passed
    at spawn time, a plain int in the child)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self):
        from multiprocessing import reduction

        return (_inherited_fd, (reduction.DupFd(self.fd),))


def _inherited_fd(dup: Any) -> int:
    return dup.detach()


class CappedLog:
    """Drains a pipe into ``path`` in a thread, keeping at most :data:`LOG_KEEP_BYTES`: the head,
    then a line naming what was dropped, then the tail (rewritten when the pipe closes).
    ``write_fd`` is the end to give the worker."""

    def __init__(self, path: Path, keep: int | None = None, head: int | None = None):
        keep = LOG_KEEP_BYTES if keep is None else keep
        head = LOG_HEAD_BYTES if head is None else head
        self.path, self.keep, self.head_bytes = Path(path), keep, min(head, keep)
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._lock = threading.Lock()
        r, self.write_fd = os.pipe()
        self._file = open(self.path, "wb")
        self._thread = threading.Thread(target=self._drain, args=(r,), name="kbv-candidate-log", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Bytes of output not kept."""
        return max(0, self.total - len(self._head) - len(self._tail))

    def note(self) -> str:
        """One line naming the cap when output was dropped, else ''."""
        if not self.dropped:
            return ""
        return (f"[kbv: the worker wrote {self.total / 2**20:.1f} MiB of output; kept the first "
                f"{self.head_bytes / 2**20:.0f} MiB and the last {(self.keep - self.head_bytes) / 2**20:.0f} MiB "
                f"(log cap {self.keep / 2**20:.0f} MiB), dropped {self.dropped / 2**20:.1f} MiB]")

    def _drain(self, fd: int) -> None:
        tail_cap = self.keep - self.head_bytes
        try:
            while chunk := os.read(fd, 1 << 16):
                with self._lock:
                    self.total += len(chunk)
                    room = self.head_bytes - len(self._head)
                    if room > 0:
                        self._head += chunk[:room]
                        self._file.write(chunk[:room])
                        self._file.flush()
                        chunk = chunk[room:]
                    if chunk:
                        self._tail += chunk
                        if len(self._tail) > tail_cap:
                            del self._tail[:len(self._tail) - tail_cap]
        finally:
            os.close(fd)
            with self._lock:
                self._write_all()

    def _write_all(self) -> None:
        try:
            self._file.seek(0)
            self._file.truncate()
            self._file.write(bytes(self._head))
            if self.dropped:
                self._file.write(("\n" + self.note() + "\n").encode())
            self._file.write(bytes(self._tail))
            self._file.close()
        except (OSError, ValueError):
            pass

    def tail(self, n: int = LOG_TAIL_CHARS) -> str:
        """The last ``n`` bytes of output kept (decoded), preceded by :meth:`note` when output was dropped."""
        with self._lock:
            kept = bytes(self._head) + bytes(self._tail) if not self.dropped else bytes(self._tail)
        text = kept[-n:].decode("utf-8", "replace")
        note = self.note()
        return f"{note}\n{text}" if note else text

    def close(self, timeout: float = 5.0) -> None:
        """Wait for the writers to be gone (EOF) and write the file."""
        try:
            os.close(self.write_fd)
        except OSError:
            pass
        self._thread.join(timeout)


class WorkerTimeout(RuntimeError):
    def __init__(self, phase: str, seconds: float, log_tail: str = ""):
        self.phase = phase
        self.seconds = seconds
        self.log_tail = log_tail
        super().__init__(f"{phase} did not finish within {seconds:g} s; worker killed")


class WorkerDied(RuntimeError):
    def __init__(self, phase: str, exitcode: int | None, log_tail: str = "", log_note: str = ""):
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
        super().__init__(f"worker died during {phase}: {how}" + (f" {log_note}" if log_note else ""))


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


_MAIN_LOCK = threading.Lock()
_NO_ATTR = object()


@contextmanager
def _plain_main() -> Iterator[None]:
    """The parent's ``__main__`` names no script and no module while a worker is spawned.

    ``multiprocessing.spawn.get_preparation_data`` tells a spawned child to run the parent's
    ``__main__`` again (as ``__mp_main__``) when it has ``__spec__.name`` (``python -m mod``) or a
    ``__file__`` (``python script.py``). A script without an ``if __name__ == "__main__":`` guard
    would then run its top level, and so start another verification, inside the worker, which dies
    with multiprocessing's "bootstrapping phase" error; a guarded one still gets imported there. kbv's
    workers need nothing from ``__main__`` (their targets and arguments are kbv's own), so both
    attributes are hidden for the length of ``start()`` and restored after, and the child keeps the
    plain ``__main__`` of its ``-c`` bootstrap.
    """
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    with _MAIN_LOCK:
        saved = {k: main.__dict__.get(k, _NO_ATTR) for k in ("__file__", "__spec__")}
        try:
            main.__dict__.pop("__file__", None)
            main.__dict__["__spec__"] = None
            yield
        finally:
            for k, v in saved.items():
                if v is _NO_ATTR:
                    main.__dict__.pop(k, None)
                else:
                    main.__dict__[k] = v


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


# Sentinel: what a reference worker started dies with it ---------------------------------------

_SENTINEL_FD: int | None = None  #: write end of this process's sentinel pipe (:func:`start_sentinel`).


def start_sentinel() -> None:
    """Fork a sentinel that kills, when this process dies (even by SIGKILL), every candidate
    worker's process group still open and the cgroups this process made
    (:func:`kbv.sandbox.confinement.kill_cgroups`), then exits.

    ``PR_SET_PDEATHSIG`` kills the candidate worker with this process, but not what the worker
    started (a compiler of a C++ build, anything the candidate spawned): those are re-parented and
    would run on. The sentinel holds the read end of a pipe; :class:`CandidateProcess` writes
    ``+pid`` when a worker starts and ``-pid`` when it is closed, so a reused pid is never killed.
    Call once, early (before threads exist: it forks); Linux only, a no-op elsewhere.
    """
    global _SENTINEL_FD
    if _SENTINEL_FD is not None or not hasattr(os, "fork") or not os.path.isdir("/proc"):
        return
    r, w = os.pipe()
    owner = os.getpid()
    pid = os.fork()
    if pid == 0:  # the sentinel: nothing but the pipe open, waits for EOF
        try:
            os.closerange(3, r)
            os.closerange(r + 1, 1 << 16)
            _sentinel(r, owner)
        finally:
            os._exit(0)
    os.close(r)
    _SENTINEL_FD = w


def _sentinel(fd: int, owner: int) -> None:
    open_groups: set[int] = set()
    buf = b""
    while chunk := os.read(fd, 4096):
        buf += chunk
        while len(buf) >= 8:
            (pid,), buf = struct.unpack("q", buf[:8]), buf[8:]
            (open_groups.add if pid > 0 else open_groups.discard)(abs(pid))
    for pgid in open_groups:  # each worker leads its own group (setsid)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    kill_cgroups(owner)


def _tell_sentinel(pid: int | None) -> None:
    if _SENTINEL_FD is not None and pid:
        try:
            os.write(_SENTINEL_FD, struct.pack("q", pid))
        except OSError:
            pass


class CandidateProcess:
    """A fresh spawned candidate worker. Use as a context manager; on exit it is killed with every
    process it started, even ones that left its session (:class:`kbv.sandbox.confinement.ProcessJail`: this
    process becomes a child subreaper)."""

    def __init__(self, *, device: str, build_dir: Path):
        self.workdir = Path(tempfile.mkdtemp(prefix="kbv-cand-"))
        self.log_path = self.workdir / "worker.log"
        self.log = CappedLog(self.log_path)
        self.jail = ProcessJail()
        self.setup = WorkerSetup(workdir=str(self.workdir), build_dir=str(build_dir),
                                 log_path=str(self.log_path), device=device, cgroup=self.jail.cgroup)
        ctx = _ctx()
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=candidate_main, args=(child, self.setup, _InheritedFd(self.log.write_fd)),
                                daemon=False, name="kbv-candidate")
        try:
            # /proc/<worker>/environ holds no secrets; the worker never runs the parent's script
            with _environment(worker_environment(self.setup)), _plain_main():
                self.proc.start()
        except BaseException:
            self.jail.kill()
            self.log.close()
            raise
        os.close(self.log.write_fd)  # the worker holds the only write end: EOF when it is gone
        self.log.write_fd = -1
        self.jail.watch()
        _tell_sentinel(self.proc.pid)
        child.close()

    def log_tail(self) -> str:
        """The end of the worker's output, with a line naming the log cap when output was dropped."""
        return self.log.tail()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing of the candidate runs inside (:meth:`kbv.sandbox.confinement.ProcessJail.pause`): wrap the
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
        self.send(request, phase=phase)
        return self.receive(phase=phase, timeout=timeout)

    @contextmanager
    def held_call(self, request: Any, *, phase: str, timeout: float) -> Iterator[Any]:
        """:meth:`call`, with the worker and everything it started stopped from the moment its
        reply is decoded until the block ends: what the reply shares (output memory, CUDA IPC
        handles) is read by the trusted side with nothing of the candidate's running to change it.
        (Decoding needs the worker: shared cpu memory comes through its file-descriptor sharer;
        between its reply and the stop it runs for the time of one decode.) Same errors as
        :meth:`call`."""
        self.send(request, phase=phase)
        pids: tuple = ()
        try:
            yield self.receive(phase=phase, timeout=timeout, hold=True)
        finally:
            pids, self._held = getattr(self, "_held", ()), ()
            if pids:
                self.jail.resume(pids)

    def send(self, request: Any, *, phase: str) -> None:
        """The first half of :meth:`call` (several workers can then work at once).

        Raises:
            WorkerDied: the worker exited or was killed by a signal.
        """
        if not self.proc.is_alive():
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note())
        try:
            protocol.send(self.conn, request)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self.proc.join(timeout=5)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note()) from None

    def receive(self, *, phase: str, timeout: float, hold: bool = False) -> Any:
        """The second half of :meth:`call`: the decoded reply to the request :meth:`send` sent
        (same errors as :meth:`call`). ``hold``: stop the worker's tree once the reply is decoded,
        before it is used (:meth:`held_call` resumes it)."""
        if not _wait_readable(self.conn, self.proc, timeout):
            if self.proc.is_alive():
                _kill_group(self.proc)
                raise WorkerTimeout(phase, timeout, self.log_tail())
            self.proc.join(timeout=5)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note())
        try:
            data = self.conn.recv_bytes(protocol.MAX_REPLY_BYTES)
        except (EOFError, ConnectionResetError, OSError):
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                _kill_group(self.proc)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note()) from None
        reply = protocol.decode_reply(data)  # shared cpu memory arrives through the worker's fd sharer
        if hold and self.proc.is_alive() and self.proc.pid:
            self._held = self.jail.pause(self.proc.pid)
        return reply

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                protocol.send(self.conn, protocol.Shutdown())
            except OSError:
                pass
            self.proc.join(timeout=5)
        _kill_group(self.proc)
        self.jail.kill()
        _tell_sentinel(-self.proc.pid if self.proc.pid else None)
        self.log.close()
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

    def __init__(self, device: str):
        from kbv.pipeline.reference_worker import reference_main

        self.device = device
        ctx = _ctx()
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=reference_main, args=(child, device), daemon=False,
                                name=f"kbv-reference-{device}")
        with _plain_main():  # works from a script without a __main__ guard
            self.proc.start()
        child.close()

    def evaluate(self, job: dict, timeout: float) -> ReferenceReply:
        """Run one verification job (see :func:`kbv.pipeline.reference_worker.reference_main`).

        A worker that dies answers an error, except one killed by a signal during a verification:
        that is an EVAL_ERROR verdict naming what is known of the cause (its resident memory
        against the host's, sampled while it ran), never the candidate's fault without proof.
        Either way the processes its candidate workers started are killed
        (:func:`kbv.sandbox.confinement.kill_cgroups`).
        """
        if not self.proc.is_alive():
            return ReferenceReply(error=f"reference worker is not running (exit code {self.proc.exitcode})")
        self.conn.send_bytes(json.dumps(job).encode())
        self._rss = (0, 0)  # (the worker's last resident bytes, host bytes available then)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.is_alive() and not self.conn.poll(0.25):
            self._rss = _memory_sample(self.proc.pid) or self._rss
        if not _wait_readable(self.conn, self.proc, max(0.0, deadline - time.monotonic()) + POLL_S):
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
        """The worker died during ``job``: an EVAL_ERROR verdict when a signal killed it while it
        verified a candidate, else an error. What the candidate started is killed."""
        self.proc.join(timeout=5)
        kill_cgroups(self.proc.pid)
        code = self.proc.exitcode
        if job.get("kind") is not None or "candidate" not in job or code is None or code >= 0:
            return ReferenceReply(error=f"reference worker died (exit code {code})")
        from kbv.batch.evaluator import minimal_environment
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
