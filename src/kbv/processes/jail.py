"""The parent half of candidate containment (taxonomy 26): the process jail that kills, stops
and resumes everything a candidate worker started, and the clean-up of cgroups left by owners
that died. The worker half (:func:`kbv.sandbox.confinement.apply_sandbox`) joins the jail's cgroup.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import sys
import time
from collections.abc import Iterable

from kbv.sandbox.confinement import PR_SET_CHILD_SUBREAPER, mounts, prctl


def _own_cgroup() -> str | None:
    """This process's cgroup v2 directory, or None (no cgroup2 mount, not listed)."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next(line.split("::", 1)[1].strip() for line in f if line.startswith("0::"))
        root = next(point for point, _, fstype in mounts() if fstype == "cgroup2")
    except (OSError, StopIteration):
        return None
    return os.path.join(root, rel.lstrip("/"))


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


def _stopped(pid: int) -> bool:
    """``pid`` is stopped, frozen, a zombie or gone (state from /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"T", b"t", b"Z", b"X")


def _any_thread_stopped(pid: int) -> bool:
    """A thread of ``pid`` is still stopped or frozen (``T``/``t`` in /proc/<pid>/task/*/stat)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t"):
                    return True
        except (OSError, IndexError):
            continue
    return False


def _frozen(cgroup: str) -> bool:
    """``cgroup.events`` still says ``frozen 1``."""
    try:
        with open(os.path.join(cgroup, "cgroup.events")) as f:
            return "frozen 1" in f.read()
    except OSError:
        return False


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (from /proc/*/stat: /proc/*/task/*/children is optional)."""
    kids = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        kids.add(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def _kill_cgroup(path: str, timeout: float = 10.0) -> bool:
    """SIGKILL everything in cgroup ``path`` (``cgroup.kill``, else one by one) and remove it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(os.path.join(path, "cgroup.kill"), "w") as f:
                f.write("1")
        except FileNotFoundError:  # no such cgroup, or Linux < 5.14 (no cgroup.kill)
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except FileNotFoundError:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        except OSError:
            pass
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:  # still populated
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def kill_cgroups(owner_pid: int | None = None) -> None:
    """Kill and remove the cgroups :class:`ProcessJail` made in process ``owner_pid`` (a worker
    owner that died before it could close them), or by default in every process that no longer
    exists; looked up next to this process's own cgroup."""
    base = _own_cgroup()
    try:
        names = os.listdir(base) if base else []
    except OSError:
        return
    for name in names:
        owner = re.fullmatch(r"kbv-(\d+)-\d+", name)
        if owner and (int(owner[1]) == owner_pid if owner_pid is not None
                      else not os.path.exists(f"/proc/{owner[1]}")):
            _kill_cgroup(os.path.join(base, name))


class ProcessJail:
    """The parent side of process containment: :meth:`kill` ends every process a worker started.

    On Linux it makes a cgroup v2 ``kbv-<pid>-<n>`` next to this process's own cgroup when the
    hierarchy is writable (the worker joins it in :func:`apply_sandbox`; ``cgroup.kill`` reaches
    processes that left the session and were re-parented anywhere), after killing those of owners
    that no longer exist. In every case this process
    becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): orphans of its descendants are
    re-parented to it, and :meth:`kill` SIGKILLs and reaps each child it did not have when the
    worker started (:meth:`watch`). Both do nothing elsewhere.
    """

    _serial = itertools.count(1)

    def __init__(self, *, cgroup: bool = True):
        self.cgroup: str | None = None
        self._known: set[int] = set()
        self._linux = sys.platform == "linux"
        if not self._linux:
            return
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        base = _own_cgroup() if cgroup else None
        if base is not None:
            kill_cgroups()  # left by owners that died with their orchestrator
            path = os.path.join(base, f"kbv-{os.getpid()}-{next(self._serial)}")
            try:
                os.mkdir(path)
                self.cgroup = path
            except OSError:
                pass

    def watch(self) -> None:
        """Call right after the worker started: :meth:`kill` leaves this process's children of
        now alone (the worker included: its owner kills and reaps it)."""
        if self._linux:
            self._known = _children(os.getpid())

    def spare(self, pid: int) -> None:
        """Leave ``pid``, a child of this process started after :meth:`watch`, alone: another
        worker with a jail of its own (the next job's candidate worker, started early)."""
        self._known.add(pid)

    def pause(self, pid: int, settle_s: float = 0.1) -> tuple[int, ...]:
        """Stop the worker ``pid`` and every process it started (its descendants, and orphans
        re-parented to this process): SIGSTOP, plus ``cgroup.freeze`` where the jail has a cgroup.
        Nothing of the candidate runs until :meth:`resume`. Used while the baselines are timed: a
        native thread that burned the CPU whenever forward was idle slowed the eager baselines
        3-4x and earned a cheat a PASS at 4-5x. Waits up to
        ``settle_s`` for the processes to show as stopped. Returns the pids to resume.
        """
        pids = {pid}
        if self._linux:
            todo = [pid, *(_children(os.getpid()) - self._known - {pid})]
            while todo:
                p = todo.pop()
                pids.add(p)
                todo.extend(_children(p) - pids)
        for p in pids:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        deadline = time.monotonic() + settle_s
        while self._linux and time.monotonic() < deadline and not all(_stopped(p) for p in pids):
            time.sleep(0.001)
        if self.cgroup is not None:  # anything else in the jail's cgroup (a process that left the tree)
            _write(os.path.join(self.cgroup, "cgroup.freeze"), "1")
        return tuple(sorted(pids))

    def resume(self, pids: Iterable[int], settle_s: float = 0.05) -> None:
        """Undo :meth:`pause`, and wait up to ``settle_s`` until every thread of ``pids`` runs
        again (thawing a cgroup is asynchronous: a timed call started before its threads thaw
        waits for them, and an honest multithreaded kernel measured 10x slower)."""
        pids = tuple(pids)
        if self.cgroup is not None:
            _write(os.path.join(self.cgroup, "cgroup.freeze"), "0")
        for p in pids:
            try:
                os.kill(p, signal.SIGCONT)
            except OSError:
                pass
        deadline = time.monotonic() + settle_s
        while self._linux and time.monotonic() < deadline and (
                any(_any_thread_stopped(p) for p in pids) or (self.cgroup is not None and _frozen(self.cgroup))):
            time.sleep(0.0005)

    def kill(self, timeout: float = 10.0) -> bool:
        """Kill everything the worker started. True when all of it is gone within ``timeout``."""
        if not self._linux:
            return True
        done = self.cgroup is None or _kill_cgroup(self.cgroup, timeout)
        deadline = time.monotonic() + timeout
        while strays := _children(os.getpid()) - self._known:
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, os.WNOHANG)
                except OSError:  # gone, or not ours any more
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return done
