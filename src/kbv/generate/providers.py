"""One chat completion over the official ``openai`` or ``anthropic`` SDK.

:class:`ChatRequest` is everything that determines an answer (provider, model, server, prompt,
sampling parameters, sample index); its :meth:`~ChatRequest.key` is the response cache's key.
:func:`complete` sends it and returns a :class:`Completion` (text, tokens in and out, latency,
cost when known, the raw response as JSON).

Retries: both SDKs retry connection errors, 408, 409, 429 and 5xx with exponential backoff and
jitter, honouring ``retry-after`` headers; :func:`make_client` sets their ``max_retries``.

Keys come from the providers' usual environment variables (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``; the SDKs also read ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``). A server
given with ``base_url`` that needs no key (a local vLLM or SGLang) gets the placeholder ``EMPTY``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

PROVIDERS = ("openai", "anthropic")
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: the server variables the SDKs read when no ``base_url`` is given.
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


class ProviderError(RuntimeError):
    """A call failed after the SDK's retries, or the provider cannot be used (missing SDK or key).
    The message is one line naming the provider and model."""


@dataclass(frozen=True)
class Message:
    role: str  #: ``user`` or ``assistant`` (the system prompt is separate).
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """A fully specified chat call. Two equal requests are answered once (:mod:`kbv.generate.cache`)."""

    provider: str  #: ``openai`` (any OpenAI-compatible server) or ``anthropic``.
    model: str
    system: str
    messages: tuple[Message, ...]
    temperature: float | None = None  #: None: the provider's default (not sent).
    max_tokens: int = 8192
    base_url: str | None = None  #: None: the SDK's default (or its ``*_BASE_URL`` variable).
    stream: bool = False  #: stream the answer (SSE); the result is the same text.
    sample: int = 0  #: sample index: samples of one prompt are distinct requests.

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}, not {self.provider!r}")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")

    def prompt_hash(self) -> str:
        """SHA-256 (hex) of the system prompt and messages only."""
        body = {"system": self.system, "messages": [asdict(m) for m in self.messages]}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def server(self) -> str | None:
        """The server that answers: :attr:`base_url`, else the SDK's ``OPENAI_BASE_URL`` /
        ``ANTHROPIC_BASE_URL`` variable, else None (the provider's own)."""
        return self.base_url or os.environ.get(BASE_URL_ENV[self.provider]) or None

    def key(self) -> str:
        """SHA-256 (hex) of every field but ``stream`` (a streamed and a plain answer are the same),
        with the server that answers (:meth:`server`) in place of ``base_url``: a request sent to
        another server through ``OPENAI_BASE_URL`` is another request."""
        body = asdict(self)
        body.pop("stream")
        body["base_url"] = self.server()
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Pricing:
    """USD per million tokens; cost is reported only when a price is given (or the server reports one)."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None:
        if None in (self.input_per_mtok, self.output_per_mtok, tokens_in, tokens_out):
            return None
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class Completion:
    """The answer to one :class:`ChatRequest`."""

    text: str
    model: str  #: the model name the server reported (may differ from the one asked for).
    tokens_in: int | None
    tokens_out: int | None
    latency_s: float  #: wall time of the call including SDK retries (s).
    finish_reason: str | None
    cost_usd: float | None = None
    raw: dict[str, Any] = field(default_factory=dict)  #: the response as JSON (final message when streamed).
    cached: bool = False  #: served from the response cache (no call made).

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Completion:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _api_key(provider: str, base_url: str | None) -> str:
    key = os.environ.get(KEY_ENV[provider])
    if key:
        return key
    if base_url:
        return "EMPTY"  # self-hosted OpenAI-compatible servers usually ignore the key
    raise ProviderError(f"{provider}: set {KEY_ENV[provider]} (or give --base-url for a server without keys)")


def make_client(provider: str, base_url: str | None = None, *, max_retries: int = 5, timeout_s: float = 600.0):
    """An SDK client (``openai.OpenAI`` or ``anthropic.Anthropic``) with retries on 429/5xx.

    Raises:
        ProviderError: the SDK is not installed (``pip install 'kbv[llm]'``) or no key is set.
    """
    try:
        if provider == "openai":
            import openai as sdk

            cls = sdk.OpenAI
        elif provider == "anthropic":
            import anthropic as sdk

            cls = sdk.Anthropic
        else:
            raise ProviderError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    except ImportError as exc:
        raise ProviderError(f"{provider}: the SDK is not installed ({exc}); pip install 'kbv[llm]'") from None
    kwargs: dict[str, Any] = dict(api_key=_api_key(provider, base_url), max_retries=max_retries, timeout=timeout_s)
    if base_url:
        kwargs["base_url"] = base_url
    return cls(**kwargs)


def _usage_cost(usage: Any) -> float | None:
    """Cost some OpenAI-compatible gateways put in ``usage.cost`` (USD)."""
    extra = getattr(usage, "model_extra", None) or {}
    cost = extra.get("cost") if isinstance(extra, dict) else None
    return float(cost) if isinstance(cost, (int, float)) else None


def _openai_call(client: Any, req: ChatRequest) -> tuple[str, str, int | None, int | None, str | None, dict, float | None]:
    messages = [{"role": "system", "content": req.system}] + [asdict(m) for m in req.messages]
    # api.openai.com's newer models take max_completion_tokens only; compatible servers take max_tokens.
    limit = {"max_tokens": req.max_tokens} if req.base_url else {"max_completion_tokens": req.max_tokens}
    common = dict(model=req.model, messages=messages, **limit)
    if req.temperature is not None:
        common["temperature"] = req.temperature
    if req.stream:
        parts: list[str] = []
        usage = model = finish = None
        with client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **common) as stream:
            for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    if choice.delta is not None and choice.delta.content:
                        parts.append(choice.delta.content)
                    finish = choice.finish_reason or finish
        text = "".join(parts)
        raw = {"streamed": True, "model": model, "finish_reason": finish, "content": text,
               "usage": usage.model_dump() if usage is not None else None}
    else:
        resp = client.chat.completions.create(**common)
        if not resp.choices:
            raise ProviderError(f"openai {req.model}: the response has no choices")
        text = resp.choices[0].message.content or ""
        model, usage, finish, raw = resp.model, resp.usage, resp.choices[0].finish_reason, resp.model_dump()
    tin = getattr(usage, "prompt_tokens", None)
    tout = getattr(usage, "completion_tokens", None)
    return text, model or req.model, tin, tout, finish, raw, _usage_cost(usage)


def _anthropic_call(client: Any, req: ChatRequest) -> tuple[str, str, int | None, int | None, str | None, dict, float | None]:
    common: dict[str, Any] = dict(model=req.model, system=req.system, messages=[asdict(m) for m in req.messages],
                                  max_tokens=req.max_tokens)
    if req.temperature is not None:
        # SDK releases without a ``temperature`` argument still let the API receive it in the body
        if "temperature" in inspect.signature(client.messages.create).parameters:
            common["temperature"] = req.temperature
        else:
            common["extra_body"] = {"temperature": req.temperature}
    if req.stream:
        with client.messages.stream(**common) as stream:
            for _ in stream.text_stream:
                pass
            msg = stream.get_final_message()
    else:
        msg = client.messages.create(**common)
    text = "".join(getattr(b, "text", "") for b in msg.content if getattr(b, "type", None) == "text")
    usage = msg.usage
    return (text, msg.model or req.model, getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None),
            msg.stop_reason, msg.model_dump(), None)


def complete(req: ChatRequest, *, client: Any = None, pricing: Pricing = Pricing(),
             max_retries: int = 5, timeout_s: float = 600.0) -> Completion:
    """Send ``req`` (no cache here: see :func:`kbv.generate.cache.ResponseCache.complete`).

    Args:
        client: an SDK client from :func:`make_client` (made here when None).
        pricing: prices for the cost figure; a cost the server reports wins.

    Raises:
        ProviderError: the SDK failed after its retries (authentication, bad request, 5xx, timeout).
    """
    if client is None:
        client = make_client(req.provider, req.base_url, max_retries=max_retries, timeout_s=timeout_s)
    call = _openai_call if req.provider == "openai" else _anthropic_call
    t0 = time.perf_counter()
    try:
        text, model, tin, tout, finish, raw, server_cost = call(client, req)
    except ProviderError:
        raise
    except Exception as exc:  # the SDKs' APIError family, httpx errors, pydantic validation
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ProviderError(f"{req.provider} {req.model}: {type(exc).__name__}: {first}"[:500]) from exc
    latency = time.perf_counter() - t0
    cost = server_cost if server_cost is not None else pricing.cost(tin, tout)
    return Completion(text=text, model=model, tokens_in=tin, tokens_out=tout, latency_s=latency,
                      finish_reason=finish, cost_usd=cost, raw=raw)


__all__ = ["PROVIDERS", "KEY_ENV", "ProviderError", "Message", "ChatRequest", "Pricing", "Completion",
           "make_client", "complete"]
