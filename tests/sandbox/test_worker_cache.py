"""kbv.sandbox.peak_memory.release_cache, the candidate worker's release of its allocator's cache after
a correctness forward on cuda: from 1 GiB of inputs and outputs only, poisoned first on a probed call
(what the call left in its blocks must not come back unpoisoned from the driver), never touching a
tensor in use, and kept where the poison cannot allocate."""

from __future__ import annotations

import types

import pytest
import torch

from kbv.sandbox import peak_memory
from kbv.sandbox import worker as worker_mod

BIG = [torch.empty(peak_memory.RELEASE_CACHE_MIN_BYTES // 4, dtype=torch.float32, device="meta"), 3]
CUDA = torch.device("cuda", 0)


def _release(tensors, calls, poison=True, empty=True, oom=lambda exc: False):
    peak_memory.release_cache(CUDA, tensors, (lambda: calls.append("empty_cache")) if empty else None,
                              (lambda device: calls.append("poison")) if poison else None, oom)


def test_large_tensors_release_the_cache_poisoned_first_on_a_probed_call():
    calls: list = []
    _release(BIG, calls)
    assert calls == ["poison", "empty_cache"]
    calls.clear()
    _release(BIG, calls, poison=False)
    assert calls == ["empty_cache"]  # a plain forward: no poisoning there today either
    calls.clear()
    small = [torch.empty(peak_memory.RELEASE_CACHE_MIN_BYTES // 4 - 1, dtype=torch.float32, device="meta")]
    _release(small, calls)
    _release(BIG, calls, empty=False)  # no C binding (a cpu build): nothing
    assert calls == []


def test_a_poison_that_cannot_allocate_keeps_the_cache_and_other_errors_propagate():
    calls: list = []

    def full(device):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    peak_memory.release_cache(CUDA, BIG, lambda: calls.append("empty_cache"), full, peak_memory.is_out_of_memory)
    assert calls == []  # the cache kept: the next call's own poisoning covers it

    def broken(device):
        raise ValueError("not a memory failure")

    with pytest.raises(ValueError):
        peak_memory.release_cache(CUDA, BIG, lambda: calls.append("empty_cache"), broken, peak_memory.is_out_of_memory)


def test_the_worker_releases_on_cuda_only_with_its_captured_binding():
    calls: list = []
    integrity = types.SimpleNamespace(poison_free_memory=lambda device: calls.append("poison"))
    server = types.SimpleNamespace(device=CUDA, _memory=peak_memory, _empty_cache=lambda: calls.append("empty_cache"),
                                   integrity=integrity, _out_of_memory=peak_memory.is_out_of_memory)
    worker_mod._Server._release_cache(server, BIG, poison=True)
    assert calls == ["poison", "empty_cache"]
    calls.clear()
    server.device = torch.device("cpu")
    worker_mod._Server._release_cache(server, BIG, poison=True)
    assert calls == []
