"""What the candidate worker's process tree holds, read by the reference worker (trusted) between
its requests: never a figure the candidate reports. :class:`HeldMemory` samples it after a given
number of forward calls; :mod:`kbv.checks.memory_growth_rules` judges the samples (a leak).

* **Host** (``proc``, both devices): the resident set, ``VmRSS`` of ``/proc/<pid>/status``, summed
  over the tree (:meth:`kbv.processes.jail.ProcessJail.tree`: the worker, its descendants and
  orphans re-parented to this process).
* **Device** (cuda), the first of these that answers on the first sample, kept for the series:

  - ``nvml``: NVML's ``usedGpuMemory`` of each of the tree's processes
    (``nvmlDeviceGetComputeRunningProcesses`` on every device, nvidia-ml-py). Only where NVML lists
    this process too: inside a container NVML may list the host's PIDs, which match none here
    (as :mod:`kbv.processes.gpushare` finds); a process that NVML does not list holds nothing.
  - ``device``: the device's used memory (``cudaMemGetInfo``, in this process) less this process's
    own caching allocator's reserved bytes, only while no other work shares the GPU (the
    timing stage's :func:`kbv.processes.gpushare.read`): this process's context and library
    handles are constant over the timing rounds, so what moves is the candidate's.
  - none (the host series alone), with the reason in :attr:`HeldMemory.note`.

Cost of one sample: one ``/proc/<pid>/status`` read per process of the tree and the tree's walk
(tens of µs each), and on cuda one NVML session (``nvmlInit``, one query per device,
``nvmlShutdown``: 0.1-0.2 ms on the H200, 2026-12-05) or one ``cudaMemGetInfo``. No forward call: the timing rounds
make the calls, and the samples are taken between rounds, outside every timed call.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

import torch

from kbv.processes.footprint import host_rss_bytes


def tree_rss_bytes(pids: Iterable[int], main: int) -> int | None:
    """``VmRSS`` summed over ``pids`` (bytes); a process that ended since the tree was read adds
    nothing; None when ``main`` (the worker itself) cannot be read."""
    total = 0
    for pid in pids:
        rss = host_rss_bytes(pid)
        if rss is None and pid == main:
            return None
        total += rss or 0
    return total


def nvml_tree_bytes(pids: set[int], nvml: Any = None) -> tuple[int | None, str]:
    """Device bytes NVML gives the processes ``pids`` on every device, and why not (``""`` when
    read). None: NVML is missing or refuses, lists none of this process's PID namespace (this
    process, which holds a CUDA context, is not among its PIDs), or has no per-process figure
    (``usedGpuMemory`` None) for one of ``pids``. ``nvml``: the pynvml module (a stand-in in tests)."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None, "nvidia-ml-py is not installed"
    try:
        nvml.nvmlInit()
        try:
            procs = [p for i in range(int(nvml.nvmlDeviceGetCount()))
                     for p in nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(i))]
        finally:
            nvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - NVML missing, no permission, no device
        return None, f"NVML refused: {type(exc).__name__}: {exc}"[:200]
    if not any(int(p.pid) == os.getpid() for p in procs):
        return None, "NVML lists no process of this PID namespace (a container's host PIDs)"
    mine = [p for p in procs if int(p.pid) in pids]
    if any(p.usedGpuMemory is None for p in mine):
        return None, "NVML gives no per-process memory here"
    return sum(int(p.usedGpuMemory) for p in mine), ""


def device_used_bytes(device: torch.device) -> int:
    """The device's used bytes (total less free, every process) less this process's reserved ones."""
    free, total = torch.cuda.mem_get_info(device)
    return int(total - free - torch.cuda.memory_reserved(device))


class HeldMemory:
    """Samples of what one candidate worker's tree holds after successive numbers of forward calls:
    :attr:`host` (``proc``) on both devices, :attr:`device` on cuda (source :attr:`source`)."""

    def __init__(self, tree: Callable[[], set[int]], main: int, device: torch.device, *, gpu_shared: bool = False,
                 nvml: Any = None) -> None:
        """``tree``: the worker's processes now (:meth:`kbv.processes.jail.ProcessJail.tree`);
        ``main``: the worker's PID; ``gpu_shared``: other work uses the GPU (no ``device`` source)."""
        self._tree, self._main, self._dev, self._shared, self._nvml = tree, main, device, gpu_shared, nvml
        self.host: list[tuple[int, int | None]] = []
        self.device: list[tuple[int, int | None]] = []
        #: the device samples' source (``nvml`` or ``device``), None before the first sample and
        #: where there is none (cpu, or neither answered).
        self.source: str | None = None
        #: why there are no device samples, or why NVML was not their source (``""``: nothing to say).
        self.note = ""

    def sample(self, calls: int) -> None:
        """Read the tree's memory after ``calls`` forward calls (never raises); on cuda the first
        sample chooses the device source."""
        try:
            pids = self._tree()
        except Exception:  # noqa: BLE001 - /proc unreadable: the worker alone
            pids = {self._main}
        first, got = not self.host, None
        self.host.append((int(calls), tree_rss_bytes(pids, self._main)))
        if self._dev.type != "cuda":
            return
        if first:
            self.source, got = self._choose(pids)
        elif self.source is not None:
            got = self._read(pids)
        if self.source is not None:
            self.device.append((int(calls), got))

    def _choose(self, pids: set[int]) -> tuple[str | None, int | None]:
        """The device source and its first reading: ``nvml`` where it gives the tree's bytes, else
        ``device`` where the GPU is not shared and ``cudaMemGetInfo`` answers, else None;
        :attr:`note` says why not NVML, and why none."""
        got, self.note = nvml_tree_bytes(pids, self._nvml)
        if got is not None:
            return "nvml", got
        if self._shared:
            self.note += "; other work shares the GPU: no device reading"
            return None, None
        try:
            return "device", device_used_bytes(self._dev)
        except Exception as exc:  # noqa: BLE001 - no device reading at all
            self.note += f"; cudaMemGetInfo failed: {type(exc).__name__}"
            return None, None

    def _read(self, pids: set[int]) -> int | None:
        if self.source == "nvml":
            return nvml_tree_bytes(pids, self._nvml)[0]
        try:
            return device_used_bytes(self._dev)
        except Exception:  # noqa: BLE001 - this sample fails, the series says nothing
            return None
