"""kbv.sandbox.kernels: the device time per profiled call with overlapping activities counted once
(``KernelProfile.busy_us``, the CUPTI figure that kbv.checks.cupti_rules sets beside the timed events)."""

from __future__ import annotations

from kbv.sandbox.kernels import _DeviceEvent, _summarise


def test_kernels_on_two_streams_that_overlap_count_once():
    devices = [_DeviceEvent("a", 10_000, 1, 0, start=0),        # [0, 10] µs
               _DeviceEvent("b", 10_000, 2, 0, start=5_000),    # [5, 15] on another stream: 5 µs overlap
               _DeviceEvent("c", 4_000, 3, 0, start=20_000)]    # [20, 24]
    p = _summarise([], [], devices, repeats=1)
    assert p.total_us == 24.0  # each kernel's own time
    assert p.busy_us == 19.0   # the union
    assert _summarise([], [], devices, repeats=2).busy_us == 9.5  # per call


def test_without_start_times_there_is_no_busy_figure():
    p = _summarise([], [], [_DeviceEvent("a", 10_000, 1, 0)], repeats=1)
    assert p.total_us == 10.0 and p.busy_us is None
    assert _summarise([], [], [], repeats=1).busy_us == 0.0  # nothing ran
