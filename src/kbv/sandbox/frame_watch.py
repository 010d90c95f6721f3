"""Candidate code reaching Python frames at run time (taxonomy 13, and 4 through them): refused and
reported, whatever the spelling.

A frame is the way to everything the harness holds in the worker: the request loop's locals (the
server, its guard, ``one_call``'s clock defaults), the op counter's callers' names. The static scan
names the plain spellings (``scan:frame-walk``); a red-team helper reached the first frame through
``getattr(e.__traceback__, "tb_" + "frame")``, swapped the worker's harness guard and slowed its
clock 25x: PASS 11.2x with no finding (2026-12-06). Every first frame Python hands out raises an
audit event (PEP 578): ``sys._getframe`` (``inspect.currentframe``, ``traceback.walk_stack`` and
``logging.currentframe`` call it), ``sys._current_frames``, the ``tb_frame``, ``gi_frame``,
``cr_frame`` and ``ag_frame`` attributes (``object.__getattr__``), and the garbage collector's
object walks (``gc.get_objects``, ``get_referrers``, ``get_referents``). An audit hook cannot be
removed from Python. :class:`FrameWatch`'s hook refuses such an event (``RuntimeError`` in the
candidate) and records it when the code that raised it is the candidate's: its own file, a file
in its working or build directory, or code compiled from a string (a file name in ``<...>``, not
a frozen module); or a stdlib function that hands frames or its callers' names back to that code
(:data:`LEAKING`: ``inspect.stack``, ``traceback.extract_stack``, ``logging.currentframe``...).
Frames a library reads for itself (``traceback.format_exc``, ``logging``'s caller lookup,
``collections.namedtuple``, torch's and Triton's own) are not the candidate's.

Not seen: native code (``PyEval_GetFrame`` through ctypes or an extension: the scan's
``python-capi`` and ``source-frame-access``), and a library function outside :data:`LEAKING`
that returns a frame to its caller.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

#: audit events that hand out a first frame, or any live object (the collector's walks).
ROOT_EVENTS = frozenset({"sys._getframe", "sys._getframemodulename", "sys._current_frames", "gc.get_objects",
                         "gc.get_referrers", "gc.get_referents"})
#: attributes whose read raises ``object.__getattr__`` and gives a frame.
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
#: stdlib module -> its functions that hand frames, or the caller's stack as names, back to their
#: caller: the candidate calling one of them is the candidate walking frames.
LEAKING = {
    "inspect": frozenset({"currentframe", "stack", "trace", "getouterframes", "getinnerframes"}),
    "traceback": frozenset({"walk_stack", "walk_tb", "extract_stack", "format_stack", "print_stack"}),
    "logging": frozenset({"<lambda>", "currentframe"}),
}
#: how many refused events a verification reports (the first ones).
MAX_REPORTED = 8


def _module_files() -> dict[str, str]:
    import inspect
    import logging
    import traceback

    return {os.path.realpath(m.__file__): name for name, m in
            (("inspect", inspect), ("traceback", traceback), ("logging", logging))}


class FrameWatch:
    """Made and installed in the worker before the candidate loads; :meth:`arm` at the load, with
    the candidate's file and the directories only its code is written to; :meth:`take` before each
    reply (``frame access: <event> at <file>:<line>`` per refused event, each once)."""

    def __init__(self) -> None:
        self._files = _module_files()
        self._own: frozenset = frozenset()
        self._roots: tuple = ()
        self._busy = threading.local()
        self._found: list[str] = []
        self._reported = 0

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def arm(self, candidate_path: str, roots: tuple[str, ...]) -> None:
        self._own = frozenset({candidate_path, os.path.realpath(candidate_path)})
        self._roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)

    def take(self) -> list[str]:
        new = self._found[self._reported:MAX_REPORTED]
        self._reported = max(self._reported, min(len(self._found), MAX_REPORTED))
        return new

    def candidates_code(self, filename: str) -> bool:
        """Whether code of ``filename`` (a code object's ``co_filename``) is the candidate's."""
        if not self._own:
            return False
        if filename.startswith("<"):
            return not filename.startswith("<frozen")
        return filename in self._own or os.path.realpath(filename).startswith(self._roots)

    def _hook(self, event: str, args: tuple) -> None:
        if event not in ROOT_EVENTS and not (event == "object.__getattr__" and len(args) > 1
                                             and args[1] in FRAME_ATTRS):
            return
        if not self._own or getattr(self._busy, "on", False):
            return
        self._busy.on = True  # this hook's own frame read raises the event again
        try:
            where = self._culprit(sys._getframe(1))
        finally:
            self._busy.on = False
        if where is None:
            return
        what = f"{event} {args[1]}" if event == "object.__getattr__" else event
        self._found.append(f"frame access: {what} at {where}")
        raise RuntimeError(f"kbv: {what} is refused in the candidate worker (its frames are the harness's)")

    def _culprit(self, frame: Any) -> str | None:
        """``file:line`` of the candidate's code that raised the event (directly, or through a
        :data:`LEAKING` function), else None."""
        outer = None
        while frame is not None:
            module = self._files.get(os.path.realpath(frame.f_code.co_filename))
            if module is None:
                break
            outer = (module, frame.f_code.co_name)
            frame = frame.f_back
        if frame is None or not self.candidates_code(frame.f_code.co_filename):
            return None
        if outer is not None and outer[1] not in LEAKING[outer[0]]:
            return None
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"
