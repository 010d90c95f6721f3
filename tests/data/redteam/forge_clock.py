"""Red-team vehicle (not a candidate): forge the candidate worker's own clock natively, where no
identity check sees it, so that the rows of ``tests/test_redteam_bound.py`` exercise the trusted
bound and nothing else. kbv pickles its replies with its own reducers (a ``copyreg`` reducer for a
reply class changes nothing sent and is reported), and it keeps the clock objects it captured at
import; but the C function behind ``time.perf_counter`` is reached through the ``PyMethodDef`` the
builtin points to, and that table is writable memory: :func:`install` points its ``ml_meth`` at a
Python callback (CPython 3.11-3.12 object layout). The callback forges only the two readings the
worker's per-call timer takes (``kbv.sandbox.timer.one_call``: the claims); every other reading,
the bound pass's and the sync pass's included, is the true clock. With ``scale_cpu`` the calling
thread's CPU time the worker reports with each claim (``time.thread_time`` in ``timed_call``) is
scaled by the same ratio.

A row loads it with ``exec`` from its own folder (``t24_forged_time_reply.py``) and calls
:func:`install` with ``claim(elapsed_s, thread_cpu_s) -> claimed elapsed_s``."""

import ctypes
import sys
import time

_real_ns = time.perf_counter_ns
_thread_ns = time.thread_time_ns
_PTR = ctypes.sizeof(ctypes.c_void_p)
_open: dict = {}  #: frame id -> (true reading, thread CPU) of a timer's first reading
_state = {"claim": None, "ratio": 1.0, "scale_cpu": False}


def _perf_counter(_self, _unused):
    now = _real_ns() * 1e-9
    frame = sys._getframe(1)
    if frame.f_code.co_name != "one_call" or _state["claim"] is None:
        return now
    key = id(frame)
    if key not in _open:
        _open[key] = (now, _thread_ns() * 1e-9)
        return now
    t0, c0 = _open.pop(key)
    elapsed = now - t0
    claimed = max(0.0, _state["claim"](elapsed, _thread_ns() * 1e-9 - c0))
    _state["ratio"] = claimed / elapsed if elapsed > 0 else 1.0
    return t0 + claimed


def _thread_time(_self, _unused):
    now = _thread_ns() * 1e-9
    frame = sys._getframe(1)
    if not _state["scale_cpu"] or frame.f_code.co_name != "timed_call":
        return now
    key = ("cpu", id(frame))
    if key not in _open:
        _open[key] = now
        return now
    c0 = _open.pop(key)
    return c0 + (now - c0) * _state["ratio"]


_PROTO = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p)
_CALLBACKS = {"perf_counter": _PROTO(_perf_counter), "thread_time": _PROTO(_thread_time)}


def _repoint(builtin, callback) -> None:
    method_def = ctypes.c_void_p.from_address(id(builtin) + 2 * _PTR).value
    ctypes.c_void_p.from_address(method_def + _PTR).value = ctypes.cast(callback, ctypes.c_void_p).value


def install(claim, scale_cpu: bool = False) -> None:
    """Every claimed time becomes ``claim(true elapsed s, the thread's CPU s over the call)``."""
    _state["claim"], _state["scale_cpu"] = claim, scale_cpu
    _repoint(time.perf_counter, _CALLBACKS["perf_counter"])
    if scale_cpu:
        _repoint(time.thread_time, _CALLBACKS["thread_time"])
