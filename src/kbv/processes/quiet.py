"""Quiet timing: the build pool's processes are stopped while any lane times.

A lane's reference worker marks its timed phase with :class:`TimingFlag` (a file
``timing-<pid>-<n>`` in a directory the batch driver made and names in each job); the build pool's
:class:`BuildPauser` polls that directory and, while any live process holds a flag, keeps every
build process stopped (SIGSTOP of the pool's reference workers and all their descendants: the
build's candidate workers, ninja, nvcc, the compilers), then continues them (SIGCONT). A lane
entering its timed phase waits until the pauser has written ``paused`` (at most
:data:`ACK_WAIT_S`), so its first timed call runs with the builds already stopped; the verdict's
evidence says whether that acknowledgement came (``builds_during_timing``).

Idle priority (``SCHED_IDLE``, nice 19: :mod:`kbv.batch.executors.builds`) already gives a timing
loop the cores it asks for; stopping the builds also takes them off the caches, memory bandwidth,
SMT siblings and the package's frequency budget that a busy neighbour shares whatever its priority.
The cost is build time lost while lanes time: a build stopped that way resumes where it was.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

FLAG_PREFIX = "timing-"
PAUSED = "paused"  #: written by the pauser while the builds are stopped.
POOL = "pool"  #: written while a pauser watches the directory (a flag then waits for ``paused``).
#: seconds a timing phase waits for the pauser's acknowledgement at most (it polls every POLL_S).
ACK_WAIT_S = 0.5
POLL_S = 0.01
#: a flag older than this is ignored (a timing phase is bounded by the timing deadlines, far less).
STALE_FLAG_S = 3600.0

_serial = itertools.count(1)


class TimingFlag:
    """``with TimingFlag(directory):`` marks this process as timing (see the module doc); a no-op
    when ``directory`` is None. :attr:`acknowledged` tells, inside, whether the build pool had
    stopped its builds when the block started (None: no pool watches the directory)."""

    def __init__(self, directory: str | os.PathLike | None, wait_s: float = ACK_WAIT_S):
        self.directory = Path(directory) if directory else None
        self.wait_s = wait_s
        self.acknowledged: bool | None = None
        self._path: Path | None = None

    def __enter__(self) -> "TimingFlag":
        if self.directory is None or not self.directory.is_dir():
            return self
        self._path = self.directory / f"{FLAG_PREFIX}{os.getpid()}-{next(_serial)}"
        try:
            self._path.write_text(str(time.time()))
        except OSError:
            self._path = None
            return self
        if (self.directory / POOL).exists():
            deadline = time.monotonic() + self.wait_s
            while not (self.directory / PAUSED).exists() and time.monotonic() < deadline:
                time.sleep(POLL_S / 2)
            self.acknowledged = (self.directory / PAUSED).exists()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._path is not None:
            try:
                self._path.unlink()
            except OSError:
                pass
            self._path = None


def _alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def timing_now(directory: Path) -> bool:
    """Some live process holds a fresh timing flag in ``directory`` (stale flags are removed)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    now = time.time()
    for name in names:
        if not name.startswith(FLAG_PREFIX):
            continue
        path = directory / name
        try:
            pid = int(name[len(FLAG_PREFIX):].split("-", 1)[0])
            fresh = now - path.stat().st_mtime < STALE_FLAG_S
        except (ValueError, OSError):
            continue
        if fresh and _alive(pid):
            return True
        try:
            path.unlink()
        except OSError:
            pass
    return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (one pass over /proc)."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    out[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return out


def stop_trees(roots: Iterable[int]) -> list[int]:
    """SIGSTOP every process of the trees under ``roots`` (the roots included); returns them in
    the order stopped. A process forked while the walk ran is found by the next pass (its parent
    is stopped by then, so the passes end)."""
    stopped: list[int] = []
    seen: set[int] = set()
    todo = [r for r in roots if r]
    while todo:
        for pid in todo:
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            except OSError:
                pass
        parents = _parents()
        todo = [p for p, pp in parents.items() if pp in seen and p not in seen]
    return stopped


def continue_all(pids: Iterable[int]) -> None:
    """SIGCONT each of ``pids`` (gone ones are skipped)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass


class BuildPauser:
    """Keeps the processes under ``roots()`` stopped while some lane holds a timing flag in
    ``directory`` (see the module doc). :meth:`close` continues everything and ends the thread.

    Attributes:
        paused_s: seconds the builds were held stopped in all.
        pauses: times they were stopped.
    """

    def __init__(self, directory: str | os.PathLike, roots: Callable[[], list[int]], poll_s: float = POLL_S):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._roots = roots
        self._poll_s = poll_s
        self._stopped: list[int] = []
        self._since = 0.0
        self.paused_s = 0.0
        self.pauses = 0
        self._end = threading.Event()
        (self.directory / POOL).write_text(str(os.getpid()))
        self._thread = threading.Thread(target=self._run, name="kbv-build-pauser", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._end.wait(self._poll_s):
            timing = timing_now(self.directory)
            if timing and not self._stopped:
                self._stopped = stop_trees(self._roots()) or [0]
                self._since = time.monotonic()
                self.pauses += 1
                (self.directory / PAUSED).write_text(str(len(self._stopped)))
            elif not timing and self._stopped:
                self._resume()

    def _resume(self) -> None:
        try:
            (self.directory / PAUSED).unlink()
        except OSError:
            pass
        continue_all(reversed([p for p in self._stopped if p]))
        self.paused_s += time.monotonic() - self._since
        self._stopped = []

    def close(self) -> None:
        """Continue every stopped build and stop watching (the directory is left to its owner)."""
        self._end.set()
        self._thread.join(timeout=5)
        if self._stopped:
            self._resume()
        for name in (POOL, PAUSED):
            try:
                (self.directory / name).unlink()
            except OSError:
                pass

    def __enter__(self) -> "BuildPauser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["TimingFlag", "BuildPauser", "timing_now", "stop_trees", "continue_all", "ACK_WAIT_S", "POLL_S"]
