"""kbv.processes.handles: the deadline around a step that has no pipe to poll."""

from __future__ import annotations

import threading

from kbv.processes.handles import deadline


def test_deadline_expires_a_blocked_step_from_another_thread():
    """The step blocks until ``expire`` frees it (as killing the worker ends a fetch from its fd
    sharer); the event says the deadline passed. It works off the main thread too."""
    release = threading.Event()
    seen = {}

    def step() -> None:
        with deadline(0.05, release.set) as expired:
            assert release.wait(10)
            seen["expired"] = expired.is_set()

    t = threading.Thread(target=step)
    t.start()
    t.join(10)
    assert seen == {"expired": True}


def test_deadline_not_reached_calls_nothing():
    called = []
    with deadline(5, lambda: called.append(1)) as expired:
        pass
    assert not expired.is_set()
    threading.Event().wait(0.01)
    assert called == []


def test_deadlines_share_one_thread_and_each_fires_alone():
    """Many deadlines, nested and in turn, start no thread each; only the one that expires fires."""
    fired = []
    with deadline(5, lambda: fired.append("outer")):
        for k in range(50):
            with deadline(5, lambda k=k: fired.append(k)):
                pass
        before = threading.active_count()
        gate = threading.Event()
        with deadline(0.05, lambda: (fired.append("inner"), gate.set())) as expired:
            assert gate.wait(10) and expired.is_set()
        assert threading.active_count() == before
    assert fired == ["inner"]
