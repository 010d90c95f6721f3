"""The next job's early workers (kbv.pipeline.prestart) with real workers on cpu."""

from __future__ import annotations

import os
import signal

import pytest

from kbv.model.records import CandidateRef
from kbv.pipeline.prestart import Prestarted
from kbv.sandbox import protocol

pytestmark = pytest.mark.e2e  # starts candidate workers


def test_early_workers_stopped_while_idle_are_continued_and_answer_when_taken(tmp_path):
    """Regression (red team): a candidate of the job before could SIGSTOP the next job's idle early
    workers (a cuda worker keeps kbv's uid); the next honest job's load then timed out. Taking a
    worker continues its tree and makes it answer a Ping first."""
    cand = CandidateRef(str(tmp_path / "c.py"), "c" * 64, "torch")
    early = Prestarted()
    early.start(cand, "cpu", shape=True)
    try:
        stopped = early.pids()
        assert len(stopped) == 2
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        main, shape = early.take(cand, "cpu", timeout=120), early.take_shape(timeout=120)
        assert main is not None and shape is not None
        for w in (main, shape):
            assert isinstance(w.call(protocol.Ping(), phase="ping", timeout=10), protocol.Pong)
            w.close()
    finally:
        early.close()


def test_an_early_worker_for_another_candidate_is_closed_with_its_shape_worker(tmp_path):
    one = CandidateRef(str(tmp_path / "a.py"), "a" * 64, "torch")
    other = CandidateRef(str(tmp_path / "b.py"), "b" * 64, "torch")
    early = Prestarted()
    early.start(one, "cpu", shape=True)
    pids = early.pids()
    assert early.take(other, "cpu") is None and early.take_shape() is None
    assert early.pids() == []
    for pid in pids:  # gone (reaped by their handles' close)
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] in "ZX"
