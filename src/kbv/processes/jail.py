"""The parent half of candidate containment (taxonomy 26): the process jail that kills, stops
and resumes everything a candidate worker started, bounds its memory and tasks, picks its own
uid, and the clean-up of cgroups and scratch mounts left by owners that died. The worker half
(:func:`kbv.sandbox.confinement.apply_sandbox`) joins the jail's cgroup and takes the uid.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import sys
import time
from collections.abc import Iterable

from kbv.processes.procfs import stat_fields
from kbv.processes.scratch import release_stale, remove_sysv
from kbv.sandbox.confinement import PR_SET_CHILD_SUBREAPER, mounts, prctl
from kbv.sandbox.limits import choose_uid, env_int, host_memory_bytes, max_tasks

#: share of host memory a candidate's cgroup may use (``memory.max``; its tmpfs pages count):
#: half leaves the trusted workers and the host working. kbv choice; ``KBV_CANDIDATE_MEMORY_BYTES``
#: overrides it.
MEMORY_SHARE = 0.5


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
    """Write ``text`` into the existing file ``path`` (a cgroup's: never created). False on failure."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, text.encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _stopped(pid: int) -> bool:
    """``pid`` is stopped, frozen, a zombie or gone (state from /proc/<pid>/stat)."""
    fields = stat_fields(f"/proc/{pid}/stat")
    return not fields or fields[0] in (b"T", b"t", b"Z", b"X")


def _any_thread_stopped(pid: int) -> bool:
    """A thread of ``pid`` is still stopped or frozen (``T``/``t`` in /proc/<pid>/task/*/stat)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(stat_fields(f"/proc/{pid}/task/{tid}/stat")[:1] in ([b"T"], [b"t"]) for tid in tids)


def _frozen(cgroup: str) -> bool:
    """``cgroup.events`` still says ``frozen 1``."""
    try:
        with open(os.path.join(cgroup, "cgroup.events")) as f:
            return "frozen 1" in f.read()
    except OSError:
        return False


def memory_limit_bytes() -> int:
    """``memory.max`` of a candidate's cgroup: :data:`MEMORY_SHARE` of host memory, or
    ``KBV_CANDIDATE_MEMORY_BYTES`` (0: no limit where host memory cannot be read).

    Raises:
        ValueError: ``KBV_CANDIDATE_MEMORY_BYTES`` is set but not a positive integer.
    """
    return env_int("KBV_CANDIDATE_MEMORY_BYTES", int(host_memory_bytes() * MEMORY_SHARE))


def limit_cgroup(path: str, memory_bytes: int, tasks: int) -> list[str]:
    """Write ``memory.max`` and ``pids.max`` of cgroup ``path`` (enabling the two controllers in
    its parent's ``cgroup.subtree_control`` first, where that is allowed). Returns one note each:
    the limit, or why there is none (a controller not delegated to kbv's cgroup)."""
    parent = os.path.dirname(path)
    notes = []
    for controller, name, value, what in (("memory", "memory.max", memory_bytes, f"{memory_bytes / 2**30:.1f} GiB"),
                                          ("pids", "pids.max", tasks, f"{tasks} tasks")):
        if not os.path.exists(os.path.join(path, name)):
            _write(os.path.join(parent, "cgroup.subtree_control"), f"+{controller}")
        if value <= 0:
            notes.append(f"cgroup {name}: not set (no host memory figure)")
        elif _write(os.path.join(path, name), str(value)):
            notes.append(f"cgroup {name}: {what}")
        else:
            notes.append(f"cgroup {name}: none (the {controller} controller is not enabled for kbv's cgroup)")
    return notes


def uid_processes(uid: int, *, live: bool = False) -> list[int]:
    """Pids whose real uid is ``uid`` (/proc/*/status); with ``live``, zombies (state Z or X: dead,
    waiting for their parent) left out, but not a process whose main thread exited while another
    runs (it reads Z with more than one thread; red-team helper, 2026-12-06)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as f:
                    fields = dict(l.split(":", 1) for l in f if l.startswith(("Uid:", "State:", "Threads:")))
                dead = fields["State"].split()[0] in "ZX" and int(fields.get("Threads", "1").split()[0]) <= 1
                if int(fields["Uid"].split()[0]) == uid and not (live and dead):
                    out.append(int(name))
            except (OSError, KeyError, ValueError, IndexError):
                continue
    return out


def _child_map() -> dict[int, set[int]]:
    """Every process's children, by parent pid, from one pass over /proc/*/stat
    (/proc/*/task/*/children is optional)."""
    kids: dict[int, set[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(stat_fields(f"/proc/{name}/stat")[1])
            except (IndexError, ValueError):
                continue
            kids.setdefault(ppid, set()).add(int(name))
    return kids


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid``."""
    return _child_map().get(pid, set())


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
    exists; looked up next to this process's own cgroup. Their scratch mounts go too
    (:func:`kbv.processes.scratch.release_stale`)."""
    release_stale(owner_pid)
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

    As root and with ``own_uid`` (cpu workers: CUDA IPC maps no buffer across uids) it also picks
    the worker's own uid (:attr:`uid`, :func:`kbv.sandbox.limits.choose_uid`):
    :meth:`kill` then also kills every process of that uid and removes its System V objects. Its
    cgroup gets ``memory.max`` and ``pids.max`` where those controllers are delegated
    (:func:`limit_cgroup`); :attr:`notes` says what it got.
    """

    _serial = itertools.count(1)

    def __init__(self, *, cgroup: bool = True, own_uid: bool = True):
        self.cgroup: str | None = None
        self.uid: int | None = None
        self.notes: tuple[str, ...] = ()
        self._linux = sys.platform == "linux"
        #: this process's children that are not the worker's: left alone by :meth:`kill` (those of
        #: now, so a jail never kills what was running before it existed; :meth:`watch` adds the rest)
        self._known: set[int] = _children(os.getpid()) if self._linux else set()
        if not self._linux:
            return
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        serial = next(self._serial)
        self.uid = choose_uid((os.getpid() << 8) | (serial & 0xFF)) if own_uid else None
        base = _own_cgroup() if cgroup else None
        notes = ["cgroup: none (no writable cgroup v2)"]
        if base is not None:
            kill_cgroups()  # left by owners that died with their orchestrator
            path = os.path.join(base, f"kbv-{os.getpid()}-{serial}")
            try:
                os.mkdir(path)
                self.cgroup = path
                notes = limit_cgroup(path, memory_limit_bytes(), max_tasks())
            except OSError as exc:
                notes = [f"cgroup: none ({exc.strerror})"]
        self.notes = tuple(notes)

    def watch(self) -> None:
        """Call right after the worker started: :meth:`kill` leaves this process's children of
        now alone (the worker included: its owner kills and reaps it)."""
        if self._linux:
            self._known = _children(os.getpid())

    def spare(self, pid: int) -> None:
        """Leave ``pid``, a child of this process started after :meth:`watch`, alone: another
        worker with a jail of its own (the next job's candidate worker, started early)."""
        self._known.add(pid)

    def tree(self, pid: int) -> set[int]:
        """The worker ``pid`` and every process it started: its descendants, and orphans re-parented
        to this process (children of this process started after :meth:`watch`), with theirs."""
        pids = {pid}
        if self._linux:  # one pass over /proc for the whole tree (one a process cost 4.5 ms a call on a GPU host)
            kids = _child_map()
            todo = [pid, *(kids.get(os.getpid(), set()) - self._known - {pid})]
            while todo:
                p = todo.pop()
                pids.add(p)
                todo.extend(kids.get(p, set()) - pids)
        return pids

    def pause(self, pid: int, settle_s: float = 0.1) -> tuple[int, ...]:
        """Stop the worker ``pid`` and every process it started (its descendants, and orphans
        re-parented to this process): SIGSTOP, plus ``cgroup.freeze`` where the jail has a cgroup.
        Nothing of the candidate runs until :meth:`resume`. Used while the baselines are timed: a
        native thread that burned the CPU whenever forward was idle slowed the eager baselines
        3-4x and earned a cheat a PASS at 4-5x. Waits up to
        ``settle_s`` for the processes to show as stopped. Returns the pids to resume.
        """
        pids = self.tree(pid)
        for p in pids:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        deadline = time.monotonic() + settle_s
        while self._linux and time.monotonic() < deadline and not all(_stopped(p) for p in pids):
            time.sleep(0.0002)  # a stop takes tens of µs: a coarser poll is the stop's main cost
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
        if self.uid is not None:  # the worker's own uid: whatever of it left the cgroup and the tree,
            # until none is left alive: a SIGKILL takes effect later (a `sleep` the target started was
            # still there after a run's kill, full suite under load, 2026-12-06)
            while live := uid_processes(self.uid, live=True):
                for pid in live:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                if time.monotonic() > deadline:
                    done = False
                    break
                time.sleep(0.01)
            remove_sysv(self.uid)
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
