"""kbv.processes.held_memory: what the candidate's tree holds, read on the trusted side (NVML stand-ins:
this machine has no GPU; the cuda path is run by tests/e2e/test_memory_growth.py on a GPU host)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from kbv.processes import held_memory as hm

MiB = 1 << 20


class FakeNvml:
    """pynvml's calls that held_memory makes, over a fixed process list per device."""

    def __init__(self, procs_per_device, fail=False):
        self.procs, self.fail, self.inits, self.shutdowns = procs_per_device, fail, 0, 0

    def nvmlInit(self):
        self.inits += 1
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.procs)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in self.procs[handle]]


def test_nvml_sums_the_trees_processes_on_every_device():
    me = os.getpid()
    nvml = FakeNvml([[(me, 900 * MiB), (4242, 600 * MiB), (4243, 20 * MiB)], [(4243, 2 * MiB), (77, MiB)]])
    assert hm.nvml_tree_bytes({4242, 4243}, nvml) == (622 * MiB, "")
    assert nvml.inits == nvml.shutdowns == 1
    assert hm.nvml_tree_bytes({5000}, nvml) == (0, "")  # listed nowhere: holds no device memory


def test_nvml_that_cannot_tell_this_namespaces_processes_gives_no_figure():
    got, why = hm.nvml_tree_bytes({4242}, FakeNvml([[(1, 900 * MiB), (2, 600 * MiB)]]))  # a container's host PIDs
    assert got is None and "PID namespace" in why
    got, why = hm.nvml_tree_bytes({4242}, FakeNvml([[(os.getpid(), 900 * MiB), (4242, None)]]))
    assert got is None and "per-process" in why
    got, why = hm.nvml_tree_bytes({4242}, FakeNvml([], fail=True))
    assert got is None and "NVML refused" in why


def test_the_resident_set_of_the_tree_and_a_process_that_ended():
    me = os.getpid()
    mine = hm.tree_rss_bytes({me}, me)
    assert mine is not None and mine > 10 * MiB
    both = hm.tree_rss_bytes({me, 2 ** 22 + 12345}, me)  # a process that ended adds nothing
    assert both is not None and abs(both - mine) < 8 * MiB
    assert hm.tree_rss_bytes({2 ** 22 + 12345}, 2 ** 22 + 12345) is None


def test_cpu_samples_the_host_alone():
    me = os.getpid()
    held = hm.HeldMemory(lambda: {me}, me, torch.device("cpu"))
    for calls in (0, 10, 20):
        held.sample(calls)
    assert [c for c, _ in held.host] == [0, 10, 20] and all(b for _, b in held.host)
    assert held.device == [] and held.source is None


def test_cuda_takes_nvml_first_then_the_devices_used_memory_unless_shared(monkeypatch):
    me = os.getpid()
    dev = torch.device("cuda", 0)
    nvml = FakeNvml([[(me, 900 * MiB), (4242, 600 * MiB)]])
    held = hm.HeldMemory(lambda: {4242}, me, dev, nvml=nvml)
    held.sample(0)
    held.sample(17)
    assert held.source == "nvml" and held.device == [(0, 600 * MiB), (17, 600 * MiB)] and held.note == ""

    used = iter([700 * MiB, 708 * MiB])
    monkeypatch.setattr(hm, "device_used_bytes", lambda device: next(used))
    foreign = FakeNvml([[(1, 900 * MiB)]])
    held = hm.HeldMemory(lambda: {4242}, me, dev, nvml=foreign)
    held.sample(0)
    held.sample(17)
    assert held.source == "device" and held.device == [(0, 700 * MiB), (17, 708 * MiB)]
    assert "PID namespace" in held.note

    held = hm.HeldMemory(lambda: {4242}, me, dev, gpu_shared=True, nvml=foreign)
    held.sample(0)
    assert held.source is None and held.device == [] and "shares the GPU" in held.note
