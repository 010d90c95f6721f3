"""Whose handler the candidate worker's SIGSEGV and SIGBUS run: Python's ``faulthandler`` or another.

The trusted side reads the worker's caught signals from /proc (``SigCgt``,
:func:`kbv.processes.procfs.caught_signals`): a SIGSEGV or SIGBUS handler that was not there at
spawn is a lazy output's, memory that computes itself when the harness reads it (taxonomy 3,
HACK ``probe:fault-handler``). An honest candidate that calls ``faulthandler.enable()`` (Python's
crash traceback) installs one too. /proc does not say which handler it is; this module does, from
inside the worker: the handler's address, read with ``sigaction(2)``, against the address
``faulthandler.enable()`` installed while the worker started, before the candidate loaded.

That reading comes from the candidate's process, so it is a claim: it turns the HACK into a
WARNING (:func:`kbv.checks.worker_calls.fault_handlers`), never a finding into none. It does not
see what faulthandler chains to: a handler of the candidate's behind faulthandler's, which puts
faulthandler back in front after each fault it is forwarded, keeps the reading at faulthandler's
(a red-team helper's lazy matmul, 2026-12-06). Such an output still does its work inside the
clock: every page of every cpu output is read there (:func:`kbv.sandbox.timer.touch_pages`; that
lazy matmul got PASS at 0.15x, no faster than its work), and the bound pass copies the outputs
inside its trusted window.
"""

from __future__ import annotations

import signal
from typing import Any

#: bytes read for a ``struct sigaction`` (glibc's is 152 on x86_64 and aarch64); its first member is
#: the handler's address.
_SIGACTION_BYTES = 512

#: the signals a lazy output needs a handler for (as :data:`kbv.checks.worker_calls.FAULT_SIGNALS`).
_WATCHED = (signal.SIGSEGV, signal.SIGBUS)


class FaultHandlerWatch:
    """Made in the worker before the candidate loads; :meth:`faulthandler_only` before each reply.

    Where ctypes, libc's ``sigaction`` or ``faulthandler`` cannot be used, or faulthandler is already
    on at start, there is no reference address and :meth:`faulthandler_only` is False (the trusted
    side's HACK stands). Never raises.
    """

    def __init__(self) -> None:
        self._address: int | None = None
        self._read: Any = None
        try:
            import ctypes
            import faulthandler

            libc = ctypes.CDLL(None, use_errno=True)
            buf = ctypes.create_string_buffer(_SIGACTION_BYTES)

            def read(sig: int) -> int | None:
                if libc.sigaction(int(sig), None, buf) != 0:
                    return None
                return ctypes.c_void_p.from_buffer(buf).value

            if faulthandler.is_enabled():
                return
            before = [read(s) for s in _WATCHED]
            faulthandler.enable()
            try:
                installed = [read(s) for s in _WATCHED]
            finally:
                faulthandler.disable()
            address = installed[0]
            if address and installed == [address] * len(_WATCHED) and address not in before \
                    and [read(s) for s in _WATCHED] == before:
                self._address, self._read = address, read
        except Exception:  # noqa: BLE001 - no ctypes or libc here: no reference
            self._address = None

    def faulthandler_only(self) -> bool:
        """True when the SIGSEGV and SIGBUS handlers are both the one ``faulthandler.enable()`` installs."""
        try:
            return self._address is not None and all(self._read(s) == self._address for s in _WATCHED)
        except Exception:  # noqa: BLE001
            return False
