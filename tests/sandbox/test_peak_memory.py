"""A verification's device peak survives the per-forward resets of the memory measurement
(kbv.processes.footprint.process_peak_bytes), with torch's one counter per device faked on cpu; the
measurement itself changes no state of its sandbox module, which the candidate worker's harness
guard watches."""

import torch

from kbv.processes import footprint as fp
from kbv.sandbox import peak_memory
from kbv.sandbox.guard import HarnessGuard


class _FakeCuda:
    """torch.cuda's allocator counters for one device: allocations move ``allocated`` and the peak."""

    def __init__(self):
        self.allocated, self.peak = 0, 0

    def alloc(self, n):
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    def install(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: self.peak)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda d=None: self.allocated)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d=None: setattr(self, "peak", self.allocated))
        monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: None)


def test_the_process_peak_keeps_what_a_forwards_measurement_reset(monkeypatch):
    fake = _FakeCuda()
    fake.install(monkeypatch)
    dev = torch.device("cuda", 0)
    fp.reset_process_peak(dev)
    fake.alloc(10 << 30)  # a correctness phase holds 10 GiB, then frees it
    fake.alloc(-(10 << 30))

    def forward():
        fake.alloc(1 << 30)
        fake.alloc(-(1 << 30))

    assert peak_memory.forward_peak_bytes(forward, [], dev, fp.CARRIED_PEAKS) == 1 << 30
    assert torch.cuda.max_memory_allocated() == 1 << 30  # torch's own counter lost the 10 GiB
    assert fp.process_peak_bytes(dev) == 10 << 30
    fp.reset_process_peak(dev)
    assert fp.process_peak_bytes(dev) == 0


def test_the_candidate_workers_memory_measurement_leaves_the_guarded_module_as_it_was(monkeypatch):
    """The worker's MeasureMemory runs forward_peak_bytes under the harness guard, which reports a
    changed module-level container of a sandbox module as tampering: a module-level carry of the
    peak there gave every honest cuda candidate HACK probe:harness-identity (H100 suite, 2026-12-06)."""
    fake = _FakeCuda()
    fake.install(monkeypatch)
    guard = HarnessGuard([peak_memory])
    fake.alloc(1 << 20)
    assert peak_memory.forward_peak_bytes(lambda: fake.alloc(1 << 20), [], torch.device("cuda", 0)) == 1 << 20
    assert guard.check() == []
