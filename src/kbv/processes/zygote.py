"""The handle of the candidate workers' zygote (:mod:`kbv.sandbox.forkserver`), trusted side, and
of the workers it forks (:class:`AdoptedWorker`).

One zygote per process that starts candidate workers and per device and environment, started on
first use; a candidate worker is then a fork of its preloaded state instead of a fresh interpreter
that imports torch and the harness. A zygote that cannot start or that fails a request is given
up for this process and workers are spawned as before (:func:`enabled` says where it is used):
the zygote only saves time, it never decides anything.

The worker it forks is re-parented to this process (a child subreaper) before it runs anything of
its own, so :class:`AdoptedWorker` can wait for it, read its exit status and kill it without a pid
race, as :class:`multiprocessing.Process` does for a spawned worker.
"""

from __future__ import annotations

import atexit
import os
import pickle
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from typing import Any

from kbv.processes.handles import environ_set, plain_main, spawn_context
from kbv.sandbox.confinement import PR_SET_CHILD_SUBREAPER, WorkerSetup, prctl
from kbv.sandbox.worker_env import worker_environment
from kbv.sandbox.forkserver import READY, zygote_main

#: seconds the zygote's start-up (torch and the harness imported) may take; seconds one fork may take.
START_TIMEOUT_S = 300.0
FORK_TIMEOUT_S = 30.0


def enabled(device: str = "cpu") -> bool:
    """Whether ``device``'s candidate workers are forked from a zygote here: on Linux (subreapers,
    ``/proc``), unless ``KBV_ZYGOTE=0``. ``device`` (``cpu`` or ``cuda``) is the workers' device:
    both are forked (the zygote never initialises CUDA; on the H100 of 2026-12-05 the whole cuda
    suite and two 40-kernel batches ran with forked workers, docs/gpu-runs.md)."""
    del device  # one rule for both devices; kept for callers that name theirs
    if sys.platform != "linux" or not hasattr(socket, "send_fds"):
        return False
    return os.environ.get("KBV_ZYGOTE", "") != "0"


class AdoptedWorker:
    """A worker this process adopted (forked by the zygote, re-parented here): the part of
    :class:`multiprocessing.Process`'s interface the worker handles use (``pid``, ``is_alive``,
    ``exitcode``, ``join``, ``kill``)."""

    def __init__(self, pid: int):
        self.pid = pid
        self._exitcode: int | None = None

    def _poll(self, block: bool = False) -> None:
        if self._exitcode is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: gone, its status unknown
            self._exitcode = -signal.SIGKILL
            return
        if pid:
            self._exitcode = os.waitstatus_to_exitcode(status)

    @property
    def exitcode(self) -> int | None:
        """As :attr:`multiprocessing.Process.exitcode`: None while it runs, ``-N`` if signal N ended it."""
        self._poll()
        return self._exitcode

    def is_alive(self) -> bool:
        self._poll()
        return self._exitcode is None

    def join(self, timeout: float | None = None) -> None:
        if timeout is None:
            self._poll(block=True)
            return
        deadline = time.monotonic() + timeout
        while self.is_alive() and time.monotonic() < deadline:
            time.sleep(min(0.005, max(0.0, deadline - time.monotonic())))

    def kill(self) -> None:
        if self.is_alive():  # not reaped yet: the pid is still this worker's
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass


class Zygote:
    """One running zygote (see the module doc)."""

    def __init__(self, device: str):
        self.device = device
        self.lock = threading.Lock()
        #: its HOME, TMPDIR and caches: an empty folder of its own (its imports write nothing there)
        self.home = tempfile.mkdtemp(prefix="kbv-zygote-")
        env = worker_environment(WorkerSetup(workdir=self.home, build_dir=self.home, log_path="", device=device))
        prctl(PR_SET_CHILD_SUBREAPER, 1)  # before the zygote exists: its forks' workers come here
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ctx = spawn_context()
        from kbv.sandbox.confinement import InheritedFd

        self.proc = ctx.Process(target=zygote_main, args=(InheritedFd(theirs.fileno()), device), daemon=True,
                                name="kbv-zygote")
        try:
            with environ_set(env), plain_main():
                self.proc.start()
        except BaseException:
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self.sock = ours
        self._ready = False  #: its READY arrived (it preloads while its owner goes on)

    def _wait_ready(self) -> None:
        if self._ready:
            return
        self.sock.settimeout(START_TIMEOUT_S)
        try:
            answer = self.sock.recv(256)
        except OSError as exc:
            raise RuntimeError(f"the zygote did not start: {exc}") from None
        if answer != READY:
            raise RuntimeError(f"the zygote refused to fork: {answer.decode(errors='replace') or 'it exited'}")
        self._ready = True
        shutil.rmtree(self.home, ignore_errors=True)  # its imports are done: nothing reads it again

    def fork(self, setup: WorkerSetup, conn_fd: int, log_fd: int) -> AdoptedWorker:
        """A new candidate worker for ``setup``, given its request pipe's end and its log's write
        end (both stay open here: the caller closes them).

        Raises:
            RuntimeError: the zygote is gone or did not fork (the caller spawns instead).
        """
        with self.lock:
            self._wait_ready()
            try:
                self.sock.settimeout(FORK_TIMEOUT_S)
                socket.send_fds(self.sock, [pickle.dumps(setup)], [conn_fd, log_fd])
                raw = self.sock.recv(8)
            except OSError as exc:
                raise RuntimeError(f"the zygote failed: {exc}") from None
        pid = struct.unpack("q", raw)[0] if len(raw) == 8 else 0
        if pid <= 0:
            raise RuntimeError("the zygote did not fork a worker")
        # adopted once the intermediate child exited, which the zygote waited for before answering
        if _parent_of(pid) not in (os.getpid(), None):
            raise RuntimeError(f"worker {pid} was not re-parented here")
        return AdoptedWorker(pid)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.pid is not None:
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(timeout=5)
        shutil.rmtree(self.home, ignore_errors=True)


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


_ZYGOTES: dict[tuple, Zygote] = {}  #: closed at exit (atexit below): each zygote and its folder
_FAILED: set[tuple] = set()
_LOCK = threading.Lock()


def zygote_for(device: str, on_start: Any = None) -> Zygote | None:
    """This process's zygote for ``device`` and the current environment (started now if needed,
    ``on_start(pid)`` told of a new one), or None where there is none (not :func:`enabled`, or it
    failed here before)."""
    if not enabled(device):
        return None
    # the environment a worker would inherit, less its own folders: a lane that changes it (its
    # CUDA_VISIBLE_DEVICES) gets a zygote of its own
    probe = WorkerSetup(workdir="/nonexistent", build_dir="/nonexistent", log_path="", device=device)
    key = (device, tuple(sorted((k, v) for k, v in worker_environment(probe).items() if "/nonexistent" not in v)))
    with _LOCK:
        z = _ZYGOTES.get(key)
        if z is not None and z.alive():
            return z
        if z is not None:
            z.close()
            del _ZYGOTES[key]
        if key in _FAILED:
            return None
        try:
            z = Zygote(device)
        except Exception:  # noqa: BLE001 - no zygote here: workers are spawned
            _FAILED.add(key)
            return None
        _ZYGOTES[key] = z
    if on_start is not None and z.proc.pid:
        on_start(z.proc.pid)
    return z


def give_up(z: Zygote) -> None:
    """Stop using ``z`` in this process (it failed a request): later workers are spawned."""
    with _LOCK:
        for key, other in list(_ZYGOTES.items()):
            if other is z:
                del _ZYGOTES[key]
                _FAILED.add(key)
    z.close()


def close_all() -> None:
    with _LOCK:
        for z in _ZYGOTES.values():
            z.close()
        _ZYGOTES.clear()


atexit.register(close_all)

__all__ = ["AdoptedWorker", "Zygote", "zygote_for", "give_up", "close_all", "enabled"]
