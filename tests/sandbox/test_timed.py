"""kbv.sandbox.timed: what runs between a timed call's clock stop and its outputs' copy."""

from __future__ import annotations

import weakref

import torch

from kbv.sandbox import protocol, timer
from kbv.sandbox.torch_state import ModeShield
from kbv.sandbox.timed import TimedRequests


class _Server(TimedRequests):
    """The parts of the candidate worker's server that the timing handlers use, on cpu."""

    torch = torch
    protocol = protocol
    device = torch.device("cpu")
    pointers = None

    def __init__(self, model):
        self.model = model
        self._call_inputs = timer.call_inputs
        self._one_call = timer.one_call
        self._thread_time = timer._thread_time
        self._time_calls = timer.time_calls
        self.timing = timer
        self._modes = ModeShield(torch)

    def _own(self, s):
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in s]

    def _sync(self):
        pass

    def _check_flags(self):
        return ()

    def _tampering(self):
        return ()


class _Recorder(torch.nn.Module):
    """A ReLU that notes, when the worker drops one of its earlier outputs, how many copies into the
    slots had happened by then."""

    def __init__(self, events: list):
        super().__init__()
        self.events = events
        self.outs: list = []

    def forward(self, x):
        out = torch.relu(x)
        self.outs.append(weakref.ref(out, lambda _r: self.events.append("released")))
        return out


def test_earlier_outputs_are_released_only_after_the_current_ones_are_copied_out():
    """A weakref callback of the candidate's, fired by the worker dropping an earlier output, runs
    after the current call's outputs are in the slots (it could otherwise finish them after the
    clock: row t04-release-callback-finish). hold_bytes 0: each call drops the one before last."""
    events: list = []
    server = _Server(_Recorder(events))
    sets = [[torch.randn(64, 32)], [torch.randn(64, 32)]]
    server.set_timing_inputs(protocol.SetTimingInputs(tuple(tuple(s) for s in sets), 64 * 32 * 4, 1, hold_bytes=0))
    copy = server._slots.copy

    def noted(tensors, slot):
        events.append("copied")
        return copy(tensors, slot)

    server._slots.copy = noted
    for i in range(4):
        reply = server.timed_call(protocol.TimedCall(set_index=i % 2))
        assert isinstance(reply, protocol.CallTimed) and not reply.reused
    assert events.count("copied") == 4 and "released" in events
    # every release follows the copy of the call that caused it
    assert events == ["copied", "copied", "released", "copied", "released", "copied", "released"]


class _VersionCache(torch.nn.Module):
    """Caches its answer by (tensor, ``_version``): honest under PyTorch's rule that a tensor's
    values change only with its version."""

    def __init__(self):
        super().__init__()
        self.cache: dict = {}

    def forward(self, x):
        key = (id(x), x._version)
        if key not in self.cache:
            self.cache[key] = torch.relu(x)
        return self.cache[key]


def test_bound_pass_inputs_written_by_the_trusted_side_get_a_new_version():
    """The bound pass's sets are written by the trusted process through shared memory, past the
    worker's version counters; each bound request bumps them, so a version-keyed cache recomputes
    on the new values (row t11-cache-by-ptr-version was HACK in 1 of 2 full-suite runs)."""
    server = _Server(_VersionCache())
    sets = [[torch.randn(64, 32)], [torch.randn(64, 32)]]
    server.set_timing_inputs(protocol.SetTimingInputs(tuple(tuple(s) for s in sets), 64 * 32 * 4, 2, hold_bytes=0))
    bound = [[torch.randn(64, 32)] for _ in range(2)]
    server.set_bound_inputs(protocol.SetBoundInputs(tuple(tuple(s) for s in bound)))
    request = protocol.Time(0, 2, None, 0, refresh=False, slots=True, defer_checks=True, bound_inputs=True)
    server.time(request)
    for s in bound:  # the trusted side writes the next pass's values (no version change in this process)
        s[0].data.copy_(torch.randn(64, 32))
    before = [s[0]._version for s in bound]
    reply = server.time(request)
    assert [s[0]._version for s in bound] == [v + 1 for v in before]
    for i, s in enumerate(bound):
        (got,) = timer_view(server, reply, i)
        assert torch.equal(got, torch.relu(s[0]))


def timer_view(server, reply, i):
    from kbv.sandbox import rawcopy

    return rawcopy.view(server._slots.buffer, reply.outputs[i])


def test_shutdown_releases_every_tensor_the_trusted_side_sent():
    """On cuda the sets come by CUDA IPC, and a block a killed receiver held is never freed in the
    sender (the reference worker's device memory grew job after job, seventh session's H100 run):
    the worker drops them all on Shutdown."""
    import weakref
    from types import SimpleNamespace

    import torch

    from kbv.sandbox.worker import _Server

    sent = torch.ones(8)
    gone = weakref.ref(sent)
    srv = SimpleNamespace(bound_sets=[[sent]], _call_buffers=[[sent]], timing_sets=[[sent]], last_args=[sent],
                          device=torch.device("cpu"), torch=torch)
    del sent
    _Server.release_shared(srv)
    assert gone() is None
    assert srv.bound_sets == [] and srv._call_buffers == [] and srv.timing_sets == [] and srv.last_args is None
