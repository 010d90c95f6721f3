"""The HTTP side of ``kbv serve`` (FastAPI): routes, authentication, limits and error replies.

Routes (JSON in and out; docs/serve.md has the schemas):

=================================  =============================================================
``GET /v1/health``                 liveness and queue counts (no token needed)
``GET /v1/problems``               the registered problems' names and hashes
``POST /v1/problems``              upload a problem ``{"source", "name"?}`` → ``{"problem": "sha256:<hex>"}``
``POST /v1/verifications``         ``{"problem", "candidate", "config"?, "backend"?}`` → 202 ``{"id", "created"}``
``POST /v1/verifications/batch``   ``{"items": [...]}`` → 202 ``{"ids", "created"}`` (all or none)
``GET /v1/verifications/{id}``     ``?wait=S`` → ``{"id", "state", "verdict", "reward", "error"}``
``GET /v1/stream``                 server-sent events: each finished job of the caller, ``?since=N``
``GET /metrics``                   Prometheus text: queue depth, lane busy fraction, verdicts, latency
=================================  =============================================================

Every refusal is a 4xx with ``{"error": "<one line>"}`` and stores nothing: 400 a body that is not
UTF-8 JSON, 401 a missing or unknown token, 404 an unknown problem, job or route, 413 a body or
source over the limits, 422 a missing field, a wrong type or a config out of range, 429 a full
queue (with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.exceptions import HTTPException

from kbv.serve.prometheus import exposition
from kbv.serve.queue import QueueFull
from kbv.serve.requests import BadRequest, check_overrides, no_unknown, parse_json, require_object, text_field
from kbv.serve.security import Limits, authenticate
from kbv.serve.service import Service, problem_address

_JOB_FIELDS = ("problem", "candidate", "config", "backend")
_BACKENDS = ("cuda", "triton", "cpp")


class Notifier:
    """Wakes the requests waiting for a result: :meth:`notify` may be called from any thread."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.event: asyncio.Event | None = None

    def bind(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()

    def notify(self) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        ev, self.event = self.event, asyncio.Event()
        if ev is not None:
            ev.set()

    def current(self) -> asyncio.Event:
        if self.event is None:
            self.bind()
        return self.event  # type: ignore[return-value]


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused past ``limit`` bytes (by its Content-Length, or while reading it).

    Raises:
        BadRequest: 413 over the limit; 400 a Content-Length that is not a number.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise BadRequest(400, f"Content-Length {declared!r} is not a number")
        if int(declared) > limit:
            raise BadRequest(413, f"the request body is {declared} bytes, over the server's {limit}-byte limit")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"the request body is over the server's {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(service: Service, tokens: frozenset[str] = frozenset(), limits: Limits = Limits()) -> FastAPI:
    """The FastAPI app of ``service``. Its lifespan starts the service's lanes and stops them."""
    notifier = Notifier()
    service.on_finish = notifier.notify

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        notifier.bind()
        service.start()
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, service.stop)

    app = FastAPI(title="kbv serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(BadRequest)
    async def _bad(_request: Request, exc: BadRequest) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _error(exc.status, exc.message, headers)

    @app.exception_handler(QueueFull)
    async def _full(_request: Request, exc: QueueFull) -> JSONResponse:
        return _error(429, str(exc), {"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(HTTPException)
    async def _http(_request: Request, exc: HTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and message == "Not Found":
            message = "no such route; see docs/serve.md for the API"
        return _error(exc.status_code, message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(422, f"{where}: {first.get('msg', 'invalid request')}")

    def client(request: Request) -> str:
        try:
            return authenticate(request.headers.get("authorization"), tokens)
        except PermissionError as exc:
            raise BadRequest(401, str(exc)) from None

    async def json_body(request: Request) -> dict:
        return require_object(parse_json(await read_body(request, limits.max_body_bytes)))

    def job_item(obj: Any, where: str = "") -> tuple[str, str, dict, str | None]:
        obj = require_object(obj, f"{where.rstrip(': ')}" if where else "the request body")
        no_unknown(obj, _JOB_FIELDS, where)
        problem = text_field(obj, "problem", 1024, where=where)
        candidate = text_field(obj, "candidate", limits.max_source_bytes, where=where)
        backend = text_field(obj, "backend", 16, required=False, where=where)
        if backend is not None and backend not in _BACKENDS:
            raise BadRequest(422, f"{where}field 'backend' must be one of {', '.join(_BACKENDS)}, not {backend!r}")
        try:
            overrides = check_overrides(obj.get("config"), service.ranges)
        except BadRequest as exc:
            raise BadRequest(exc.status, f"{where}{exc.message}") from None
        ref, config = service.resolve_job(problem, overrides)  # type: ignore[arg-type]
        return ref.sha256, candidate, config, backend  # type: ignore[return-value]

    @app.get("/v1/health")
    async def health() -> dict:
        counts = service.queue.counts()
        return {"status": "ok", "device": service.device, "lanes": len(service.specs),
                "queued": counts["queued"], "running": counts["running"], "problems": len(service.registry.names())}

    @app.get("/v1/problems")
    async def problems(request: Request) -> dict:
        client(request)
        return {"problems": [{"name": n, "sha256": service.registry.resolve(n).sha256}  # type: ignore[union-attr]
                             for n in service.registry.names()]}

    @app.post("/v1/problems", status_code=201)
    async def upload(request: Request) -> dict:
        client(request)
        if not service.allow_uploads:
            raise BadRequest(403, "problem uploads are off: a problem's code runs in kbv's trusted reference "
                                  "worker; start kbv serve with --allow-uploads to accept them from trusted clients")
        obj = await json_body(request)
        no_unknown(obj, ("source", "name"))
        source = text_field(obj, "source", limits.max_source_bytes)
        name = text_field(obj, "name", 100, required=False)
        from kbv.intake.problems import ProblemError

        try:
            ref = service.registry.add_source(source, name)  # type: ignore[arg-type]
        except ProblemError as exc:
            raise BadRequest(422, f"not a KernelBench problem: {exc.fault}") from None
        except ValueError as exc:
            raise BadRequest(422, str(exc)) from None
        service.queue.add_problem(ref.sha256, name or "problem", source)  # type: ignore[arg-type]
        return {"problem": f"sha256:{ref.sha256}", "name": ref.name}

    @app.post("/v1/verifications", status_code=202)
    async def submit(request: Request) -> dict:
        who = client(request)
        item = job_item(await json_body(request))
        job_id, created = service.queue.submit(who, *item)
        service.wake()
        return {"id": job_id, "created": created}

    @app.post("/v1/verifications/batch", status_code=202)
    async def submit_batch(request: Request) -> dict:
        who = client(request)
        obj = await json_body(request)
        no_unknown(obj, ("items",))
        items = obj.get("items")
        if not isinstance(items, list) or not items:
            raise BadRequest(422, "field 'items' must be a non-empty array of verification requests")
        if len(items) > limits.max_batch:
            raise BadRequest(413, f"{len(items)} items, over the server's batch limit of {limits.max_batch}")
        parsed = [job_item(it, f"items[{i}]: ") for i, it in enumerate(items)]
        out = service.queue.submit_many(who, parsed)
        service.wake()
        return {"ids": [i for i, _ in out], "created": [c for _, c in out]}

    @app.get("/v1/verifications/{job_id}")
    async def result(job_id: str, request: Request) -> dict:
        client(request)
        wait = _wait_s(request.query_params.get("wait"), limits.max_wait_s)
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            event = notifier.current()  # taken before reading, so a finish in between wakes us
            job = service.queue.get(job_id)
            if job is None:
                raise BadRequest(404, f"no verification with id {job_id!r}")
            left = deadline - asyncio.get_running_loop().time()
            if job.state in ("done", "error") or left <= 0:
                return service.result(job)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), left)

    @app.get("/v1/stream")
    async def stream(request: Request) -> StreamingResponse:
        who = client(request)
        since = request.query_params.get("since") or request.headers.get("last-event-id") or "0"
        if not since.isdigit():
            raise BadRequest(422, f"query parameter 'since' must be a non-negative integer, not {since!r}")
        mine = None if not tokens else who

        async def events() -> AsyncIterator[str]:
            last = int(since)
            while True:
                event = notifier.current()
                jobs = service.queue.finished_since(last, mine)
                for job in jobs:
                    last = job.done_seq or last
                    yield f"id: {last}\nevent: verdict\ndata: {json.dumps(service.result(job))}\n\n"
                if jobs:
                    continue
                if await request.is_disconnected():
                    return
                try:
                    await asyncio.wait_for(event.wait(), 15.0)
                except asyncio.TimeoutError:
                    yield ": keep-alive\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.get("/metrics")
    async def metrics(request: Request) -> PlainTextResponse:
        client(request)
        return PlainTextResponse(exposition(service), media_type="text/plain; version=0.0.4")

    return app


def _wait_s(value: str | None, max_wait_s: float) -> float:
    if value is None:
        return 0.0
    try:
        wait = float(value)
    except ValueError:
        raise BadRequest(422, f"query parameter 'wait' must be a number of seconds, not {value!r}") from None
    if not (0 <= wait <= max_wait_s):
        raise BadRequest(422, f"query parameter 'wait' must be in [0, {max_wait_s:g}] seconds, not {value}")
    return wait


__all__ = ["create_app", "read_body", "Notifier", "problem_address"]
