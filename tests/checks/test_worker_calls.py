"""kbv.checks.worker_calls.device_capacity_oom: a candidate's out-of-memory failure on a device that
cannot hold both workers is kbv's (the problem does not fit), never the candidate's; one over kbv's
bound, or on a device with room left, stays the candidate's."""

from __future__ import annotations

import types

import pytest
import torch

from kbv.checks.worker_calls import device_capacity_oom, kept_output_bytes, staged_timing_bytes
from kbv.pipeline import context as ctx_mod
from kbv.pipeline.outcome import Outcome, Stop

GIB = 1 << 30


def test_the_h100_full_size_case_is_the_devices_capacity():
    """The measured case: a 6 GiB elementwise problem (B = 12 GiB, bound 49 GiB) on an 80 GB H100,
    the reference worker at 37 GiB, 2.4 GiB free."""
    why = device_capacity_oom(int(2.4 * GIB), 79 * GIB, 37 * GIB, 0, 12 * GIB, 49 * GIB)
    assert why is not None and "at most 39.6 GiB" in why and "bound of 49.0 GiB" in why


def test_room_left_or_a_candidate_over_the_bound_keeps_the_candidates_failure():
    assert device_capacity_oom(20 * GIB, 139 * GIB, 37 * GIB, 0, 12 * GIB, 49 * GIB) is None  # room left: its own
    assert device_capacity_oom(1 * GIB, 139 * GIB, 37 * GIB, 0, 12 * GIB, 49 * GIB) is None  # it held 101 GiB
    # another user's memory is not the candidate's: counted out before the bound
    assert device_capacity_oom(1 * GIB, 139 * GIB, 37 * GIB, 60 * GIB, 12 * GIB, 49 * GIB) is not None
    assert device_capacity_oom(0, 0, 0, 0, 12 * GIB, 49 * GIB) is None  # no reading
    assert device_capacity_oom(0, 79 * GIB, 37 * GIB, 0, 0, GIB) is None  # no size known


def test_kbvs_own_timing_buffers_in_the_candidate_worker_are_not_charged_to_it():
    """The measured case (full size, H100, fifteenth session): KernelBench-Verified's conv2d, I = 1 GiB,
    O = 7.97 GiB (B = 9 GiB, bound 37 GiB); two timing sets, one 16 GiB slot, the earlier output kept:
    about 28 GiB of the candidate worker's memory is kbv's, and the honest candidate's own output did
    not fit beside it."""
    i, o = GIB, int(7.97 * GIB)
    staged = staged_timing_bytes(i, 2, 2, 2 * o) + kept_output_bytes(o, 128 << 20)
    assert staged == 4 * i + 3 * o + (128 << 20)
    bound = 4 * (i + o) + GIB
    # 7 GiB free, the reference worker at 26 GiB: the tree held 46 GiB, over the bound with kbv's share in it
    args = (7 * GIB, 79 * GIB, 26 * GIB, 0, i + o, bound)
    assert device_capacity_oom(*args) is None
    why = device_capacity_oom(*args, staged)
    assert why is not None and "of them kbv's timing buffers" in why
    # a candidate whose own allocations are over the bound keeps its failure with kbv's share taken off
    assert device_capacity_oom(int(0.5 * GIB), 139 * GIB, 26 * GIB, 0, i + o, bound, staged) is None
    assert kept_output_bytes(-1, 0) == 0  # no reference output size known
    assert staged_timing_bytes(i, 2, 0, 0) == 2 * i  # the bound pass's shared sets serve as call buffers


def test_kbvs_share_is_at_most_what_the_tree_grew_since_staging_began():
    """A failure inside the staging request itself: the buffers planned were not made, so a
    candidate over its bound before kbv staged anything keeps its failure (red-team helper): a 6 GiB
    elementwise problem on 80 GiB, the candidate at 38 GiB before staging, the reference at 40."""
    args = (2 * GIB, 80 * GIB, 40 * GIB, 0, 12 * GIB, 25 * GIB, 18 * GIB)
    assert device_capacity_oom(*args) is not None  # the planned share taken whole
    assert device_capacity_oom(*args, held_before_staging=38 * GIB) is None  # nothing made yet
    assert device_capacity_oom(*args, held_before_staging=20 * GIB) is not None  # 18 GiB made


def test_once_the_staging_reply_came_back_kbvs_share_is_all_it_staged():
    """The measured case (KernelBench-Verified's full-size MSE loss, B = 8 GiB, on an 80 GB H100,
    eighteenth session): the staging reused 33.6 GB of blocks the candidate's allocator kept from
    the correctness calls, so the tree grew 3.9 GB for 34.4 GB staged; the honest candidate's 4 GiB
    intermediate then failed with 0.76 GB free. The growth cap charged it 37.5 GB of its own, over
    the 33 GiB bound: a RUNTIME_ERROR. With the staging's reply back, the share is whole."""
    args = (760_676_352, 85_017_493_504, 42_817_552_384, 0, 8_589_934_596, 35_433_480_208, 34_359_742_720)
    before = 37_542_756_352
    assert device_capacity_oom(*args, held_before_staging=before) is None  # a failure inside the staging
    why = device_capacity_oom(*args, held_before_staging=before, staging_done=True)
    assert why is not None and "34.4 GiB" not in why and "32.0 GiB of them kbv's" in why
    # a candidate over the bound with the whole share taken off still keeps its failure
    assert device_capacity_oom(760_676_352, 139 * GIB, 42 * GIB, 0, 8 * GIB, 33 * GIB, 32 * GIB,
                               held_before_staging=before, staging_done=True) is None


def _ctx(monkeypatch, free, total, reserved, staged=0):
    monkeypatch.setattr(ctx_mod.fp, "device_memory", lambda device: (free, total, reserved))
    rp = types.SimpleNamespace(device=torch.device("cuda", 0), output_bytes=6 * GIB)
    return types.SimpleNamespace(rp=rp, _input_bytes=6 * GIB, name="c.py",
                                 state=types.SimpleNamespace(evidence={}, input_sets=[]), _staged_bytes=staged,
                                 _held_before_staging=None, _staging_done=False)


def test_the_context_ends_the_verification_as_kbvs_failure_only_where_the_rule_says(monkeypatch):
    c = _ctx(monkeypatch, int(2.4 * GIB), 79 * GIB, 37 * GIB)
    with pytest.raises(Stop) as stop:
        ctx_mod.Context._device_capacity(c)
    assert stop.value.outcome is Outcome.KBV_FAILED and "does not fit this machine" in stop.value.message
    assert c.state.evidence["device_capacity"]["reference_reserved_bytes"] == 37 * GIB
    room = _ctx(monkeypatch, 30 * GIB, 139 * GIB, 37 * GIB)
    ctx_mod.Context._device_capacity(room)  # room left: no stop
    # the figures are kept where the failure stays the candidate's too (full size, H100: a conv's
    # RUNTIME_ERROR whose verdict could not say what the device held)
    kept = room.state.evidence["device_capacity"]
    assert kept["does_not_fit"] is False and kept["free_bytes"] == 30 * GIB
    assert kept["candidate_at_most_bytes"] == 72 * GIB and kept["bound_bytes"] == 4 * 12 * GIB + GIB
    assert c.state.evidence["device_capacity"]["does_not_fit"] is True
    # kbv's timing buffers in the candidate worker are counted out before the bound, and kept
    staged = _ctx(monkeypatch, int(2.4 * GIB), 79 * GIB, 10 * GIB, staged=20 * GIB)
    with pytest.raises(Stop):
        ctx_mod.Context._device_capacity(staged)
    assert staged.state.evidence["device_capacity"]["staged_bytes"] == 20 * GIB
    # the growth cap applies only until the staging's reply came back whole
    capped = _ctx(monkeypatch, int(2.4 * GIB), 79 * GIB, 10 * GIB, staged=20 * GIB)
    capped._held_before_staging = 60 * GIB
    ctx_mod.Context._device_capacity(capped)
    assert capped.state.evidence["device_capacity"]["does_not_fit"] is False
    capped._staging_done = True
    with pytest.raises(Stop):
        ctx_mod.Context._device_capacity(capped)
    assert capped.state.evidence["device_capacity"]["staging_done"] is True
    unstaged = _ctx(monkeypatch, int(2.4 * GIB), 79 * GIB, 10 * GIB)
    ctx_mod.Context._device_capacity(unstaged)  # the same tree, none of it kbv's: over the bound, its own
    assert unstaged.state.evidence["device_capacity"]["does_not_fit"] is False
    # a candidate wrong on a set already keeps its failure: no excuse drops a wrong kernel from the metrics
    wrong = _ctx(monkeypatch, int(2.4 * GIB), 79 * GIB, 37 * GIB)
    wrong.state.input_sets = [types.SimpleNamespace(passed=True), types.SimpleNamespace(passed=False)]
    ctx_mod.Context._device_capacity(wrong)
    assert wrong.state.evidence["device_capacity"]["wrong_already"] is True
    assert device_capacity_oom(int(2.4 * GIB), 79 * GIB, 37 * GIB, 0, 12 * GIB, 49 * GIB, wrong_already=True) is None
    cpu = _ctx(monkeypatch, 0, 79 * GIB, 37 * GIB)
    cpu.rp.device = torch.device("cpu")
    ctx_mod.Context._device_capacity(cpu)  # cpu: the candidate's failure stands


def test_the_kept_output_counts_as_kbvs_only_once_a_timed_call_has_returned():
    """Before the first timed reply the worker keeps no earlier output: an out-of-memory failure on
    that call is not credited with one (red-team helper, sixteenth session)."""
    from kbv.sandbox import protocol

    c = types.SimpleNamespace(_staged_bytes=4 * GIB, _staged_kept=9 * GIB, name="c.py", _reused_reported=False,
                              _memory_reported=False, _slots=torch.zeros(64, dtype=torch.uint8), _slot_bytes=64)
    with pytest.raises(Stop):  # a malformed reply adds nothing
        ctx_mod.Context._timed_reply(c, object())
    assert (c._staged_bytes, c._staged_kept) == (4 * GIB, 9 * GIB)
    ctx_mod.Context._timed_reply(c, protocol.CallTimed(time_ms=1.0, clock="cuda-event", outputs=()))
    assert (c._staged_bytes, c._staged_kept) == (13 * GIB, 0)
    ctx_mod.Context._timed_reply(c, protocol.CallTimed(time_ms=1.0, clock="cuda-event", outputs=()))
    assert c._staged_bytes == 13 * GIB  # once


def test_the_reference_workers_own_failure_on_a_full_device_is_the_devices_capacity():
    """The measured case (KernelBench-Verified's full-size MSE loss, B = 8 GiB, bound 33 GiB, on an
    80 GB H100, eighteenth session): the reference worker's 4 GiB allocation failed with 2.67 GiB
    free, the reference at 33.6 GiB reserved (32.0 GiB peak in use), the candidate worker at 38.3
    GiB, 32 GiB of it kbv's timing buffers. Before, a bare "kbv ran out of memory"."""
    from kbv.checks.worker_calls import trusted_oom_does_not_fit

    args = dict(free_bytes=int(2.67 * GIB), total_bytes=int(79.18 * GIB), reference_reserved_bytes=int(33.6 * GIB),
                reference_need_bytes=32 * GIB, call_bytes=8 * GIB, bound_bytes=33 * GIB)
    why = trusted_oom_does_not_fit(**args, staged_bytes=32 * GIB)
    assert why is not None and "within kbv's bound of 33.0 GiB" in why and "32.0 GiB of them kbv's" in why
    # the candidate's tree over the bound without kbv's share: not called a fit (it may have filled the device)
    assert trusted_oom_does_not_fit(**args) is None
    # the reference worker over its own bound: kbv's excess, not the device's size
    assert trusted_oom_does_not_fit(**{**args, "reference_need_bytes": 34 * GIB}, staged_bytes=32 * GIB) is None
    # room left on the device: not its capacity
    assert trusted_oom_does_not_fit(**{**args, "free_bytes": 9 * GIB}, staged_bytes=32 * GIB) is None
    assert trusted_oom_does_not_fit(**{**args, "total_bytes": 0}, staged_bytes=32 * GIB) is None


def test_the_context_reads_the_reference_failure_as_the_device_left_it(monkeypatch):
    c = _ctx(monkeypatch, int(2.67 * GIB), int(79.18 * GIB), int(33.6 * GIB), staged=32 * GIB)
    c.rp.output_bytes = 0
    c._input_bytes = 8 * GIB
    c._staging_done = True
    monkeypatch.setattr(ctx_mod.fp, "process_peak_bytes", lambda device: 32 * GIB)
    monkeypatch.setattr(ctx_mod.fp, "allocated_bytes", lambda device: 28 * GIB)
    released = []
    monkeypatch.setattr(ctx_mod.fp, "release_device_cache", lambda device: released.append(device))
    oom = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has ...")
    why = ctx_mod.Context._trusted_oom_fit(c, oom)
    assert why is not None and "within kbv's bound" in why and released == []  # no release before the reading
    kept = c.state.evidence["trusted_oom"]
    assert kept["does_not_fit"] is True and kept["reference_need_bytes"] == 32 * GIB
    # in use at the failure plus the failed request over the bound: kbv's own excess (red-team helper)
    big = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 10.00 GiB. GPU 0 ...")
    assert ctx_mod.Context._trusted_oom_fit(c, big) is None
    assert c.state.evidence["trusted_oom"]["reference_need_bytes"] == 38 * GIB
    # before the staging's reply kbv's planned buffers may not exist: not taken off the candidate's
    c._staging_done = False
    assert ctx_mod.Context._trusted_oom_fit(c, oom) is None
    assert c.state.evidence["trusted_oom"]["staged_bytes"] == 0
    c._staging_done = True
    monkeypatch.setattr(ctx_mod.fp, "process_peak_bytes", lambda device: 40 * GIB)
    assert ctx_mod.Context._trusted_oom_fit(c, oom) is None  # over kbv's own bound: said as kbv's memory failure
    monkeypatch.setattr(ctx_mod.fp, "process_peak_bytes", lambda device: 32 * GIB)
    # a host allocation's failure is not the device's capacity
    assert ctx_mod.Context._trusted_oom_fit(c, MemoryError()) is None
    assert ctx_mod.Context._trusted_oom_fit(c, RuntimeError("DefaultCPUAllocator: can't allocate memory")) is None
    assert ctx_mod.Context._trusted_oom_fit(c, RuntimeError("CUBLAS_STATUS_ALLOC_FAILED")) is not None
    c.rp.device = torch.device("cpu")
    assert ctx_mod.Context._trusted_oom_fit(c, oom) is None


def test_the_failed_requests_size_is_read_from_the_allocators_message():
    from kbv.processes.footprint import requested_bytes

    assert requested_bytes(RuntimeError("CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0")) == 4 * GIB
    assert requested_bytes(RuntimeError("Tried to allocate 512.00 MiB")) == 512 << 20
    assert requested_bytes(RuntimeError("CUBLAS_STATUS_ALLOC_FAILED")) == 0


def test_a_triton_candidate_on_cpu_without_the_interpreter_is_told_the_setting():
    from kbv.checks.worker_calls import triton_cpu_hint

    msg = "RuntimeError: 0 active drivers ([]). There should only be one."
    assert "TRITON_INTERPRET=1" in triton_cpu_hint("cpu", "triton", msg, interpreted=False)
    assert triton_cpu_hint("cpu", "triton", msg, interpreted=True) == ""
    assert triton_cpu_hint("cuda", "triton", msg, interpreted=False) == ""
    assert triton_cpu_hint("cpu", "cuda", msg, interpreted=False) == ""
    assert triton_cpu_hint("cpu", "triton", "shape mismatch", interpreted=False) == ""
