"""What every worker handle shares: deadlines (a worker that misses one is killed with its whole
process group, :class:`WorkerTimeout`; one that dies raises :class:`WorkerDied` with its exit code,
signal and log tail; callers turn both into verdicts, a batch never dies with a worker), the spawn
context, spawning from a script without a ``__main__`` guard, and the sentinel that kills a
worker's candidate processes when the worker dies.

The handles themselves: :class:`kbv.processes.candidate.CandidateProcess` (untrusted, sandboxed)
and :class:`kbv.processes.reference.ReferenceProcess` (trusted).
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import threading
import time
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any, Iterator

from kbv.processes.jail import kill_cgroups

POLL_S = 0.05


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


def spawn_context():
    import torch.multiprocessing as mp

    return mp.get_context("spawn")


def kill_group(proc: Any) -> None:
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


_ENVIRON_LOCK = threading.RLock()  # reentrant: a lane spawns the reference worker inside its own environ_set


@contextmanager
def environ_set(env: dict[str, str]):
    """``os.environ`` is ``env`` inside (a spawned process inherits it at ``start()``); blocks of
    other threads wait, and a nested block (a lane's environment around the reference worker's
    own) restores the outer one when it ends."""
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
def plain_main() -> Iterator[None]:
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


def wait_readable(conn: Connection, proc: Any, timeout: float) -> bool:
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


class _Watchdog:
    """One daemon thread per process that calls each armed expiry once its time has come: a
    deadline costs a lock and a notify, not a thread of its own (the candidate's timed calls are
    one request each, and the reference worker times while it waits on them)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._armed: dict[int, tuple[float, Any, threading.Event]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, expire: Any) -> tuple[int, threading.Event]:
        fired = threading.Event()
        with self._cv:
            self._next += 1
            self._armed[self._next] = (time.monotonic() + max(0.0, seconds), expire, fired)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kbv-deadlines", daemon=True)
                self._thread.start()
            self._cv.notify()
            return self._next, fired

    def disarm(self, token: int) -> None:
        with self._cv:
            self._armed.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cv:
                now = time.monotonic()
                due = [k for k, (t, _, _) in self._armed.items() if t <= now]
                fire = [self._armed.pop(k) for k in due]
                if not fire:
                    soonest = min((t for t, _, _ in self._armed.values()), default=None)
                    self._cv.wait(None if soonest is None else soonest - now)
                    continue
            for _, expire, fired in fire:
                fired.set()
                try:
                    expire()
                except Exception:  # noqa: BLE001 - an expiry that fails (the worker already gone)
                    pass


_WATCHDOG = _Watchdog()


@contextmanager
def deadline(seconds: float, expire: Any) -> Iterator[threading.Event]:
    """Call ``expire()`` (from this process's watchdog thread) if the block is still running after
    ``seconds``; the yielded event is set once it has. For a step that can block on the worker
    without a pipe to poll (a reply's decode fetches shared memory from the worker's fd sharer):
    ``expire`` kills the worker, which ends the wait with an error the caller turns into
    :class:`WorkerTimeout`. A thread, not a signal: it works in any thread (the service and the
    batch run evaluations off the main thread)."""
    token, fired = _WATCHDOG.arm(seconds, expire)
    try:
        yield fired
    finally:
        _WATCHDOG.disarm(token)


# Sentinel: what a reference worker started dies with it ---------------------------------------

_SENTINEL_FD: int | None = None  #: write end of this process's sentinel pipe (:func:`start_sentinel`).


def start_sentinel() -> None:
    """Fork a sentinel that kills, when this process dies (even by SIGKILL), every candidate
    worker's process group still open and the cgroups this process made
    (:func:`kbv.processes.jail.kill_cgroups`), then exits.

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


def tell_sentinel(pid: int | None) -> None:
    if _SENTINEL_FD is not None and pid:
        try:
            os.write(_SENTINEL_FD, struct.pack("q", pid))
        except OSError:
            pass
