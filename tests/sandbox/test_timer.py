"""kbv.sandbox.timer: the timed loops run without Python's cyclic collector (``gc_paused``)."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest
import torch

from kbv.sandbox import timer


@pytest.fixture
def gc_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_time_calls_and_one_call_run_their_calls_with_the_collector_off(gc_on):
    seen = []
    timer.time_calls(lambda: seen.append(gc.isenabled()), [[]], device="cpu", warmup=1, trials=3)
    timer.time_calls(lambda: seen.append(gc.isenabled()), [[]], device="cpu", warmup=0, trials=2, sync_inside=True)
    timer.one_call(lambda: seen.append(gc.isenabled()), [], device="cpu")
    assert seen == [False] * 7
    assert gc.isenabled()  # restored after each loop


def test_gc_paused_restores_the_state_it_found_even_on_error(gc_on):
    with pytest.raises(RuntimeError):
        with timer.gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("the candidate raised")
    assert gc.isenabled()
    gc.disable()
    with timer.gc_paused():
        pass
    assert not gc.isenabled()  # a collector that was off stays off


def test_collect_frees_cycles_made_while_paused(gc_on):
    class Node:
        pass

    with timer.gc_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        assert alive() is not None
    timer.collect()
    assert alive() is None


def test_a_calls_own_cyclic_garbage_is_collected_inside_its_clock(gc_on):
    """Red-team helper 2026-12-04: a finalizer of cyclic garbage that prefaulted the next outputs ran
    at an untimed collection (PASS 4.4x on a 64 MiB ReLU, 0.96x true); a call that leaves
    GC_YOUNG_THRESHOLD objects or more has them collected before its clock stops."""
    ran = []

    class Sentinel:
        def __del__(self):
            ran.append(gc.isenabled())

    def call():
        s = Sentinel()
        s.me = s  # a cycle: only the collector frees it
        junk = [[] for _ in range(2 * timer.GC_YOUNG_THRESHOLD)]
        for a in junk:
            a.append(a)
        del s, junk

    gc.collect()
    timer.time_calls(call, [[]], device="cpu", warmup=0, trials=1)
    assert ran == [False]  # inside the paused region, before the loop returned
    ran.clear()
    timer.one_call(call, [], device="cpu")
    assert ran == [False]


def _fresh_pages(n: int):
    """A float32 tensor over ``n`` anonymous pages never touched, and a count of its resident pages
    (``mincore(2)``: a page read once is mapped)."""
    import ctypes
    import mmap

    import numpy as np

    libc = ctypes.CDLL(None, use_errno=True)
    m = mmap.mmap(-1, n * 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    t = torch.from_numpy(np.frombuffer(m, dtype=np.float32).reshape(n * 4, 256))
    addr, vec = ctypes.addressof(ctypes.c_char.from_buffer(m)), (ctypes.c_ubyte * n)()

    def resident() -> int:
        assert libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(n * 4096), vec) == 0
        return sum(v & 1 for v in vec)

    return t, resident, m


@pytest.mark.skipif(sys.platform != "linux", reason="mincore(2) is Linux's")
@pytest.mark.parametrize("view", ["contiguous", "transposed", "strided"])
def test_touch_pages_reads_every_page_of_an_output_contiguous_or_not(view):
    """A red-team helper's lazy output returned as ``.t()`` was skipped by the in-clock page read
    (only contiguous tensors were read) and did its work after the clock (2026-12-06)."""
    from kbv.sandbox.timer import touch_pages

    t, resident, keep = _fresh_pages(32)
    assert resident() == 0
    touch_pages({"contiguous": t, "transposed": t.t(), "strided": t[:, ::2]}[view])
    assert resident() == 32
    del t, keep
