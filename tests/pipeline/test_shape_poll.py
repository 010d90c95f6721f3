"""The secret shape's load read as soon as its reply has come (``SecretShapes._poll_load``, called
before each of the candidate's own sets): kbv's build lock is held while the load builds, not while
those sets are judged (another lane with the same file waits on it; red-team helper, 2026-12-06)."""

from __future__ import annotations

from types import SimpleNamespace

from kbv.pipeline.outcome import Outcome, Stop
from kbv.pipeline.secret_shapes import SecretShapes


class _Pending:
    def __init__(self, end=None):
        self.end, self.finished, self.closed = end, 0, 0

    def finish(self):
        self.finished += 1
        if self.end is not None:
            raise self.end

    def close(self):
        self.closed += 1


def _stage(ready: bool, alive: bool = True, end=None):
    stage = SecretShapes.__new__(SecretShapes)
    worker = SimpleNamespace(conn=SimpleNamespace(poll=lambda t: ready), proc=SimpleNamespace(is_alive=lambda: alive))
    pending = _Pending(end)
    stage._begun, stage._load_end = (worker, pending, None, {}), None
    return stage, pending


def test_a_reply_not_yet_come_is_left_for_later():
    stage, pending = _stage(ready=False)
    stage._poll_load()
    assert pending.finished == 0 and stage._load_end is None


def test_a_reply_that_has_come_is_read_and_the_lock_released():
    stage, pending = _stage(ready=True)
    stage._poll_load()
    stage._poll_load()  # once only
    assert pending.finished == 1 and pending.closed == 1 and stage._load_end == ("ok",)


def test_a_build_error_or_a_failure_is_kept_for_the_stage():
    stage, _ = _stage(ready=True, end=Stop(Outcome.BUILD_RAISED, "x.py: building ModelNew raised ValueError: no"))
    stage._poll_load()
    assert stage._load_end[0] == "build" and "ValueError" in stage._load_end[1]
    died = Stop(Outcome.WORKER_DIED, "x.py: died")
    stage, _ = _stage(ready=False, alive=False, end=died)
    stage._poll_load()
    assert stage._load_end == ("stop", died)
