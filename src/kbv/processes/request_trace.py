"""A trace of the trusted side's round trips with candidate workers, for benches only (issue 21:
where a verification's wall time goes on a GPU, where the worker cannot be profiled).

Set ``KBV_REQUEST_TRACE=FILE`` in kbv's own environment (the orchestrator's; its reference workers
inherit it) and every request a :class:`kbv.processes.candidate.CandidateProcess` sends appends
JSON lines to ``FILE``:

- ``{"ev": "send", "pid", "req", "phase", "t"}``: the request's type and phase, as it is sent;
- ``{"ev": "reply", "pid", "reply", "t_readable", "t", "hwm", "rss"}``: the reply readable
  (``t_readable``, the worker's time is ``t_readable`` less the send's ``t``) and decoded (``t``),
  with the worker's peak and current resident bytes then (``VmHWM``, ``VmRSS``; None unreadable);
- ``{"ev": "stage", "name", "seconds", "t"}``: a pipeline stage's own mark (``phase_seconds``) as it
  is set;
- ``{"ev": "verify", "what": "start" | "end", "t"}``: one verification's bounds;
- ``{"ev": "lane", "what", "t"}``: the reference worker's marks around a job (received, its reference
  built, its early workers taken, its reply sent: :mod:`kbv.pipeline.reference_worker`).

Times are ``time.monotonic()`` seconds (one clock for every process of the host). Nothing here is
read by a verdict. The file is opened and closed at each line, so no descriptor of it is open when
the zygote forks candidate workers, whose environment does not carry the variable
(:mod:`kbv.sandbox.worker_env`). Summaries: ``bench/request_trace.py``.
"""

from __future__ import annotations

import json
import os
import time

#: the environment variable naming the trace file (unset: no trace, each call costs one dict lookup)
TRACE_ENV = "KBV_REQUEST_TRACE"


def enabled() -> bool:
    """Whether this process traces (``KBV_REQUEST_TRACE`` set and not empty)."""
    return bool(os.environ.get(TRACE_ENV))


def record(ev: str, **fields) -> None:
    """Append one event (module doc) with this process's pid as ``src`` and the time now as ``t``
    unless given; nothing when tracing is off. A write that fails is dropped (a bench's trace never
    stops a verification)."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    fields.setdefault("t", time.monotonic())
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"ev": ev, "src": os.getpid(), **fields}) + "\n")
    except OSError:
        pass


def resident(pid: int) -> dict:
    """``{"hwm", "rss"}``: process ``pid``'s peak and current resident set (bytes, from
    ``/proc/<pid>/status``), None each where unreadable."""
    out: dict = {"hwm": None, "rss": None}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key = {"VmHWM:": "hwm", "VmRSS:": "rss"}.get(line.split(None, 1)[0] if line.strip() else "")
                if key:
                    out[key] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


__all__ = ["TRACE_ENV", "enabled", "record", "resident"]
