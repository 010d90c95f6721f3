"""Who may use ``kbv serve`` and what a request may hold: Bearer tokens, the bind-address rule
and the request limits. Pure functions and small records; nothing here touches the network.

Tokens come from an environment variable (``--token-env NAME``: one token, or several separated
by commas or whitespace) or a file (``--token-file FILE``: one token a line, ``#`` comments).
Each token is a client: the queue's fair share (:mod:`kbv.serve.queue`) is per token, keyed by
:func:`client_id` (a fingerprint; the token itself is never stored).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

#: shortest token accepted (kbv choice: 16 characters of a random token are ~96 bits).
MIN_TOKEN_CHARS = 16
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")  # printable ASCII without spaces: a valid header value

#: the client name of requests on a server without tokens (loopback only).
LOCAL_CLIENT = "local"


class TokenError(ValueError):
    """Tokens that cannot be used; ``str()`` is one line naming the source and the fault."""


def _check(tokens: list[str], where: str) -> frozenset[str]:
    if not tokens:
        raise TokenError(f"{where}: holds no token")
    for t in tokens:
        if not _TOKEN_RE.fullmatch(t):
            raise TokenError(f"{where}: a token holds a character outside printable ASCII")
        if len(t) < MIN_TOKEN_CHARS:
            raise TokenError(f"{where}: a token has {len(t)} characters, fewer than {MIN_TOKEN_CHARS}")
    return frozenset(tokens)


def tokens_from_env(name: str, environ: dict | None = None) -> frozenset[str]:
    """The tokens in environment variable ``name`` (separated by commas or whitespace).

    Raises:
        TokenError: the variable is unset or empty, or a token is too short or not printable ASCII.
    """
    env = os.environ if environ is None else environ
    value = env.get(name)
    if value is None:
        raise TokenError(f"--token-env {name}: the environment variable is not set")
    return _check([t for t in re.split(r"[,\s]+", value) if t], f"--token-env {name}")


def tokens_from_file(path: str | Path) -> frozenset[str]:
    """The tokens of a file: one a line; blank lines and ``#`` comments skipped.

    Raises:
        TokenError: the file cannot be read, is not UTF-8, holds no token, or a token is too short.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"--token-file {path}: cannot read it ({exc.__class__.__name__}: "
                         f"{getattr(exc, 'strerror', None) or exc})") from None
    lines = [ln.strip() for ln in text.splitlines()]
    return _check([ln for ln in lines if ln and not ln.startswith("#")], f"--token-file {path}")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); False for anything else,
    ``0.0.0.0`` included."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_id(token: str) -> str:
    """The client a token stands for: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]


def authenticate(header: str | None, tokens: frozenset[str]) -> str:
    """The client of a request's ``Authorization`` header (:func:`client_id`), or
    :data:`LOCAL_CLIENT` on a server without tokens.

    Raises:
        PermissionError: tokens are required and the header is missing, not ``Bearer <token>``, or
            holds no known token (compared in constant time).
    """
    if not tokens:
        return LOCAL_CLIENT
    if not header:
        raise PermissionError("missing 'Authorization: Bearer <token>' header")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise PermissionError("the Authorization header must be 'Bearer <token>'")
    value = value.strip()
    match = None
    for t in tokens:  # every token compared, so the time does not say which one came close
        if hmac.compare_digest(t.encode("utf-8", "surrogateescape"), value.encode("utf-8", "surrogateescape")):
            match = t
    if match is None:
        raise PermissionError("unknown token")
    return client_id(match)


@dataclass(frozen=True)
class Limits:
    """What one request may hold and ask for.

    Fields:
        max_body_bytes: a request body's bytes at most (413 beyond).
        max_source_bytes: a candidate's or uploaded problem's UTF-8 bytes at most (413 beyond); kbv's
            own limit for a source file is :data:`kbv.intake.problems.MAX_SOURCE_BYTES` (1 MiB).
        max_batch: jobs in one batch submit at most.
        max_wait_s: the longest ``?wait=`` honoured (s).
    """

    max_body_bytes: int = 2 << 20
    max_source_bytes: int = 256 << 10
    max_batch: int = 256
    max_wait_s: float = 60.0


__all__ = ["TokenError", "tokens_from_env", "tokens_from_file", "is_loopback", "client_id", "authenticate",
           "Limits", "LOCAL_CLIENT", "MIN_TOKEN_CHARS"]
