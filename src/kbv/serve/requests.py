"""Parsing and checking what a ``kbv serve`` request holds, before anything is stored: the JSON
body, a verification's fields and its config overrides. Pure functions; each fault is one
:class:`BadRequest` with the HTTP status and one line that names the field.

Config overrides (``"config"``) are checked field by field against :data:`CONFIG_RANGES`: the
server fixes the device (its lanes'), the anti-cheat detectors (always on: a reward service that
let a client switch them off would pay for cheats), the ``kbv`` policy's budget and the timing
memory cap; a timeout may be lowered, never raised past ``kbv eval``'s default, and the counts
have caps that keep one job within minutes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


class BadRequest(ValueError):
    """A request refused with ``status`` (a 4xx) and a one-line ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def parse_json(body: bytes) -> Any:
    """The JSON value of a request body.

    Raises:
        BadRequest: 400 when the body is empty, not UTF-8 or not JSON.
    """
    if not body.strip():
        raise BadRequest(400, "the request body is empty; send a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(400, f"the request body is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(400, f"the request body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise BadRequest(400, "the request body nests too deeply") from None


def require_object(value: Any, what: str = "the request body") -> dict:
    if not isinstance(value, dict):
        raise BadRequest(422, f"{what} must be a JSON object, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def text_field(obj: dict, name: str, max_bytes: int, *, required: bool = True, where: str = "") -> str | None:
    """``obj[name]`` as a string of at most ``max_bytes`` UTF-8 bytes.

    Raises:
        BadRequest: 422 missing (when required) or not a string, or holding a NUL; 413 too long.
    """
    value = obj.get(name)
    if value is None:
        if required:
            raise BadRequest(422, f"{where}missing field {name!r}")
        return None
    if not isinstance(value, str):
        raise BadRequest(422, f"{where}field {name!r} must be a string, not {_kind(value)}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise BadRequest(413, f"{where}field {name!r} is {size} bytes, over the server's {max_bytes}-byte limit")
    if "\x00" in value:
        raise BadRequest(422, f"{where}field {name!r} holds a NUL character")
    return value


def no_unknown(obj: dict, known: tuple[str, ...], where: str = "") -> None:
    extra = sorted(set(obj) - set(known))
    if extra:
        raise BadRequest(422, f"{where}unknown field(s) {', '.join(map(repr, extra))}; known: {', '.join(known)}")


# Config overrides ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Range:
    """One overridable config field: its JSON kind and bounds. ``kind``: ``int``, ``float``, ``str``,
    ``names`` (a list of names from ``choices``) or ``float?`` (a float or null)."""

    kind: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()


def config_ranges() -> dict[str, Range]:
    """The fields a request may override and their bounds (module docstring); the names come from
    kbv's registries (``kbv.sandbox.numeric_flags.BASELINES``, ``kbv.reference.distributions``)."""
    from kbv.model.config import POLICIES, SANITIZER_TOOLS, EvalConfig
    from kbv.reference.distributions import DISTRIBUTIONS, HIDDEN_DISTRIBUTIONS
    from kbv.sandbox.numeric_flags import BASELINES

    d = EvalConfig()
    return {
        "precision": Range("str", choices=("fp32", "bf16", "fp16")),
        "policy": Range("str", choices=POLICIES),
        "nominal_seeds": Range("int", 1, 32),
        "hidden": Range("names", choices=tuple(HIDDEN_DISTRIBUTIONS)),
        "distributions": Range("names", choices=tuple(DISTRIBUTIONS)),
        "baselines": Range("names", choices=BASELINES),
        "atol": Range("float", 0.0, 1.0),
        "rtol": Range("float", 0.0, 1.0),
        "warmup": Range("int", 0, 100),
        "trials": Range("int", 1, 1000),
        "timing_rounds": Range("int", 1, 20),
        "max_timing_rounds": Range("int", 1, 50),
        "init_seed": Range("int", 0, 2 ** 31 - 1),
        "compile_timeout_s": Range("float", 1.0, d.compile_timeout_s),
        "call_timeout_s": Range("float", 1.0, d.call_timeout_s),
        "timing_timeout_s": Range("float", 1.0, d.timing_timeout_s),
        "time_budget_ms": Range("float", 0.0, 60000.0),
        "timing_budget_s": Range("float", 0.0, 120.0),
        "interval_half_width": Range("float?", 0.0, 0.5),
        "sanitize": Range("names", choices=SANITIZER_TOOLS),  # cuda lanes only (kbv.pipeline.diagnostics)
        "ncu_profile": Range("bool"),
    }


def check_overrides(config: Any, ranges: dict[str, Range]) -> dict:
    """The config overrides of a request, checked against ``ranges``; lists stay lists.

    Raises:
        BadRequest: 422 not an object, a field not overridable, a value of the wrong kind or out
            of its range.
    """
    if config is None:
        return {}
    config = require_object(config, "field 'config'")
    out: dict[str, Any] = {}
    for name, value in config.items():
        r = ranges.get(name)
        if r is None:
            raise BadRequest(422, f"unknown or locked config field {name!r}: this server accepts "
                                  f"{', '.join(sorted(ranges))}")
        out[name] = _check_value(name, value, r)
    return out


def _check_value(name: str, value: Any, r: Range) -> Any:
    where = f"config field {name!r}"
    if r.kind == "names":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BadRequest(422, f"{where} must be a list of names, not {_kind(value)}")
        bad = [v for v in value if v not in r.choices]
        if bad:
            raise BadRequest(422, f"{where}: unknown name(s) {', '.join(map(repr, bad))}; known: {', '.join(r.choices)}")
        if len(set(value)) != len(value):
            raise BadRequest(422, f"{where} names one entry twice")
        return value
    if r.kind == "str":
        if not isinstance(value, str) or value not in r.choices:
            raise BadRequest(422, f"{where} must be one of {', '.join(r.choices)}, not {value!r}")
        return value
    if r.kind == "bool":
        if not isinstance(value, bool):
            raise BadRequest(422, f"{where} must be true or false, not {_kind(value)}")
        return value
    if value is None and r.kind == "float?":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (r.kind == "int" and not isinstance(value, int)):
        want = "an integer" if r.kind == "int" else "a number"
        raise BadRequest(422, f"{where} must be {want}, not {_kind(value)}")
    if not math.isfinite(value) or (r.lo is not None and value < r.lo) or (r.hi is not None and value > r.hi):
        raise BadRequest(422, f"{where} is {value!r}, outside this server's range [{r.lo:g}, {r.hi:g}]")
    return value


__all__ = ["BadRequest", "parse_json", "require_object", "text_field", "no_unknown", "Range", "config_ranges",
           "check_overrides"]
