"""The orchestrator ↔ reference worker channel: replies are decoded strictly into
:class:`kbv.processes.reference.ReferenceReply`, errors carry a kind and a message."""

from __future__ import annotations

import json

import pytest

from kbv.batch.evaluator import Evaluator
from kbv.intake.problems import ProblemError
from kbv.model.records import CandidateRef, EvalConfig, ProblemRef, Status
from kbv.processes import reference as ref
from kbv.processes.reference import ProblemFailure, ReferenceReply, WorkerError


def wire(reply: ReferenceReply) -> ReferenceReply:
    return ReferenceReply.from_json(json.loads(json.dumps(reply.to_json())))


def test_replies_roundtrip_typed():
    for reply in (ReferenceReply(verdict={"status": "PASS"}),
                  ReferenceReply(problem_error=ProblemFailure("p/1_X.py", "get_inputs raised: a: b")),
                  ReferenceReply(error=WorkerError(ref.RAISED, "KeyError: 'x'", "Traceback ...")),
                  ReferenceReply(built={"c.py": "ok"}, verdict={"status": "COMPILE_ERROR"}),
                  ReferenceReply(verdict={"status": "PASS"}, restart=True)):
        assert wire(reply) == reply
    assert WorkerError(ref.RAISED, "KeyError: 'x'", "tb").describe() == "KeyError: 'x'\ntb"
    assert WorkerError(ref.TIMEOUT, "no answer").describe() == "no answer"


@pytest.mark.parametrize("data", [
    ["verdict"],  # not an object
    {"verdict": {}, "status": "PASS"},  # an unknown field
    {"problem_error": "p.py: broken"},  # the old string form
    {"problem_error": {"path": "p.py"}},  # a field missing
    {"problem_error": {"path": "p.py", "fault": 3}},  # not a string
    {"error": "KeyError: 'x'\ntraceback"},  # the old string form
    {"error": {"kind": "exploded", "message": "x"}},  # an unknown kind
    {"error": {"kind": "raised", "message": "x", "extra": "y"}},  # a field too many
    {"verdict": "PASS"},  # an answer that is not an object
    {"built": ["c.py"]},
    {"verdict": {}, "restart": "yes"},  # not a boolean
])
def test_a_malformed_reply_is_an_error_of_its_own_kind(data):
    reply = ReferenceReply.from_json(data)
    assert reply.error is not None and reply.error.kind == ref.MALFORMED
    assert reply.verdict is None and reply.problem_error is None
    assert "malformed" in reply.error.message


class _Stub:
    """A reference worker handle that answers one fixed reply and runs nothing."""

    def __init__(self, reply: ReferenceReply):
        self.reply, self.closed = reply, False

        class _Proc:
            @staticmethod
            def is_alive() -> bool:
                return True

        self.proc = _Proc()

    def evaluate(self, job, timeout, answer=None):
        return self.reply

    def close(self):
        self.closed = True


def _evaluator(reply: ReferenceReply) -> tuple[Evaluator, _Stub]:
    ev = Evaluator("cpu")
    ev._ref = stub = _Stub(reply)  # type: ignore[assignment]
    return ev, stub


PROBLEM = ProblemRef(path="level1/1_X.py", sha256="0" * 64, level=1, problem_id=1, name="X")
CANDIDATE = CandidateRef(path="c/k.py", sha256="1" * 64, backend="triton")


def test_a_problem_failure_keeps_its_fault_whole():
    """The fault is the worker's, as it was: no splitting of ``path: fault`` on the first ': '."""
    ev, _ = _evaluator(ReferenceReply(problem_error=ProblemFailure("/elsewhere/1_X.py", "forward raised: a: b")))
    with pytest.raises(ProblemError) as exc:
        ev.evaluate(PROBLEM, CANDIDATE, EvalConfig(device="cpu"))
    assert exc.value.fault == "forward raised: a: b" and exc.value.path == PROBLEM.path


def test_a_worker_error_is_kbvs_failure():
    ev, stub = _evaluator(ReferenceReply(error=WorkerError(ref.RAISED, "KeyError: 'x'", "Traceback (most recent)")))
    v = ev.evaluate(PROBLEM, CANDIDATE, EvalConfig(device="cpu"))
    assert v.status is Status.EVAL_ERROR and v.message == "k.py: kbv failed: KeyError: 'x'"
    assert v.evidence["error"] == "KeyError: 'x'\nTraceback (most recent)" and stub.closed
    ev, _ = _evaluator(ReferenceReply.from_json({"verdict": 7}))
    assert ev.evaluate(PROBLEM, CANDIDATE, EvalConfig(device="cpu")).status is Status.EVAL_ERROR


def _busy_main(conn, device):
    """A reference worker stand-in in the middle of a long job: it never reads the exit request."""
    import time
    time.sleep(120)


@pytest.mark.e2e
def test_abort_kills_a_busy_reference_worker_at_once():
    """Ctrl-C in ``kbv run`` took ~13 s: ``close`` asked the worker, busy with the job in flight, to
    exit and waited 10 s before killing it. ``close(abort=True)`` kills it now."""
    import time
    proc = ref.ReferenceProcess("cpu", _busy_main)
    time.sleep(0.5)
    t0 = time.monotonic()
    proc.close(abort=True)
    assert time.monotonic() - t0 < 5 and not proc.proc.is_alive()


def test_a_job_that_never_reached_its_worker_is_sent_again_to_a_fresh_one(monkeypatch):
    """A reference worker that died between jobs (the send broke its pipe): nothing of the job ran,
    so the evaluator sends it once more to a fresh worker instead of failing it."""
    from kbv.batch.evaluator import Evaluator
    from kbv.intake.problems import ProblemError
    from kbv.model.records import CandidateRef, EvalConfig, ProblemRef
    from kbv.processes.reference import NOT_RUNNING, ProblemFailure, ReferenceReply, WorkerError

    replies = [ReferenceReply(error=WorkerError(NOT_RUNNING, "reference worker died before the job reached it")),
               ReferenceReply(problem_error=ProblemFailure("/p.py", "second worker answered"))]
    sent = []

    class Fake:
        def evaluate(self, job, timeout, answer=None):
            sent.append(job)
            return replies[len(sent) - 1]

        def close(self, abort=False):
            pass

    ev = Evaluator("cpu")
    monkeypatch.setattr(ev, "_worker", lambda: Fake())
    p = ProblemRef("/p.py", "p", 1, 1, "a" * 64)
    c = CandidateRef("/c.py", "b" * 64, "torch")
    with pytest.raises(ProblemError, match="second worker answered"):
        ev.evaluate(p, c, EvalConfig(device="cpu"))
    assert len(sent) == 2 and sent[0] == sent[1]


def test_a_worker_asking_to_be_replaced_is_replaced_after_its_verdict():
    """A reference worker that holds device memory it cannot free after a job (CUDA IPC blocks of a
    killed candidate worker) says so; its verdict stands and the next job gets a fresh worker."""
    from verdict_factory import make_verdict

    from kbv.model.records import to_dict

    v = to_dict(make_verdict("PASS", speedup=1.2))
    ev, stub = _evaluator(ReferenceReply(verdict=v, restart=True))
    assert ev.evaluate(PROBLEM, CANDIDATE, EvalConfig(device="cpu")).status is Status.PASS
    assert stub.closed and ev._ref is None
    ev, stub = _evaluator(ReferenceReply(verdict=v))
    ev.evaluate(PROBLEM, CANDIDATE, EvalConfig(device="cpu"))
    assert not stub.closed and ev._ref is stub
