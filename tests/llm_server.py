"""A loopback HTTP server that speaks the OpenAI chat-completions and the Anthropic messages APIs,
plain and streamed (SSE), for tests that point the real SDK clients at it (no network, no mocks).

``responder(protocol, body) -> str`` decides each answer's text; ``fail_next`` queues HTTP error
statuses (429, 500...) returned before the next answers, to exercise the SDKs' retries. Every
request body is kept in ``requests`` (protocol, parsed JSON).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

Responder = Callable[[str, dict], str]


def _chunks(text: str, n: int = 3) -> list[str]:
    step = max(1, len(text) // n)
    return [text[i:i + step] for i in range(0, len(text), step)] or [""]


class _Handler(BaseHTTPRequestHandler):
    server: "LoopbackLLM"

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, str]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for event, data in events:
            if event:
                self.wfile.write(f"event: {event}\n".encode())
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if self.path.endswith("/chat/completions"):
            protocol = "openai"
        elif self.path.endswith("/v1/messages"):
            protocol = "anthropic"
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        with self.server.lock:
            self.server.requests.append((protocol, body))
            status = self.server.fail_next.pop(0) if self.server.fail_next else None
        if status is not None:
            err = ({"error": {"message": "injected", "type": "rate_limit_error"}} if protocol == "openai" else
                   {"type": "error", "error": {"type": "rate_limit_error", "message": "injected"}})
            self._json(status, err, {"retry-after-ms": "10", "retry-after": "0"})
            return
        text = self.server.responder(protocol, body)
        tin = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
        tout = max(1, len(text) // 4)
        model = body.get("model", "test-model")
        if protocol == "openai":
            self._openai(body, text, model, tin, tout)
        else:
            self._anthropic(body, text, model, tin, tout)

    def _openai(self, body: dict, text: str, model: str, tin: int, tout: int) -> None:
        usage = {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout}
        base = {"id": "chatcmpl-loopback", "created": 0, "model": model}
        if not body.get("stream"):
            self._json(200, {**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]})
            return
        events = [(None, json.dumps({**base, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}))]
        for part in _chunks(text):
            events.append((None, json.dumps({**base, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": {"content": part}, "finish_reason": None}]})))
        events.append((None, json.dumps({**base, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]})))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, json.dumps({**base, "object": "chat.completion.chunk", "choices": [],
                                             "usage": usage})))
        events.append((None, "[DONE]"))
        self._sse(events)

    def _anthropic(self, body: dict, text: str, model: str, tin: int, tout: int) -> None:
        msg = {"id": "msg_loopback", "type": "message", "role": "assistant", "model": model,
               "stop_reason": "end_turn", "stop_sequence": None,
               "usage": {"input_tokens": tin, "output_tokens": tout}}
        if not body.get("stream"):
            self._json(200, {**msg, "content": [{"type": "text", "text": text}]})
            return
        start = {**msg, "content": [], "stop_reason": None, "usage": {"input_tokens": tin, "output_tokens": 1}}
        events = [("message_start", json.dumps({"type": "message_start", "message": start})),
                  ("content_block_start", json.dumps({"type": "content_block_start", "index": 0,
                                                      "content_block": {"type": "text", "text": ""}}))]
        for part in _chunks(text):
            events.append(("content_block_delta", json.dumps({"type": "content_block_delta", "index": 0,
                                                              "delta": {"type": "text_delta", "text": part}})))
        events += [("content_block_stop", json.dumps({"type": "content_block_stop", "index": 0})),
                   ("message_delta", json.dumps({"type": "message_delta",
                                                 "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                                 "usage": {"output_tokens": tout}})),
                   ("message_stop", json.dumps({"type": "message_stop"}))]
        self._sse(events)


class LoopbackLLM(ThreadingHTTPServer):
    """``with LoopbackLLM(responder) as srv:`` serves on ``srv.openai_url`` / ``srv.anthropic_url``."""

    daemon_threads = True

    def __init__(self, responder: Responder):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.responder = responder
        self.requests: list[tuple[str, dict]] = []
        self.fail_next: list[int] = []
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> "LoopbackLLM":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
