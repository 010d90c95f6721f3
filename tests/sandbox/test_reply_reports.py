"""kbv.sandbox.reply_reports: the reports a reply carries, and the light check of a deferred request."""

from __future__ import annotations

import types

from kbv.sandbox import protocol
from kbv.sandbox.guard import HarnessGuard
from kbv.sandbox.reply_reports import ReplyReports


def _module(name: str) -> types.ModuleType:
    m = types.ModuleType(name)
    exec("def run(x):\n    return x + 1\n", vars(m))
    return m


def test_a_check_of_some_labels_restores_only_those_and_the_whole_check_the_rest():
    """``check(only=...)`` (the bound pass's reply) puts back the entries it names; an entry it
    leaves is still found, reported and put back by the next whole check."""
    reply_side, loop_side = _module("kbv_probe.protocol_side"), _module("kbv_probe.loop_side")
    guard = HarnessGuard([reply_side, loop_side])
    original_reply, original_loop = reply_side.run, loop_side.run
    reply_side.run = lambda x: x
    loop_side.run = lambda x: x
    assert guard.check(only=("protocol",)) == ["kbv_probe.protocol_side.run"]
    assert reply_side.run is original_reply and loop_side.run is not original_loop
    assert guard.check() == ["kbv_probe.loop_side.run"]
    assert loop_side.run is original_loop and guard.check() == []


class _Server(ReplyReports):
    """The fields of the worker's server the reports read, with a real guard over two modules."""

    protocol = protocol

    def __init__(self, guard):
        self.guard, self._held = guard, ()


def test_a_deferred_reply_carries_the_reply_path_and_the_next_reply_the_rest():
    """The bound pass's reply (``Time.defer_checks``) puts back and reports the reply path alone;
    a harness function the candidate replaced elsewhere is reported with the next reply that has
    reports, not lost."""
    reply_side, loop_side = _module("kbv_probe2.protocol"), _module("kbv_probe2.timed")
    server = _Server(HarnessGuard([reply_side, loop_side]))
    reply_side.run = lambda x: x
    loop_side.run = lambda x: x
    deferred = server._with_reply_path(protocol.Times(times_ms=(1.0,), clock="perf_counter"))
    assert [t.detail for t in deferred.tampering] == ["kbv_probe2.protocol.run"]
    assert deferred.tampering[0].kind == protocol.REPLY_PATH_PATCHED
    full = ReplyReports._tampering  # the next reply's whole check (the parts it needs are stubbed below)
    server.timing = types.SimpleNamespace(captured_changed=lambda: ())
    server._modes = types.SimpleNamespace(take=lambda: ())
    server._tensor_class = types.SimpleNamespace(check=lambda: ())
    server._frames = types.SimpleNamespace(take=lambda: ())
    server._new_op_kernels = lambda full: ()
    server.writes, server._reported_writes = [], 0
    later = full(server)
    assert [t.detail for t in later] == ["kbv_probe2.timed.run"]
    assert later[0].kind == protocol.HARNESS_PATCHED


def test_the_deferred_check_covers_kbvs_own_pickler():
    """Regression (red-team helper, 2026-12-06): ``MessagePickler.reducer_override`` was outside the
    reply path's labels, so a patch there, made during the bound pass, pickled the deferred reply
    (and could drop the reports it carried)."""
    from kbv.sandbox import pickling

    server = _Server(HarnessGuard([pickling]))
    original = pickling.MessagePickler.reducer_override
    pickling.MessagePickler.reducer_override = lambda self, obj: NotImplemented
    try:
        reply = server._with_reply_path(protocol.Times(times_ms=(1.0,), clock="perf_counter"))
    finally:
        patched_left = pickling.MessagePickler.reducer_override is not original
        pickling.MessagePickler.reducer_override = original
    assert not patched_left
    assert any("MessagePickler.reducer_override" in t.detail and t.kind == protocol.REPLY_PATH_PATCHED
               for t in reply.tampering)


def test_the_deferred_check_puts_the_servers_protocol_back_before_using_it():
    """The server's ``protocol`` (``worker.protocol`` in the guard) is read only once the reply
    path's check put it back: a stand-in set by the candidate never makes the reports."""
    import types as _types

    server = _Server(None)
    server.guard = HarnessGuard([], [(server, "protocol", "worker.protocol")])
    server.protocol = _types.SimpleNamespace()  # no Tampering, no reducers_patched: used, it would raise
    reply = server._with_reply_path(protocol.Times(times_ms=(1.0,), clock="perf_counter"))
    assert server.protocol is protocol
    assert [t.detail for t in reply.tampering] == ["worker.protocol"]
