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
removed from Python. So do the ways to forge where code seems to come from: a code object made
or relabelled (``code.__new__``, ``code.replace``; ``marshal.loads``) and a function made over one
(``function.__new__``).

:class:`FrameWatch`'s hook refuses such an event (``RuntimeError`` in the candidate) and records it
when it comes from the candidate's code, directly or through the standard library: the frames
from the one that raised it up are passed over while they are the standard library's own (its
file, and the globals of the module of that file); the first frame past them must be the
candidate's (:meth:`FrameWatch.candidates_frame`: the globals of its module, its file, a file in
its working or build directory, code compiled from a string, or globals of no module at all). The
standard library is a gadget shop (``string.Formatter.get_field`` reads ``tb_frame`` for its
caller, ``bdb.Bdb.get_stack`` and ``heapq.merge`` over ``traceback.walk_tb`` hand frames back: a
red-team helper's PASS 2.65x, 2026-12-06; ``copy.copy`` calls a ``__copy__`` set to
``sys._getframe``), so only an event raised at one of :data:`SAFE_SITES`, the standard library's
own frame reads (logging's caller lookup, namedtuple's module name, traceback's walks, the import
system), clears the candidate above it; :data:`LEAKING` functions at the outermost stdlib frame
never do. A stack of stdlib frames only (a pool thread running a builtin the candidate submitted)
is the candidate's. A library outside the standard library (torch, Triton) stops the walk: what it
reads is its own.

Not seen: native code (``PyEval_GetFrame`` through ctypes or an extension: the scan's
``python-capi`` and ``source-frame-access``), and a function outside the standard library that
returns a frame to its caller.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

#: audit events that hand out a first frame or any live object (the collector's walks), or make code
#: that could pass for another file's.
ROOT_EVENTS = frozenset({"sys._getframe", "sys._getframemodulename", "sys._current_frames", "gc.get_objects",
                         "gc.get_referrers", "gc.get_referents", "code.__new__", "function.__new__",
                         "marshal.loads"})
#: attributes whose read raises ``object.__getattr__`` and gives a frame.
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
#: (module, function) of the standard library's own frame reads, seen raising the events in honest
#: use (logging's caller lookup, namedtuple's and enum's and typing's module name, traceback's walks,
#: the import system's bytecode, ``types.coroutine``): only an event raised there clears the
#: candidate above it. A stdlib function that merely calls what it is handed (``copy.copy`` calling
#: a class's ``__copy__`` set to ``sys._getframe``, a red-team helper's PASS; ``string.Formatter``)
#: is the candidate's road.
SAFE_SITES = frozenset({
    ("collections", "namedtuple"), ("enum", "_create_"), ("logging", "<lambda>"), ("typing", "_caller"),
    ("traceback", "walk_stack"), ("traceback", "walk_tb"), ("traceback", "extract_stack"),
    ("traceback", "format_stack"), ("traceback", "_walk_tb_with_full_positions"), ("inspect", "currentframe"),
    ("inspect", "stack"), ("inspect", "trace"), ("importlib._bootstrap_external", "_compile_bytecode"),
    ("types", "coroutine"),
})
#: the modules of :data:`SAFE_SITES` (top-level names).
_READERS = frozenset(m.partition(".")[0] for m, _ in SAFE_SITES)
#: stdlib module -> its functions that hand frames, or the caller's stack as names, back to their
#: caller: the candidate calling one of them is the candidate walking frames.
LEAKING = {
    "inspect": frozenset({"currentframe", "stack", "trace", "getouterframes", "getinnerframes"}),
    "traceback": frozenset({"walk_stack", "walk_tb", "extract_stack", "format_stack", "print_stack"}),
    "logging": frozenset({"<lambda>", "currentframe"}),
}
#: how many refused events a verification reports (the first ones).
MAX_REPORTED = 8
#: the start of the line each refusal also writes to the worker's log (stderr): read there when the
#: worker dies before a reply carries the report (a forged clock's ctypes callback whose frame read
#: was refused crashed its worker). Only the candidate's process writes that log, so a forged line
#: accuses only the candidate itself.
LOG_MARK = "kbv-frame-watch: refused "


#: the standard library's directory (its packages installed beside it excepted).
_STDLIB = os.path.join(os.path.realpath(os.path.dirname(os.__file__)), "")
_PACKAGES = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


class FrameWatch:
    """Made and installed in the worker before the candidate loads; :meth:`arm` at the load, with
    the candidate's file and the directories only its code is written to; :meth:`take` before each
    reply (``frame access: <event> at <file>:<line>`` per refused event, each once)."""

    def __init__(self) -> None:
        self._own: frozenset = frozenset()
        self._globals: dict | None = None
        self._roots: tuple = ()
        self._busy = threading.local()
        self._found: list[str] = []
        self._reported = 0

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def arm(self, candidate_path: str, roots: tuple[str, ...], module_globals: dict | None = None) -> None:
        """From now on, the candidate is the code of ``candidate_path`` and of ``module_globals`` (its
        module's namespace) and any file under ``roots``."""
        self._own = frozenset({candidate_path, os.path.realpath(candidate_path)})
        self._roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)
        self._globals = module_globals

    def take(self) -> list[str]:
        new = self._found[self._reported:MAX_REPORTED]
        self._reported = max(self._reported, min(len(self._found), MAX_REPORTED))
        return new

    def candidates_frame(self, frame: Any) -> bool:
        """Whether ``frame`` runs the candidate's code: its module's globals, its file or a file
        under its directories, code compiled from a string (not a frozen module), or globals that
        are no loaded module's namespace (a function the candidate made over a dict of its own)."""
        if not self._own:
            return False
        g = frame.f_globals
        if self._globals is not None and g is self._globals:
            return True
        filename = frame.f_code.co_filename
        if filename.startswith("<"):
            if not filename.startswith("<frozen"):
                return True
        elif filename in self._own or os.path.realpath(filename).startswith(self._roots):
            return True
        return _module_of(g) is None

    @staticmethod
    def stdlib_frame(frame: Any) -> str | None:
        """The stdlib module ``frame`` runs (its name), when both its file and
        its globals are that module's; else None (a library's frame, or code relabelled to look
        like the stdlib's)."""
        filename = os.path.realpath(frame.f_code.co_filename)
        if not filename.startswith(_STDLIB) or any(p in filename for p in _PACKAGES):
            return None
        module = _module_of(frame.f_globals)
        if module is None or os.path.realpath(getattr(module, "__file__", "") or "") != filename:
            return None
        return module.__name__

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
        try:  # also in the worker's log, which outlives it: a refusal inside a native callback kills it
            os.write(2, f"{LOG_MARK}{what} at {where}\n".encode(errors="replace"))
        except OSError:
            pass
        raise RuntimeError(f"kbv: {what} is refused in the candidate worker (its frames are the harness's)")

    def _culprit(self, frame: Any) -> str | None:
        """``file:line`` of the candidate's code that raised the event, directly or through the
        standard library, else None (see the module doc). A stack of stdlib frames only (a thread
        running a builtin the candidate handed a pool, ``sys._current_frames`` submitted to a
        ``ThreadPoolExecutor``: a red-team helper's PASS) is the candidate's unless the event was
        raised at one of :data:`SAFE_SITES`."""
        first = outer = None
        while frame is not None:
            module = self.stdlib_frame(frame)
            if module is None:
                break
            outer = (module, frame.f_code.co_name)
            first = first or (outer, f"{frame.f_code.co_filename}:{frame.f_lineno}")
            frame = frame.f_back
        # raised at a safe site, and entered through a function of a frame-reading module that hands
        # no frame back (heapq.merge driving traceback.walk_tb hands them back)
        safe = first is not None and first[0] in SAFE_SITES and outer[0].partition(".")[0] in _READERS \
            and outer[1] not in LEAKING.get(outer[0], ())
        if frame is None:
            return None if safe or first is None or not self._own else f"a thread of stdlib frames only, at {first[1]}"
        if safe or not self.candidates_frame(frame):
            return None
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _module_of(namespace: Any) -> Any:
    """The loaded module whose namespace ``namespace`` is, or None."""
    module = sys.modules.get(namespace.get("__name__")) if isinstance(namespace, dict) else None
    return module if module is not None and getattr(module, "__dict__", None) is namespace else None
