"""Who else uses the GPU while kbv times: NVML's compute processes on the device, less kbv's own.

A GPU shared with other work slows every subject timed on it, and slows a device-wide synchronize
more than a kernel: a detector that compares times must know the pass was disturbed before it
accuses (kbv.pipeline.sync). The reference worker asks NVML (``nvidia-ml-py``, optional) for the
device's compute processes and leaves out itself and its descendants (the candidate worker, what it
started, the next job's worker started early). Inside a container NVML may report host PIDs that
match no PID here; then kbv's own processes are counted instead (those holding a ``/dev/nvidia*``
file open) and only the excess is taken as other work. kbv's own processes are the tree of the
orchestrator that started the reference worker (:data:`ORCHESTRATOR_ENV`): its build pool, its
other lanes and the next jobs' workers are stopped or elsewhere while a job times, and a batch alone
on the H200 read 9-17 of them as "other processes" of a shared GPU (2026-12-04), which left every
cuda floor of the batch uncredited (the tree is read through every thread's children: the lanes
start their workers from threads). Where NVML is missing or refuses, the other processes of this
PID namespace that hold a ``/dev/nvidia*`` file open are counted instead (``source: proc``): they
miss work from other containers, which only NVML sees. On the lent H200 NVML answers where
nvidia-ml-py is installed (``nvmlDeviceGetComputeRunningProcesses`` listed this process with its
memory, 2026-12-05).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuShare:
    """One reading (NVML): ``others`` compute processes that are not kbv's, their device memory."""

    available: bool  #: NVML answered.
    others: int = 0
    other_bytes: int = 0
    processes: int = 0  #: every compute process NVML listed on the device.
    utilization_pct: int | None = None  #: the device's utilisation over NVML's last sample period.
    source: str = "nvml"  #: ``nvml``, or ``proc``: ``others`` counted from /proc (NVML unavailable).

    def evidence(self) -> dict:
        return {"nvml": self.available, "other_processes": self.others, "other_bytes": self.other_bytes,
                "processes": self.processes, "utilization_pct": self.utilization_pct, "source": self.source}


#: set by :class:`kbv.processes.reference.ReferenceProcess` to the orchestrator's PID in the reference
#: worker's environment (trusted: the candidate never writes that process's environment).
ORCHESTRATOR_ENV = "KBV_ORCHESTRATOR_PID"


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def kbv_root() -> int:
    """The PID whose tree is kbv's own: the orchestrator named by :data:`ORCHESTRATOR_ENV` when it
    is an ancestor of this process, else this process."""
    me = os.getpid()
    try:
        root = int(os.environ.get(ORCHESTRATOR_ENV, ""))
    except ValueError:
        return me
    p, seen = me, set()
    while p and p not in seen:
        if p == root:
            return root
        seen.add(p)
        p = _parent(p)
    return me


def _children(pid: int) -> set[int]:
    """The children of every thread of ``pid``: /proc lists a child under the thread that forked it
    (the batch's lanes and build pool start their workers from threads of the orchestrator, which
    the main thread's list leaves out)."""
    kids: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.update(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
    return kids


def _descendants(pid: int) -> set[int]:
    out, todo = {pid}, [pid]
    while todo:
        kids = _children(todo.pop())
        todo.extend(kids - out)
        out |= kids
    return out


def _uses_gpu(pid: int) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/nvidia")
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _proc_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def proc_share() -> GpuShare:
    """``GpuShare(available=False, source="proc")`` counting the processes of this PID namespace,
    not kbv's own (:func:`kbv_root`'s tree), that hold a ``/dev/nvidia*`` file open (any GPU: /proc
    does not say which)."""
    ours = _descendants(kbv_root())
    return GpuShare(False, sum(1 for p in _proc_pids() if p not in ours and _uses_gpu(p)), source="proc")


def read(device_index: int = 0) -> GpuShare:
    """The compute processes on GPU ``device_index`` that are not kbv's own (:func:`kbv_root`'s tree);
    :func:`proc_share` where NVML is missing or refuses (never raises)."""
    try:
        import pynvml
    except ImportError:
        return proc_share()
    try:
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            procs = list(pynvml.nvmlDeviceGetComputeRunningProcesses(h))
            try:
                util = int(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
            except pynvml.NVMLError:
                util = None
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - NVML missing, no permission, no device
        return proc_share()
    ours = _descendants(kbv_root())
    matched = [p for p in procs if int(p.pid) in ours]
    if matched:
        others = [p for p in procs if int(p.pid) not in ours]
    else:  # another PID namespace: count kbv's own GPU users instead
        mine = sum(1 for p in ours if _uses_gpu(p))
        others = sorted(procs, key=lambda p: int(p.usedGpuMemory or 0), reverse=True)[:max(0, len(procs) - mine)]
    return GpuShare(True, len(others), sum(int(p.usedGpuMemory or 0) for p in others), len(procs), util)
