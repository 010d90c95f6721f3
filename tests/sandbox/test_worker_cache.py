"""kbv.sandbox.worker's release of the allocator's cache after a correctness forward on cuda: from
1 GiB of inputs only, poisoned first on a probed call (what the call left in its blocks must not
come back unpoisoned from the driver), never touching a tensor in use."""

from __future__ import annotations

import types

import torch

from kbv.sandbox import worker as worker_mod


def _server(device: str, calls: list):
    integrity = types.SimpleNamespace(poison_free_memory=lambda device: calls.append(("poison", device.type)))
    return types.SimpleNamespace(torch=torch, device=torch.device(device), integrity=integrity,
                                 _empty_cache=lambda: calls.append(("empty_cache",)), _out_of_memory=lambda exc: False)


def test_large_inputs_on_cuda_release_the_cache_poisoned_first_on_a_probed_call():
    calls: list = []
    s = _server("cuda", calls)
    big = [torch.empty(worker_mod.RELEASE_CACHE_MIN_BYTES // 4, dtype=torch.float32, device="meta"), 3]
    worker_mod._Server._release_cache(s, big, poison=True)
    assert calls == [("poison", "cuda"), ("empty_cache",)]
    calls.clear()
    worker_mod._Server._release_cache(s, big)
    assert calls == [("empty_cache",)]  # a plain forward: no poisoning there today either


def test_a_poison_that_cannot_allocate_keeps_the_cache_and_other_errors_propagate():
    import pytest

    calls: list = []
    s = _server("cuda", calls)
    s._out_of_memory = lambda exc: isinstance(exc, torch.cuda.OutOfMemoryError)

    def full(device):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    s.integrity = types.SimpleNamespace(poison_free_memory=full)
    big = [torch.empty(worker_mod.RELEASE_CACHE_MIN_BYTES, dtype=torch.uint8, device="meta")]
    worker_mod._Server._release_cache(s, big, poison=True)
    assert calls == []  # the cache kept: the next call's own poisoning covers it

    def broken(device):
        raise ValueError("not a memory failure")

    s.integrity = types.SimpleNamespace(poison_free_memory=broken)
    with pytest.raises(ValueError):
        worker_mod._Server._release_cache(s, big, poison=True)


def test_small_inputs_or_cpu_keep_the_cache():
    calls: list = []
    small = [torch.empty(worker_mod.RELEASE_CACHE_MIN_BYTES // 4 - 1, dtype=torch.float32, device="meta")]
    worker_mod._Server._release_cache(_server("cuda", calls), small, poison=True)
    big = [torch.empty(worker_mod.RELEASE_CACHE_MIN_BYTES, dtype=torch.uint8, device="meta")]
    worker_mod._Server._release_cache(_server("cpu", calls), big, poison=True)
    assert calls == []
