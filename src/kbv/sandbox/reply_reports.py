"""What the candidate worker reports with each reply (the mixin :class:`ReplyReports` of
:class:`kbv.sandbox.worker._Server`): the harness objects the candidate replaced (each put back), the
kernels it registered for torch's ops, its writes outside the sandbox, the frames it asked for,
and whose SIGSEGV/SIGBUS handlers run. Gathered after every request, before its reply is pickled,
so the reply goes out through unpatched code."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

#: a harness label naming one of these is on the reply path (the pipe's send functions, the
#: protocol's pickling, kbv.sandbox.pickling's pickler and reducers): patching it touches the reply
#: channel (taxonomy 24). The bound pass's deferred reply checks these alone (a red-team helper found
#: ``MessagePickler.reducer_override`` outside the first list: a patch there could drop the reports
#: held for that reply).
_REPLY_PATH = ("protocol", "Connection", "ForkingPickler", "pickling")


@functools.cache
def _method_names(klass: type) -> frozenset:
    """Every method of the server class (its own and its mixins'), which no instance attribute may
    shadow (:meth:`ReplyReports._tampering`)."""
    return frozenset(k for c in klass.__mro__ if c is not object for k, v in vars(c).items() if callable(v))


class ReplyReports:
    """The server's reports (its ``guard``, ``timing``, ``_modes``, ``_tensor_class``, ``_frames``,
    ``_faults``, ``writes`` and ``_held`` are the server's own)."""

    def _tampering(self, full: bool = False) -> tuple:
        """:class:`kbv.sandbox.protocol.Tampering` reports: harness objects the candidate replaced
        since load (taxonomy 4; 24 when they carry replies), each put back, kernels registered for
        torch's ops (``full``: the whole dispatcher read, else the light one of the harness's own
        ops), and new writes outside the sandbox (taxonomy 26)."""
        # an instance attribute named like one of the server's methods shadows it for every later
        # self.<name> call (the request loop's own handlers are bound at its start): dropped here
        shadows = [k for k in list(vars(self)) if k in _method_names(type(self))]
        for k in shadows:
            del self.__dict__[k]
        names = [*self.timing.captured_changed(), *self.guard.check(), *(f"worker.{k} (shadowed)" for k in shadows),
                 *self._modes.take(), *self._tensor_class.check()]
        p = self.protocol  # after the guard put it back
        found = [p.Tampering(p.REPLY_PATH_PATCHED if any(k in n for k in _REPLY_PATH) else p.HARNESS_PATCHED, n)
                 for n in names]
        found += [p.Tampering(p.REPLY_PATH_PATCHED, what) for what in p.reducers_patched()]
        found += [p.Tampering(p.FRAME_ACCESS, what) for what in self._frames.take()]
        found += [p.Tampering(p.HARNESS_PATCHED, what) for what in self._new_op_kernels(full)]
        new = self.writes[self._reported_writes:]
        self._reported_writes = len(self.writes)
        found += [p.Tampering(p.SANDBOX_WRITE, w) for w in new]
        return tuple(dict.fromkeys(found))

    def _with_reply_path(self, reply: Any) -> Any:
        """``reply`` after the light check of a request whose checks are deferred
        (:attr:`kbv.sandbox.protocol.Time.defer_checks`, the bound pass: the trusted side's clock holds
        the whole request, and the full check costs milliseconds): the reply path alone is put back
        and reported (the harness entries that pickle and send it, the pickling reducers), so the
        reply still goes out through unpatched code, with the reports held until now; everything
        else is checked, put back and reported with the next reply that carries reports (after the
        bound pass the sync pass's requests do: kbv.pipeline.timing_rounds)."""
        names = self.guard.check(only=_REPLY_PATH)
        p = self.protocol  # after the guard put it back (worker.protocol is on the reply path)
        found = [p.Tampering(p.REPLY_PATH_PATCHED, n) for n in names]
        found += [p.Tampering(p.REPLY_PATH_PATCHED, what) for what in p.reducers_patched()]
        pending = tuple(dict.fromkeys(self._held + tuple(found)))
        if pending and hasattr(reply, "tampering"):
            reply = dataclasses.replace(reply, tampering=tuple(reply.tampering) + pending)
            pending = ()
        self._held = pending
        return reply

    def _with_reports(self, reply: Any, full: bool) -> Any:
        """``reply`` with the reports gathered now (:meth:`_tampering`) and those held back, and the
        fault-handler reading; a reply without report fields (``Pong``) leaves them to the next one
        that has them. ``full``: the whole dispatcher read."""
        pending = self._held + ReplyReports._tampering(self, full)
        if hasattr(reply, "tampering"):
            reply = dataclasses.replace(reply, tampering=tuple(reply.tampering) + pending,
                                        faulthandler=self._faults.faulthandler_only())
            pending = ()
        self._held = pending
        return reply
