"""``kbv.Client`` and ``kbv.AsyncClient``: a ``kbv serve`` server from Python (httpx), for RL loops.

::

    client = kbv.Client("http://127.0.0.1:8000", token=os.environ.get("KBV_TOKEN"))
    r = client.verify("level1/19_ReLU", candidate_source, {"nominal_seeds": 2})
    r.state, r.status, r.score, r.reward["feedback"]

``submit`` returns a job id at once (the same id for the same problem, candidate, config and
backend: submitting again is safe), ``result(id, wait=S)`` waits up to S seconds, ``verify`` does
both until the job is finished. A 429 (queue full) or 503 answer, and a connection that fails,
are retried after the server's ``Retry-After`` (else an exponential backoff from 0.5 s, at most
30 s) up to ``retries`` times; any other refusal raises :class:`ServeError` with the server's
one-line message. Imports nothing of kbv's verification side (no torch).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Iterator, Mapping

import httpx

#: statuses retried (the queue is full; the server is starting or stopping).
RETRY_STATUSES = (429, 503)
#: the longest pause between retries (s), whatever ``Retry-After`` says.
MAX_BACKOFF_S = 30.0


class ServeError(RuntimeError):
    """A request the server refused (``status``: its HTTP status, ``message``: its one line), or one
    that still failed after every retry (``status`` 429/503, or 0 for a connection failure)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"kbv serve: {status}: {message}" if status else f"kbv serve: {message}")
        self.status = status
        self.message = message


class VerifyTimeout(TimeoutError):
    """``verify(..., timeout=...)`` ran out of time before the job finished: the job goes on on the
    server; ``job_id`` waits for it again (``wait``, ``result``), ``result`` is its state then (an
    unfinished result has no status and no score: a reward read from it would be None)."""

    def __init__(self, job_id: str, timeout: float, result: "Result"):
        super().__init__(f"kbv serve: job {job_id} not finished after {timeout:g} s (state {result.state}); "
                         "wait for it with wait(job_id)")
        self.job_id = job_id
        self.result = result


@dataclass(frozen=True)
class Result:
    """One verification as the server reports it.

    Fields:
        id: the job id.
        state: ``queued``, ``running``, ``done`` (a verdict) or ``error`` (the problem broke, or kbv did).
        verdict: the Verdict JSON (:func:`kbv.model.verdicts.to_dict`), once done. It holds the secret
            seeds: give the policy ``reward["feedback"]``, never the verdict.
        reward: :class:`kbv.generate.feedback.Reward` as a dict (``score``, ``valid``, ``feedback``, ...).
        error: the one-line reason of an ``error`` state.
    """

    id: str
    state: str
    verdict: dict | None = None
    reward: dict | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in ("done", "error")

    @property
    def status(self) -> str | None:
        """The verdict's status (``PASS``, ``INCORRECT``, ...), or None before it is done."""
        return self.verdict["status"] if self.verdict else None

    @property
    def score(self) -> float | None:
        """The scalar reward, or None before it is done."""
        return self.reward["score"] if self.reward else None

    def to_verdict(self):
        """The verdict as a :class:`kbv.model.records.Verdict`.

        Raises:
            ValueError: no verdict yet, or one that does not rebuild.
        """
        if self.verdict is None:
            raise ValueError(f"verification {self.id} is {self.state}: no verdict")
        from kbv.model.verdicts import verdict_from_dict

        return verdict_from_dict(self.verdict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Result":
        return cls(id=data["id"], state=data["state"], verdict=data.get("verdict"), reward=data.get("reward"),
                   error=data.get("error"))


def job(problem: str, candidate: str, config: Mapping[str, Any] | None = None, backend: str | None = None) -> dict:
    """The JSON of one verification request (``config``: overrides of the server's defaults)."""
    out: dict[str, Any] = {"problem": problem, "candidate": candidate}
    if config:
        out["config"] = dict(config)
    if backend is not None:
        out["backend"] = backend
    return out


def _delay(response: httpx.Response | None, attempt: int) -> float:
    header = response.headers.get("retry-after") if response is not None else None
    try:
        wait = float(header) if header is not None else 0.5 * 2 ** attempt
    except ValueError:
        wait = 0.5 * 2 ** attempt
    return min(max(wait, 0.0), MAX_BACKOFF_S)


def _reply(response: httpx.Response) -> dict:
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code >= 400:
        message = data.get("error") if isinstance(data, dict) else None
        raise ServeError(response.status_code, message or response.text[:200] or response.reason_phrase)
    if not isinstance(data, dict):
        raise ServeError(response.status_code, "the server's answer is not a JSON object")
    return data


def _events(lines: Iterable[str]) -> Iterator[dict]:
    """The ``data`` of each server-sent event in ``lines`` (comments and other fields skipped)."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield json.loads("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))


class _Base:
    def __init__(self, url: str, token: str | None, retries: int):
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.url = url.rstrip("/")
        self.retries = retries
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}


class Client(_Base):
    """A synchronous client of a ``kbv serve`` server (module docstring).

    Args:
        url: the server, e.g. ``http://127.0.0.1:8000``.
        token: the Bearer token (None for a loopback server without tokens).
        timeout: seconds per HTTP request (a ``wait`` is added to it).
        retries: retries of a 429, a 503 or a failed connection.
        transport: an httpx transport (tests).
    """

    def __init__(self, url: str = "http://127.0.0.1:8000", token: str | None = None, *, timeout: float = 30.0,
                 retries: int = 8, transport: httpx.BaseTransport | None = None):
        super().__init__(url, token, retries)
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> dict:
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, timeout=timeout or self.timeout, **kw)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise ServeError(0, f"cannot reach {self.url}: {exc}") from None
                time.sleep(_delay(None, attempt))
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                time.sleep(_delay(response, attempt))
                continue
            return _reply(response)
        raise AssertionError("unreachable")

    def health(self) -> dict:
        return self._request("GET", "/v1/health")

    def upload_problem(self, source: str, name: str | None = None) -> str:
        """Upload a problem's source; returns its address ``sha256:<hex>``."""
        body = {"source": source, **({"name": name} if name else {})}
        return self._request("POST", "/v1/problems", json=body)["problem"]

    def submit(self, problem: str, candidate: str, config: Mapping[str, Any] | None = None, *,
               backend: str | None = None) -> str:
        """Queue one verification; returns its id."""
        return self._request("POST", "/v1/verifications", json=job(problem, candidate, config, backend))["id"]

    def submit_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Queue several verifications (each a :func:`job` dict) in one request: all or none."""
        return self._request("POST", "/v1/verifications/batch", json={"items": [dict(i) for i in items]})["ids"]

    def result(self, job_id: str, wait: float = 0.0) -> Result:
        """The job's state, waiting up to ``wait`` seconds for it to finish."""
        data = self._request("GET", f"/v1/verifications/{job_id}", params={"wait": wait},
                             timeout=self.timeout + wait)
        return Result.from_json(data)

    def wait(self, job_id: str, timeout: float | None = None, poll_s: float = 30.0) -> Result:
        """The job once finished (or as it stands after ``timeout`` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic()))
            r = self.result(job_id, wait=left)
            if r.finished or (deadline is not None and time.monotonic() >= deadline):
                return r

    def verify(self, problem: str, candidate: str, config: Mapping[str, Any] | None = None, *,
               backend: str | None = None, timeout: float | None = None) -> Result:
        """Submit and wait for the finished result (``timeout``: seconds at most, None for no limit).

        Raises:
            VerifyTimeout: not finished within ``timeout`` (the job goes on; its id is on the error).
        """
        job_id = self.submit(problem, candidate, config, backend=backend)
        return _finished(job_id, timeout, self.wait(job_id, timeout))

    def stream(self, since: int = 0) -> Iterator[Result]:
        """The finished jobs of this token (all jobs on a server without tokens) as they finish,
        those finished after event ``since`` first. Runs until the caller stops iterating."""
        with self._http.stream("GET", "/v1/stream", params={"since": since},
                               timeout=httpx.Timeout(self.timeout, read=None)) as response:
            if response.status_code >= 400:
                response.read()
                _reply(response)
            for data in _events(response.iter_lines()):
                yield Result.from_json(data)


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client` (same arguments and methods, each a coroutine; ``stream``
    an async iterator)."""

    def __init__(self, url: str = "http://127.0.0.1:8000", token: str | None = None, *, timeout: float = 30.0,
                 retries: int = 8, transport: httpx.AsyncBaseTransport | None = None):
        super().__init__(url, token, retries)
        self.timeout = timeout
        self._http = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=timeout, transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _request(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> dict:
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(method, path, timeout=timeout or self.timeout, **kw)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise ServeError(0, f"cannot reach {self.url}: {exc}") from None
                await asyncio.sleep(_delay(None, attempt))
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                await asyncio.sleep(_delay(response, attempt))
                continue
            return _reply(response)
        raise AssertionError("unreachable")

    async def health(self) -> dict:
        return await self._request("GET", "/v1/health")

    async def upload_problem(self, source: str, name: str | None = None) -> str:
        body = {"source": source, **({"name": name} if name else {})}
        return (await self._request("POST", "/v1/problems", json=body))["problem"]

    async def submit(self, problem: str, candidate: str, config: Mapping[str, Any] | None = None, *,
                     backend: str | None = None) -> str:
        return (await self._request("POST", "/v1/verifications", json=job(problem, candidate, config, backend)))["id"]

    async def submit_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        return (await self._request("POST", "/v1/verifications/batch", json={"items": [dict(i) for i in items]}))["ids"]

    async def result(self, job_id: str, wait: float = 0.0) -> Result:
        data = await self._request("GET", f"/v1/verifications/{job_id}", params={"wait": wait},
                                   timeout=self.timeout + wait)
        return Result.from_json(data)

    async def wait(self, job_id: str, timeout: float | None = None, poll_s: float = 30.0) -> Result:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic()))
            r = await self.result(job_id, wait=left)
            if r.finished or (deadline is not None and time.monotonic() >= deadline):
                return r

    async def verify(self, problem: str, candidate: str, config: Mapping[str, Any] | None = None, *,
                     backend: str | None = None, timeout: float | None = None) -> Result:
        """As :meth:`Client.verify` (raises :class:`VerifyTimeout`)."""
        job_id = await self.submit(problem, candidate, config, backend=backend)
        return _finished(job_id, timeout, await self.wait(job_id, timeout))

    async def stream(self, since: int = 0) -> AsyncIterator[Result]:
        async with self._http.stream("GET", "/v1/stream", params={"since": since},
                                     timeout=httpx.Timeout(self.timeout, read=None)) as response:
            if response.status_code >= 400:
                await response.aread()
                _reply(response)
            data: list[str] = []
            async for line in response.aiter_lines():
                if not line:
                    if data:
                        yield Result.from_json(json.loads("\n".join(data)))
                    data = []
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))


def _finished(job_id: str, timeout: float | None, r: Result) -> Result:
    """``r`` if finished; else :class:`VerifyTimeout` (``verify`` promises a verdict, not a state)."""
    if not r.finished:
        raise VerifyTimeout(job_id, timeout or 0.0, r)
    return r


__all__ = ["Client", "AsyncClient", "Result", "ServeError", "VerifyTimeout", "job", "RETRY_STATUSES"]
