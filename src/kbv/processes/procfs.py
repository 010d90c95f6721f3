"""What /proc says about a worker process: its CPU time and the signals it catches."""

from __future__ import annotations

import os
import signal

#: signals whose handler in the candidate's process means memory that fills itself on a fault.
FAULT_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS})


def stat_fields(path: str) -> list[bytes]:
    """The fields of a /proc ``stat`` file after the command name (``fields[0]`` the state,
    ``fields[1]`` the parent pid, ``fields[11:15]`` utime, stime, cutime, cstime); [] when it is
    gone. Raw reads: the trusted side reads these inside the bound pass's clock (every stop of a
    worker's tree walks /proc), where buffered file objects cost 2 ms on a host of 70 processes."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    try:
        return os.read(fd, 4096).rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []
    finally:
        os.close(fd)


def process_cpu_ms(pid: int | None) -> float | None:
    """User + system CPU time of process ``pid`` (all its threads) in ms, from /proc/<pid>/stat."""
    if pid is None:
        return None
    try:
        fields = stat_fields(f"/proc/{pid}/stat")
        return (int(fields[11]) + int(fields[12])) * 1e3 / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError):
        return None


def process_and_children_cpu_ms(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (all its threads) and of its children it has
    waited for, in ms (utime, stime, cutime, cstime of /proc/<pid>/stat); None when /proc does not say."""
    fields = stat_fields(f"/proc/{pid}/stat")
    if len(fields) < 15:
        return None
    try:
        return sum(int(x) for x in fields[11:15]) * 1e3 / os.sysconf("SC_CLK_TCK")
    except ValueError:
        return None


def cgroup_cpu_ms(path: str | None) -> float | None:
    """CPU time of every process that ever ran in cgroup v2 ``path``, in ms (``usage_usec`` of its
    ``cpu.stat``, kept by the kernel whatever the controllers); None when it cannot be read."""
    if not path:
        return None
    try:
        with open(os.path.join(path, "cpu.stat")) as f:
            return next(int(l.split()[1]) / 1e3 for l in f if l.startswith("usage_usec "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def thread_cpu_ms(pid: int | None) -> dict[int, float]:
    """CPU time of each live thread of process ``pid`` in ms, at nanosecond resolution: the first
    field of /proc/<pid>/task/<tid>/schedstat (time on a CPU). Empty when /proc does not say
    (no such process, no schedstat); a thread that ends while it is read is left out."""
    out: dict[int, float] = {}
    if pid is None:
        return out
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e6
        except (OSError, IndexError, ValueError):
            continue
    return out


def run_delay_ms(pid: int | None, tid: int | None = None) -> float | None:
    """Time thread ``tid`` (default: the main thread) of process ``pid`` has waited runnable for a
    CPU, in ms: the second field of /proc/<pid>/task/<tid>/schedstat. None when /proc does not say."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/task/{tid or pid}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return None


def affinity_cores(pid: int | None) -> int:
    """CPUs process ``pid`` may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(pid or 0)))
    except OSError:
        return max(1, os.cpu_count() or 1)


def caught_signals(pid: int) -> frozenset:
    """Signals process ``pid`` has a handler for (``SigCgt`` of /proc/<pid>/status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next((int(l.split()[1], 16) for l in f if l.startswith("SigCgt:")), 0)
    except (OSError, ValueError):
        return frozenset()
    return frozenset(n for n in range(1, 65) if mask >> (n - 1) & 1)


def undumpable() -> bool:
    """Make this process not dumpable (``prctl(PR_SET_DUMPABLE, 0)``): a process of the same user
    without ``CAP_SYS_PTRACE`` can then neither ptrace it nor read its ``/proc/<pid>/mem``,
    ``maps`` or ``environ``, nor use ``process_vm_readv`` on it (ptrace(2), "Ptrace access mode
    checking"), and it writes no core dump. Every kbv process calls it first: the orchestrator,
    the reference worker (it holds the secret seeds and the reference outputs), the sentinel and
    each candidate worker (so no candidate reads another's). Without it, a candidate of a user's
    run (no capabilities on either side) could attach to all of them. Also stops ``py-spy`` and
    ``gdb -p`` by the same user; root keeps both. Returns False where the call failed (not Linux).

    An undumpable process's /proc files belong to root (proc(5)), so a non-root one can no longer
    open its own ``clear_refs`` for writing: it is opened first and kept (:func:`clear_refs_fd`)."""
    if not os.path.exists("/proc/self"):
        return False
    clear_refs_fd()
    from kbv.sandbox.confinement import PR_SET_DUMPABLE, prctl  # the same call the candidate worker makes

    try:
        return prctl(PR_SET_DUMPABLE, 0)
    except (OSError, AttributeError):
        return False


_CLEAR_REFS: tuple[int, int] | None = None  #: (pid, fd) of this process's /proc/self/clear_refs, kept open.


def clear_refs_fd() -> int | None:
    """A write descriptor of this process's ``/proc/self/clear_refs`` (``VmHWM`` reset,
    :func:`kbv.processes.footprint.reset_host_peak`), opened once per process and kept (close on
    exec): writes through it still work once :func:`undumpable` has made the file root's. None
    where it cannot be opened."""
    global _CLEAR_REFS
    if _CLEAR_REFS is None or _CLEAR_REFS[0] != os.getpid():  # a forked child opens its own
        try:
            _CLEAR_REFS = (os.getpid(), os.open("/proc/self/clear_refs", os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            return None
    return _CLEAR_REFS[1]
