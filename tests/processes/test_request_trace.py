"""kbv.processes.request_trace: the bench-only trace of round trips (docs/scale.md)."""

import json
import tempfile

import pytest

from kbv.processes import request_trace
from kbv.processes.candidate import CandidateProcess
from kbv.sandbox import protocol


def test_nothing_is_written_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(request_trace.TRACE_ENV, raising=False)
    request_trace.record("send", req="Ping")
    assert not request_trace.enabled() and list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_a_worker_round_trip_is_traced_and_the_worker_does_not_see_the_variable(monkeypatch, tmp_path):
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(request_trace.TRACE_ENV, str(trace))
    with CandidateProcess(device="cpu", build_dir=tempfile.mkdtemp(dir=tmp_path)) as w:
        assert isinstance(w.call(protocol.Ping(), phase="ping", timeout=120), protocol.Pong)
        try:
            environ = open(f"/proc/{w.proc.pid}/environ", "rb").read()
        except OSError:  # another uid's process, where /proc does not let us read it
            environ = b""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    send = next(e for e in events if e["ev"] == "send")
    reply = next(e for e in events if e["ev"] == "reply")
    assert send["req"] == "Ping" and send["phase"] == "ping" and reply["reply"] == "Pong"
    assert send["t"] <= reply["t_readable"] <= reply["t"]
    assert request_trace.TRACE_ENV.encode() not in environ


def _summariser():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "request_trace.py"
    spec = importlib.util.spec_from_file_location("bench_request_trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job(t0: float) -> list[dict]:
    """One verification: a load (one request, 0.2 s in the worker), correctness (two requests of
    0.1 s, decode 0.01 s each), 0.05 s of the trusted side's own between them."""
    return [
        {"ev": "lane", "what": "job", "t": t0 - 0.3},
        {"ev": "lane", "what": "worker taken", "t": t0 - 0.1},
        {"ev": "verify", "what": "start", "t": t0},
        {"ev": "send", "pid": 7, "req": "Load", "phase": "load", "t": t0},
        {"ev": "reply", "pid": 7, "reply": "Loaded", "t_readable": t0 + 0.2, "t": t0 + 0.2},
        {"ev": "stage", "name": "load", "seconds": 0.2, "t": t0 + 0.2},
        {"ev": "send", "pid": 7, "req": "Forward", "phase": "forward", "t": t0 + 0.2},
        {"ev": "reply", "pid": 7, "reply": "Outputs", "t_readable": t0 + 0.3, "t": t0 + 0.31},
        {"ev": "send", "pid": 7, "req": "Forward", "phase": "forward", "t": t0 + 0.36},
        {"ev": "reply", "pid": 7, "reply": "Outputs", "t_readable": t0 + 0.46, "t": t0 + 0.47},
        {"ev": "stage", "name": "correctness", "seconds": 0.27, "t": t0 + 0.47},
        {"ev": "verify", "what": "end", "status": "PASS", "t": t0 + 0.5},
        {"ev": "lane", "what": "reply", "t": t0 + 0.6},
    ]


def test_the_summary_splits_each_job_into_worker_decode_and_the_rest():
    out = _summariser().summarise(_job(10.0) + _job(12.0) + _job(14.0), skip=1)
    assert out["jobs"] == 2 and out["statuses"] == ["PASS", "PASS"]
    m = out["median"]
    assert (m["wall_s"], m["worker_s"], m["decode_s"], m["requests"]) == (0.5, 0.4, 0.02, 3)
    assert abs(m["trusted_rest_s"] - 0.08) < 1e-9
    assert out["between_jobs_s"] == 1.5
    assert out["stages"]["correctness"]["requests"] == 2 and out["stages"]["load"]["worker_s"] == 0.2
    assert out["request_types"]["Forward"] == {"requests": 2, "worker_s": 0.2, "decode_s": 0.02}
    assert out["lane_marks_s"]["worker taken"] == 0.2
    # each worker's first Forward, per job: where a JIT compiles on the job's critical path
    assert [j["first_forward_s"] for j in out["per_job"]] == [[0.1], [0.1]]
