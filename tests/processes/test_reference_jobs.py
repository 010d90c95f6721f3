"""The typed wire to the reference worker (kbv.processes.reference_jobs): every job survives the
trip as the same record, and a message that is not one of the worker's is refused in one line."""

from __future__ import annotations

import json

import pytest

from kbv.model.records import CandidateRef, EvalConfig, ProblemRef
from kbv.processes.reference_jobs import (AskNext, BaselinesJob, BuildJob, BuildPair, EnvironmentJob, JobError,
                                          NextCandidate, VerifyJob, VetJob, decode_job, encode_job)

P = ProblemRef("/p/level1/1_ReLU.py", "ReLU", 1, 1, "a" * 64)
C = CandidateRef("/c/relu.py", "b" * 64, "cuda", run="r", sample_id=3)
CFG = EvalConfig(device="cpu", trials=7, hidden=("D1", "D4"), interval_half_width=0.05)


@pytest.mark.parametrize("job", [
    VerifyJob(P, C, CFG, "/p/1_hidden.py", ask_next=True, quiet_dir="/tmp/q"),
    VerifyJob(P, C, CFG),
    VetJob(P, CFG, 3),
    BuildJob((BuildPair(P, C), BuildPair(P, C, "/h.py")), CFG, verify_failures=True),
    BaselinesJob(P, CFG, ("eager-fp32", "compile")),
    EnvironmentJob(),
    AskNext(),
    NextCandidate(C),
    NextCandidate(None),
], ids=lambda j: type(j).__name__)
def test_every_message_round_trips_as_the_same_record(job):
    assert decode_job(encode_job(job)) == job


@pytest.mark.parametrize("raw, fault", [
    (b"not json", "not JSON"),
    (json.dumps({"kind": "explode"}).encode(), "unknown reference worker message kind"),
    (json.dumps(["verify"]).encode(), "unknown reference worker message kind"),
    (json.dumps({"kind": "vet", "problem": {}, "config": {}}).encode(), "missing field 'vet_seeds'"),
    (json.dumps({"kind": "environment", "extra": 1}).encode(), "unknown field 'extra'"),
])
def test_a_message_that_is_not_a_job_is_refused_in_one_line(raw, fault):
    with pytest.raises(JobError, match=fault) as exc:
        decode_job(raw)
    assert "\n" not in str(exc.value)


def test_a_job_with_a_broken_record_is_refused():
    good = json.loads(encode_job(VetJob(P, CFG, 2)))
    good["problem"]["surprise"] = 1
    with pytest.raises(JobError, match="unknown field 'surprise'"):
        decode_job(json.dumps(good).encode())
    with pytest.raises(JobError):
        encode_job({"kind": "verify"})  # a dict is no job
