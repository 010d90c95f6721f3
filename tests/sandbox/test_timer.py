"""kbv.sandbox.timer: the timed loops run without Python's cyclic collector (``gc_paused``)."""

from __future__ import annotations

import gc
import weakref

import pytest

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
