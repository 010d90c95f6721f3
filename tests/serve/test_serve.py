"""``kbv serve`` (:mod:`kbv.serve`): the HTTP API, the SQLite queue, tokens and limits, the client.

The fast tier uses FastAPI's in-process TestClient on a service without lanes (jobs are accepted
and wait; no worker starts). The ``e2e`` tests start a real ``kbv serve`` subprocess (uvicorn on
127.0.0.1, an ephemeral port) with one CPU lane, including one killed with ``kill -9`` and
restarted on its store.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import kbv
from kbv.serve.app import create_app
from kbv.serve.client import AsyncClient, Client, Result, ServeError, _events, job
from kbv.serve.queue import JobQueue, QueueFull
from kbv.serve.security import (Limits, TokenError, authenticate, client_id, is_loopback, tokens_from_env,
                                tokens_from_file)
from kbv.serve.service import Registry, Service

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "src" / "kbv" / "data" / "problems_cpu"
CANDIDATES = Path(__file__).resolve().parents[1] / "data" / "candidates"
RELU = (CANDIDATES / "relu_torch.py").read_text()
RELU_PROBLEM = (PROBLEMS / "level1" / "1_ReLU.py").read_text()
#: few input sets and timed calls: these tests look at the service, not at the verdict's numbers.
SMALL = {"nominal_seeds": 1, "hidden": ["D1", "D4"], "distributions": [], "trials": 3, "timing_rounds": 1,
         "warmup": 0}
TOKEN_A = "a" * 12 + "-token-one"
TOKEN_B = "b" * 12 + "-token-two"


# The HTTP API in process (no lanes) ---------------------------------------------------------------

def _service(tmp_path: Path, *, capacity: int = 20, per_client: int | None = None,
             allow_uploads: bool = True) -> Service:
    registry = Registry()
    registry.add_folder(PROBLEMS)
    queue = JobQueue(tmp_path / "serve.sqlite", capacity=capacity, per_client=per_client)
    return Service(queue, registry, [], "cpu", allow_uploads=allow_uploads)


@pytest.fixture
def api(tmp_path):
    service = _service(tmp_path, capacity=6, per_client=4)
    app = create_app(service, frozenset({TOKEN_A, TOKEN_B}), Limits(max_body_bytes=64 << 10, max_source_bytes=16 << 10))
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN_A}"}) as http:
        http.service = service
        yield http


def test_health_needs_no_token_and_counts_the_queue(api):
    r = api.get("/v1/health", headers={"Authorization": ""})
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "device": "cpu", "lanes": 0, "queued": 0, "running": 0, "problems": 4}


def test_problems_are_registered_as_level_and_stem(api):
    names = {p["name"] for p in api.get("/v1/problems").json()["problems"]}
    assert {"level1/1_ReLU", "level1/4_Square_matmul", "level2/1_Gemm_Bias_ReLU_Scale"} <= names


def test_submit_is_idempotent_and_addressed_by_name_or_hash(api):
    body = job("level1/1_ReLU", RELU, SMALL)
    first = api.post("/v1/verifications", json=body)
    assert first.status_code == 202 and first.json()["created"] is True
    again = api.post("/v1/verifications", json=body, headers={"Authorization": f"Bearer {TOKEN_B}"})
    assert again.json() == {"id": first.json()["id"], "created": False}  # whoever sends it
    sha = api.service.registry.resolve("level1/1_ReLU").sha256
    by_hash = api.post("/v1/verifications", json=job(f"sha256:{sha}", RELU, SMALL))
    assert by_hash.json()["id"] == first.json()["id"]
    other = api.post("/v1/verifications", json=job("level1/1_ReLU", RELU, {**SMALL, "trials": 4}))
    assert other.json()["created"] is True and other.json()["id"] != first.json()["id"]
    got = api.get(f"/v1/verifications/{first.json()['id']}").json()
    assert got == {"id": first.json()["id"], "state": "queued", "verdict": None, "reward": None, "error": None}
    assert api.service.queue.counts()["queued"] == 2


def test_wait_blocks_until_its_deadline(api):
    jid = api.post("/v1/verifications", json=job("level1/1_ReLU", RELU)).json()["id"]
    t0 = time.monotonic()
    assert api.get(f"/v1/verifications/{jid}", params={"wait": 0.3}).json()["state"] == "queued"
    assert time.monotonic() - t0 >= 0.3


def test_uploaded_problem_is_addressed_by_hash_and_survives_a_restart(api, tmp_path):
    r = api.post("/v1/problems", json={"source": RELU_PROBLEM, "name": "relu_up"})
    assert r.status_code == 201 and r.json()["problem"].startswith("sha256:")
    assert api.post("/v1/verifications", json=job(r.json()["problem"], RELU)).status_code == 202
    reopened = Service(JobQueue(tmp_path / "serve.sqlite"), Registry(), [], "cpu", allow_uploads=True)
    assert reopened.registry.resolve(r.json()["problem"]) is not None
    # a server restarted without --allow-uploads does not register them again
    closed = Service(JobQueue(tmp_path / "serve.sqlite"), Registry(), [], "cpu")
    assert closed.registry.resolve(r.json()["problem"]) is None


def test_uploads_are_refused_unless_the_server_allows_them(tmp_path):
    """An uploaded problem's code runs in the trusted reference worker: off by default, 403."""
    service = _service(tmp_path, allow_uploads=False)
    with TestClient(create_app(service)) as http:
        r = http.post("/v1/problems", json={"source": RELU_PROBLEM, "name": "relu_up"})
        assert r.status_code == 403 and "--allow-uploads" in r.json()["error"]
    assert service.queue.problems() == []


def test_queue_full_is_429_with_retry_after_and_stores_nothing(api):
    for trials in range(1, 5):  # the client's share is 4
        assert api.post("/v1/verifications", json=job("level1/1_ReLU", RELU, {"trials": trials})).status_code == 202
    r = api.post("/v1/verifications", json=job("level1/1_ReLU", RELU, {"trials": 9}))
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "share" in r.json()["error"]
    b = {"Authorization": f"Bearer {TOKEN_B}"}  # another token still has room, up to the capacity of 6
    assert api.post("/v1/verifications", json=job("level1/1_ReLU", RELU, {"trials": 10}), headers=b).status_code == 202
    batch = {"items": [job("level1/1_ReLU", RELU, {"trials": t}) for t in (11, 12)]}
    r = api.post("/v1/verifications/batch", json=batch, headers=b)
    assert r.status_code == 429 and "queue is full" in r.json()["error"]
    assert api.service.queue.counts()["queued"] == 5  # neither item of the refused batch was stored


def test_batch_submit_is_all_or_nothing(api):
    items = [job("level1/1_ReLU", RELU, {"trials": 3}), job("level1/1_ReLU", RELU, {"trials": "many"})]
    r = api.post("/v1/verifications/batch", json={"items": items})
    assert r.status_code == 422 and r.json()["error"].startswith("items[1]: config field 'trials'")
    assert api.service.queue.counts()["queued"] == 0
    ok = api.post("/v1/verifications/batch", json={"items": items[:1] * 2})
    assert ok.status_code == 202 and ok.json()["ids"][0] == ok.json()["ids"][1] and ok.json()["created"] == [True, False]


BIG = "x" * (70 << 10)
MALFORMED = [
    # (name, method, path, body (bytes, or a JSON value), extra headers, status, words in the message)
    ("bad JSON", "POST", "/v1/verifications", b"{not json", {}, 400, "not JSON"),
    ("empty body", "POST", "/v1/verifications", b"", {}, 400, "empty"),
    ("non-UTF-8 body", "POST", "/v1/verifications", b'{"problem": "\xff\xfe"}', {}, 400, "not UTF-8"),
    ("body not an object", "POST", "/v1/verifications", [1, 2], {}, 422, "must be a JSON object"),
    ("missing candidate", "POST", "/v1/verifications", {"problem": "level1/1_ReLU"}, {}, 422, "missing field 'candidate'"),
    ("missing problem", "POST", "/v1/verifications", {"candidate": RELU}, {}, 422, "missing field 'problem'"),
    ("candidate of the wrong type", "POST", "/v1/verifications", {"problem": "level1/1_ReLU", "candidate": 3}, {},
     422, "must be a string"),
    ("unknown field", "POST", "/v1/verifications", {**job("level1/1_ReLU", RELU), "priority": 1}, {}, 422,
     "unknown field(s) 'priority'"),
    ("unknown problem", "POST", "/v1/verifications", job("level9/99_Nope", RELU), {}, 404, "GET /v1/problems lists them"),
    ("config not an object", "POST", "/v1/verifications", {**job("level1/1_ReLU", RELU), "config": [1]}, {}, 422,
     "must be a JSON object"),
    ("config field the server fixes", "POST", "/v1/verifications", job("level1/1_ReLU", RELU, {"integrity": False}),
     {}, 422, "unknown or locked config field"),
    ("config out of range", "POST", "/v1/verifications", job("level1/1_ReLU", RELU, {"nominal_seeds": 10 ** 6}), {},
     422, "outside this server's range"),
    ("config timeout raised", "POST", "/v1/verifications", job("level1/1_ReLU", RELU, {"call_timeout_s": 1e9}), {},
     422, "outside this server's range"),
    ("config bool for an int", "POST", "/v1/verifications", job("level1/1_ReLU", RELU, {"trials": True}), {}, 422,
     "must be an integer"),
    ("config unknown distribution", "POST", "/v1/verifications", job("level1/1_ReLU", RELU, {"hidden": ["D9"]}), {},
     422, "unknown name(s) 'D9'"),
    ("bad backend", "POST", "/v1/verifications", {**job("level1/1_ReLU", RELU), "backend": "fortran"}, {}, 422,
     "'backend' must be one of"),
    ("oversized body", "POST", "/v1/verifications", BIG.encode(), {}, 413, "over the server's"),
    ("oversized source", "POST", "/v1/verifications", job("level1/1_ReLU", "#" * (20 << 10)), {}, 413,
     "over the server's 16384-byte limit"),
    ("NUL in the source", "POST", "/v1/verifications", job("level1/1_ReLU", "a\x00b"), {}, 422, "NUL"),
    ("no token", "POST", "/v1/verifications", job("level1/1_ReLU", RELU), {"Authorization": ""}, 401, "missing"),
    ("bad token", "POST", "/v1/verifications", job("level1/1_ReLU", RELU), {"Authorization": "Bearer " + "z" * 20},
     401, "unknown token"),
    ("not a Bearer header", "POST", "/v1/verifications", job("level1/1_ReLU", RELU),
     {"Authorization": f"Basic {TOKEN_A}"}, 401, "Bearer"),
    ("unknown job", "GET", "/v1/verifications/0123abcd", None, {}, 404, "no verification with id"),
    ("wait not a number", "GET", "/v1/verifications/0123abcd?wait=soon", None, {}, 422, "'wait' must be a number"),
    ("wait too long", "GET", "/v1/verifications/0123abcd?wait=3600", None, {}, 422, "'wait' must be in"),
    ("stream since not a number", "GET", "/v1/stream?since=-1", None, {}, 422, "'since'"),
    ("upload without source", "POST", "/v1/problems", {"name": "p"}, {}, 422, "missing field 'source'"),
    ("upload not a problem", "POST", "/v1/problems", {"source": "x = 1\n"}, {}, 422, "not a KernelBench problem"),
    ("upload with a bad name", "POST", "/v1/problems", {"source": RELU_PROBLEM, "name": "../x"}, {}, 422,
     "plain file stem"),
    ("empty batch", "POST", "/v1/verifications/batch", {"items": []}, {}, 422, "non-empty array"),
    ("unknown route", "GET", "/v1/nothing", None, {}, 404, "no such route"),
    ("wrong method", "DELETE", "/v1/health", None, {}, 405, "Method Not Allowed"),
]


@pytest.mark.parametrize("case", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_every_bad_request_is_a_4xx_with_one_line_and_stores_nothing(api, case):
    _, method, path, body, headers, status, words = case
    kw = {"content": body} if isinstance(body, bytes) else ({"json": body} if body is not None else {})
    r = api.request(method, path, headers=headers, **kw)
    assert r.status_code == status, r.text
    message = r.json()["error"]
    assert words in message and "\n" not in message and len(message) < 400, message
    assert api.service.queue.counts() == {"queued": 0, "running": 0, "done": 0, "error": 0}
    assert api.service.queue.problems() == []


def test_metrics_name_the_queue_lanes_verdicts_and_latency(api):
    api.post("/v1/verifications", json=job("level1/1_ReLU", RELU))
    text = api.get("/metrics").text
    assert "kbv_serve_queue_depth 1" in text
    assert 'kbv_serve_latency_seconds_bucket{le="+Inf"} 0' in text
    assert "# TYPE kbv_serve_verdicts_total counter" in text and "kbv_serve_lane_busy_fraction" in text
    assert api.get("/metrics", headers={"Authorization": ""}).status_code == 401


# The queue ----------------------------------------------------------------------------------------

def test_claims_are_fair_across_clients(tmp_path):
    q = JobQueue(tmp_path / "q.sqlite")
    for i in range(3):
        q.submit("a", "p", f"cand {i}\n", {}, None)
    q.submit("b", "p", "cand b\n", {}, None)
    order = [q.claim().client for _ in range(4)]
    assert order == ["a", "b", "a", "a"]  # b's single job goes second, not after a's three
    assert q.claim() is None


def test_a_killed_servers_running_job_is_requeued_and_finishes_exactly_once(tmp_path):
    q = JobQueue(tmp_path / "q.sqlite")
    jid, _ = q.submit("a", "p", "cand\n", {}, None)
    assert q.claim().id == jid
    q2 = JobQueue(tmp_path / "q.sqlite")  # the restart (the first connection is simply abandoned)
    assert q2.recover() == 1
    assert q2.finish(jid, verdict="{}", status="PASS") is False  # not running until claimed again
    job2 = q2.claim()
    assert job2.id == jid and job2.attempts == 2
    assert q2.finish(jid, verdict="{}", status="PASS") is True
    assert q2.finish(jid, error="again") is False
    assert q2.get(jid).finishes == 1 and q2.get(jid).state == "done"


def test_the_queue_bound_counts_unfinished_jobs_only(tmp_path):
    q = JobQueue(tmp_path / "q.sqlite", capacity=1)
    jid, _ = q.submit("a", "p", "one\n", {}, None)
    with pytest.raises(QueueFull):
        q.submit("a", "p", "two\n", {}, None)
    assert q.submit("a", "p", "one\n", {}, None) == (jid, False)  # the stored job, even when full
    q.claim()
    q.finish(jid, error="x")
    assert q.submit("a", "p", "two\n", {}, None)[1] is True


# Security -----------------------------------------------------------------------------------------

def test_tokens_from_env_and_file(tmp_path):
    assert tokens_from_env("T", {"T": f"{TOKEN_A}, {TOKEN_B}"}) == {TOKEN_A, TOKEN_B}
    with pytest.raises(TokenError, match="not set"):
        tokens_from_env("T", {})
    with pytest.raises(TokenError, match="fewer than 16"):
        tokens_from_env("T", {"T": "short"})
    f = tmp_path / "tokens"
    f.write_text(f"# clients\n{TOKEN_A}\n\n{TOKEN_B}\n")
    assert tokens_from_file(f) == {TOKEN_A, TOKEN_B}
    with pytest.raises(TokenError, match="cannot read it"):
        tokens_from_file(tmp_path / "missing")


def test_authentication_and_loopback():
    tokens = frozenset({TOKEN_A})
    assert authenticate(f"Bearer {TOKEN_A}", tokens) == client_id(TOKEN_A) != TOKEN_A
    assert authenticate(None, frozenset()) == "local"
    for header in (None, "Bearer", f"Token {TOKEN_A}", f"Bearer {TOKEN_B}"):
        with pytest.raises(PermissionError):
            authenticate(header, tokens)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.org")


def _serve_cli(*args: str, env: dict | None = None):
    from kbv.cli.main import app

    return CliRunner().invoke(app, ["serve", str(PROBLEMS), "--device", "cpu", *args], env=env)


def test_cli_refuses_a_public_host_without_a_token(tmp_path):
    res = _serve_cli("--host", "0.0.0.0", "--store", str(tmp_path / "s.sqlite"))
    assert res.exit_code == 2
    assert "--host 0.0.0.0 is not a loopback address" in res.output and "--token-env" in res.output


def test_cli_token_and_store_faults_are_one_line(tmp_path):
    res = _serve_cli("--token-env", "KBV_TEST_NO_SUCH_VAR")
    assert res.exit_code == 2 and "KBV_TEST_NO_SUCH_VAR: the environment variable is not set" in res.output
    res = _serve_cli("--token-file", str(tmp_path / "none"))
    assert res.exit_code == 2 and "cannot read it" in res.output
    (tmp_path / "junk.sqlite").write_bytes(b"not a database" * 100)
    res = _serve_cli("--store", str(tmp_path / "junk.sqlite"))
    assert res.exit_code == 2 and "cannot open it as a SQLite store" in res.output


# The client ---------------------------------------------------------------------------------------

def _flaky(fail_times: int, status: int = 429):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) <= fail_times:
            return httpx.Response(status, json={"error": "the queue is full"}, headers={"Retry-After": "0"})
        if request.url.path == "/v1/verifications":
            return httpx.Response(202, json={"id": "j1", "created": True})
        return httpx.Response(200, json={"id": "j1", "state": "done", "verdict": {"status": "PASS"},
                                         "reward": {"score": 1.0}, "error": None})

    return handler, calls


def test_client_retries_429_and_503_then_gives_the_servers_line():
    handler, calls = _flaky(2)
    with Client("http://kbv.test", token=TOKEN_A, transport=httpx.MockTransport(handler)) as c:
        r = c.verify("level1/1_ReLU", RELU)
    assert (r.state, r.status, r.score) == ("done", "PASS", 1.0) and len(calls) == 4
    assert calls[0].headers["authorization"] == f"Bearer {TOKEN_A}"
    handler, calls = _flaky(10, status=503)
    with Client("http://kbv.test", retries=2, transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(ServeError, match="503: the queue is full"):
            c.submit("level1/1_ReLU", RELU)
    assert len(calls) == 3


def test_async_client_retries_too():
    import asyncio

    handler, calls = _flaky(1)

    async def go():
        async with AsyncClient("http://kbv.test", transport=httpx.MockTransport(handler)) as c:
            return await c.verify("level1/1_ReLU", RELU)

    assert asyncio.run(go()).score == 1.0 and len(calls) == 3


def test_verify_that_runs_out_of_time_raises_with_the_job_id():
    """``verify(..., timeout=)`` promises a verdict: a job still running then raises ``VerifyTimeout``
    naming the job (newcomer helper: an unfinished result came back, ``score`` None, which an RL loop
    read as a reward); ``wait`` returns the job as it stands."""
    import asyncio

    from kbv.serve.client import VerifyTimeout

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/verifications":
            return httpx.Response(202, json={"id": "j9", "created": True})
        return httpx.Response(200, json={"id": "j9", "state": "running", "verdict": None, "reward": None,
                                         "error": None})

    with Client("http://kbv.test", transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(VerifyTimeout, match="job j9 not finished after 0.2 s") as err:
            c.verify("level1/1_ReLU", RELU, timeout=0.2)
        assert err.value.job_id == "j9" and err.value.result.state == "running"
        assert c.wait("j9", timeout=0.1).finished is False

    async def go():
        async with AsyncClient("http://kbv.test", transport=httpx.MockTransport(handler)) as c:
            await c.verify("level1/1_ReLU", RELU, timeout=0.1)

    with pytest.raises(VerifyTimeout):
        asyncio.run(go())
    from kbv.serve.rewards import make_verl_compute_score  # a reward function gives its invalid score

    with Client("http://kbv.test", transport=httpx.MockTransport(handler)) as c:
        score = make_verl_compute_score(c, timeout=0.1, invalid=-1.0)
        assert score("kbv", f"```python\n{RELU}\n```", "level1/1_ReLU") == -1.0


def test_client_is_exported_lazily_and_parses_events():
    assert kbv.Client is Client and kbv.AsyncClient is AsyncClient
    lines = ["id: 1", "event: verdict", 'data: {"id": "x", "state": "done"}', "", ": keep-alive", "",
             'data: {"id": "y",', 'data: "state": "error"}', ""]
    assert [Result.from_json(d).id for d in _events(lines)] == ["x", "y"]


# A live server ------------------------------------------------------------------------------------

def _start(tmp_path: Path, store: Path, *args: str, lanes: tuple[str, ...] = ("--device", "cpu")) -> tuple[subprocess.Popen, str]:
    log = tmp_path / f"serve-{time.monotonic_ns()}.log"
    # the kbv this test imports, also where it is found through a relative PYTHONPATH (the GPU host's
    # ``PYTHONPATH=src``) that the server, started in tmp_path, would not resolve
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(kbv.__file__).resolve().parents[1]), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "kbv", "serve", str(PROBLEMS), *lanes,
                                 "--port", "0", "--store", str(store), *args], stdout=f, stderr=f, cwd=tmp_path, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"listening on (http://\S+)", log.read_text())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"kbv serve did not start: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.e2e
def test_live_server_verifies_rewards_and_streams(tmp_path, cpu_evaluator):
    token = "live-token-" + "x" * 10
    (tmp_path / "tokens").write_text(token + "\n")
    proc, url = _start(tmp_path, tmp_path / "s.sqlite", "--token-file", str(tmp_path / "tokens"))
    try:
        with Client(url, token=token) as c:
            honest = c.verify("level1/1_ReLU", RELU, SMALL, timeout=240)
            wrong = c.verify("level1/1_ReLU", (CANDIDATES / "relu_wrong_shape.py").read_text(), SMALL, timeout=240)
            rejected = c.verify("level1/1_ReLU", "import torch\n", SMALL, timeout=240)
            assert honest.status == "PASS" and honest.score > 0 and honest.reward["valid"]
            assert honest.to_verdict().config.nominal_seeds == 1
            assert wrong.status == "INCORRECT" and wrong.score == pytest.approx(0.1)
            assert rejected.status == "COMPILE_ERROR" and rejected.verdict["evidence"]["ran"] is False
            again = c.submit("level1/1_ReLU", RELU, SMALL)  # idempotent: the stored verdict
            assert again == honest.id and c.result(again).status == "PASS"
            seen = []
            for r in c.stream():
                seen.append(r.id)
                if len(seen) == 3:
                    break
            assert seen == [honest.id, wrong.id, rejected.id]
            assert "kbv_serve_verdicts_total{status=\"PASS\"} 1" in httpx.get(
                f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
        with Client(url) as c, pytest.raises(ServeError, match="401"):
            c.submit("level1/1_ReLU", RELU)
    finally:
        _stop(proc)
    # the same pair verified in process gets the same status (kbv eval's verdict)
    from kbv.api import make_config
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem

    direct = cpu_evaluator.evaluate(load_problem(PROBLEMS / "level1" / "1_ReLU.py"),
                                    load_candidate(CANDIDATES / "relu_wrong_shape.py"), make_config({**SMALL, "device": "cpu"}))
    assert direct.status.value == wrong.status


@pytest.mark.e2e
def test_kill_9_then_restart_finishes_every_accepted_job_exactly_once(tmp_path):
    store = tmp_path / "s.sqlite"
    proc, url = _start(tmp_path, store)
    crash = (CANDIDATES / "relu_segfault.py").read_text()
    items = [job("level1/1_ReLU", RELU, {**SMALL, "trials": t}) for t in (3, 4)] + [job("level1/1_ReLU", crash, SMALL)]
    try:
        with Client(url) as c:
            ids = c.submit_many(items)
            assert c.wait(ids[0], timeout=240).status == "PASS"
            time.sleep(0.5)  # the next job is on the lane
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with sqlite3.connect(store) as db:
        states = dict(db.execute("SELECT id, state FROM jobs").fetchall())
    assert len(states) == 3 and states[ids[0]] == "done" and list(states.values()).count("done") < 3
    proc, url = _start(tmp_path, store)
    try:
        with Client(url) as c:
            results = [c.wait(i, timeout=240) for i in ids]
    finally:
        _stop(proc)
    assert [r.status for r in results] == ["PASS", "PASS", "CRASH"]  # a crashing candidate: its verdict
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT state, finishes FROM jobs").fetchall()
    assert len(rows) == 3 and all(r == ("done", 1) for r in rows)


# The trainers' reward functions ------------------------------------------------------------------

def _scoring_server():
    """A mock server: every job PASSes with score 1.5, except a candidate holding 'kbv-fails' (EVAL_ERROR)."""
    sources: dict[str, str] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            body = json.loads(request.content)
            items = body["items"] if "items" in body else [body]
            ids = []
            for it in items:
                sources[f"j{len(sources)}"] = it["candidate"]
                ids.append(f"j{len(sources) - 1}")
            return httpx.Response(202, json={"ids": ids, "created": [True] * len(ids)} if "items" in body
                                  else {"id": ids[0], "created": True})
        jid = request.url.path.rsplit("/", 1)[1]
        bad = "kbv-fails" in sources[jid]
        return httpx.Response(200, json={"id": jid, "state": "done", "verdict": {"status": "EVAL_ERROR" if bad else "PASS"},
                                         "reward": {"score": 0.0 if bad else 1.5, "valid": not bad}, "error": None})

    return Client("http://kbv.test", transport=httpx.MockTransport(handler)), sources


def test_trl_reward_extracts_the_code_block_and_scores_each_completion():
    from kbv.serve.rewards import TRLReward

    client, sources = _scoring_server()
    fn = TRLReward(client, invalid=None)
    block = f"Here it is:\n```python\n{RELU}```\n"
    completions = [block, "no code at all", [{"role": "assistant", "content": block.replace("0.0", "0.0  # kbv-fails")}]]
    assert fn(prompts=["p"] * 3, completions=completions, problem=["level1/1_ReLU"] * 3) == [1.5, 0.0, None]
    assert len(sources) == 2 and fn.__name__ == "kbv_reward"  # the answer without code sent nothing
    with pytest.raises(ValueError, match="column 'problem'"):
        fn(prompts=["p"], completions=[block])


def test_verl_compute_score_takes_the_problem_as_ground_truth():
    from kbv.serve.rewards import make_verl_compute_score

    client, sources = _scoring_server()
    score = make_verl_compute_score(client)
    assert score("kernelbench", f"```python\n{RELU}```", "level1/1_ReLU") == 1.5
    assert score("kernelbench", "I cannot", "level1/1_ReLU") == 0.0 and len(sources) == 1


# Load --------------------------------------------------------------------------------------------

@pytest.mark.e2e
def test_eight_concurrent_clients_lose_and_duplicate_nothing(tmp_path):
    """8 clients x 25 jobs on a live server: candidates refused by static vetting (COMPILE_ERROR
    without a worker, so the test times the service, not kbv's pipeline); clients 0-3 send the
    same 25, so those are stored once. Every verdict equals kbv.verify's for the same pair."""
    from concurrent.futures import ThreadPoolExecutor

    proc, url = _start(tmp_path, tmp_path / "s.sqlite")

    def source(client: int, i: int) -> str:
        return f"# client {client} job {i}\nimport torch\n"  # no ModelNew

    def one_client(n: int) -> list[tuple[str, str]]:
        with Client(url) as c:
            ids = [c.submit("level1/1_ReLU", source(n if n >= 4 else 0, i), SMALL) for i in range(25)]
            return [(i, c.wait(i, timeout=120).status) for i in ids]

    try:
        with ThreadPoolExecutor(8) as pool:
            per_client = list(pool.map(one_client, range(8)))
    finally:
        _stop(proc)
    assert all(s == "COMPILE_ERROR" for results in per_client for _, s in results)
    assert len({i for results in per_client[:4] for i, _ in results}) == 25  # one job per distinct pair
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        rows = db.execute("SELECT state, finishes, attempts FROM jobs").fetchall()
    assert len(rows) == 25 + 4 * 25 and all(r == ("done", 1, 1) for r in rows)
    direct = kbv.verify(PROBLEMS / "level1" / "1_ReLU.py", source(0, 0), {**SMALL, "device": "cpu"})
    assert direct.status.value == "COMPILE_ERROR"


@pytest.mark.cuda
@pytest.mark.slow
def test_gpu_lane_stays_busy_under_eight_clients(tmp_path):
    """``kbv serve --gpus 0`` fed by 8 clients: ``$KBV_SERVE_GPU_JOBS`` (default 104) distinct ReLU
    verifications (13 per client, each its own trials count) of a plain-PyTorch ReLU; every one gets
    the same verified status (PASS, or SHORTCUT where the device profile finds library kernels
    only: on the H100 of 2026-12-05 all 104 were SHORTCUT) and the lane is busy >= 90 % of the span
    from the first start to the last finish (issue 22's bar). Prints the figures for
    docs/gpu-runs.md."""
    from concurrent.futures import ThreadPoolExecutor

    per = max(1, int(os.environ.get("KBV_SERVE_GPU_JOBS", "104")) // 8)
    cfg = {**SMALL, "interval_half_width": 0.0}
    proc, url = _start(tmp_path, tmp_path / "s.sqlite", lanes=("--gpus", "0"))

    def one_client(n: int) -> list[str]:
        with Client(url) as c:
            ids = [c.submit("level1/1_ReLU", RELU, {**cfg, "trials": 3 + n * per + i}) for i in range(per)]
            return [c.wait(i, timeout=600).status for i in ids]

    try:
        with ThreadPoolExecutor(8) as pool:
            statuses = [s for xs in pool.map(one_client, range(8)) for s in xs]
    finally:
        _stop(proc)
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        rows = db.execute("SELECT started, finished, submitted FROM jobs ORDER BY started").fetchall()
    busy = sum(f - s for s, f, _ in rows) / (rows[-1][1] - rows[0][0])
    lat = sorted(f - sub for _, f, sub in rows)
    print(f"kbv serve --gpus 0: {len(rows)} jobs, lane busy {busy:.3f}, latency p50 {lat[len(lat) // 2]:.2f} s "
          f"p99 {lat[min(len(lat) - 1, int(0.99 * len(lat)))]:.2f} s, mean job {sum(f - s for s, f, _ in rows) / len(rows):.2f} s")
    assert len(statuses) == len(rows) == 8 * per, (len(statuses), len(rows))
    assert len(set(statuses)) == 1 and statuses[0] in ("PASS", "SHORTCUT"), sorted(set(statuses))
    assert busy >= 0.9


@pytest.mark.slow
def test_ray_lanes_verify_each_job_once_on_a_local_cluster(tmp_path):
    """``kbv serve --executor ray``: jobs run as Ray tasks on a local cluster (2 CPUs), each verdict
    stored once with the status a local lane gives (the honest clamp ReLU: PASS; a candidate that
    does not parse: COMPILE_ERROR)."""
    ray = pytest.importorskip("ray")
    import time

    registry = Registry()
    registry.add_folder(PROBLEMS)
    queue = JobQueue(tmp_path / "serve.sqlite")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        service = Service(queue, registry, [], "cpu", ray_tasks=2)
        ref, config = service.resolve_job("level1/1_ReLU", SMALL)
        broken = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x +\n"
        ids = [queue.submit("c", ref.sha256, src, config, None)[0] for src in (RELU, broken)]
        service.start()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and any(queue.get(i).state != "done" for i in ids):
            time.sleep(0.5)
        service.stop()
        jobs = [queue.get(i) for i in ids]
    finally:
        ray.shutdown()
    assert [j.state for j in jobs] == ["done", "done"], [(j.state, j.error) for j in jobs]
    assert [j.status for j in jobs] == ["PASS", "COMPILE_ERROR"], [(j.status, j.error) for j in jobs]
    assert all(name.startswith("ray-") for name in service.lane_busy())
    assert queue.statuses() == {"PASS": 1, "COMPILE_ERROR": 1}
