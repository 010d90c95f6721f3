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
