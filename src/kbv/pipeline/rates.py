"""The device's own rates, measured once per device, driver and torch and cached on disk
(``<cache>/bandwidth.json``): copy bandwidth (the roofline floor of :mod:`kbv.pipeline.roofline`).
Trusted side: the reference worker measures them with no candidate running."""

from __future__ import annotations

from typing import Callable

import torch

_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_cuda_sync = torch.cuda.synchronize


#: bytes copied per bandwidth trial: large against any L2 (the H200's is 60 MiB).
COPY_BYTES = 1 << 30
_BANDWIDTH: dict = {}


def _cached_rate(device: torch.device, what: str, measure: Callable[[], float]) -> float:
    import json

    from kbv.model.paths import cache_root
    from kbv.processes.host_environment import driver_version

    key = f"{what}|{torch.cuda.get_device_name(device)}|{driver_version()}|{torch.__version__}"
    if key in _BANDWIDTH:
        return _BANDWIDTH[key]
    path = cache_root() / "bandwidth.json"
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if key not in cached:
        cached[key] = measure()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cached, indent=1))
        except OSError:
            pass
    _BANDWIDTH[key] = float(cached[key])
    return _BANDWIDTH[key]


def _median_event_ms(device: torch.device, fn: Callable[[], object], reps: int = 12) -> float:
    times = []
    for i in range(reps):
        s, e = _Event(enable_timing=True), _Event(enable_timing=True)
        _event_record(s)
        fn()
        _event_record(e)
        _cuda_sync(device)
        if i >= 2:
            times.append(float(_event_elapsed(s, e)))
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth(device: torch.device | str) -> float:
    """Device-to-device copy bandwidth of ``device`` in bytes/s (bytes read + bytes written per
    second, median of 10 copies of up to 1 GiB timed with CUDA events).

    Measured once per device name, driver and torch version and cached in
    ``<kbv cache>/bandwidth.json`` (``$KBV_CACHE_DIR``, see :func:`kbv.model.paths.cache_root`),
    so the roofline floor of taxonomy entry 7 costs nothing after the first verification.

    Raises:
        ValueError: ``device`` is not a cuda device.
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError("copy_bandwidth needs a cuda device")

    def measure() -> float:
        n = min(COPY_BYTES, torch.cuda.mem_get_info(device)[0] // 8) // 4
        src = torch.ones(n, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        ms = _median_event_ms(device, lambda: dst.copy_(src))
        return 2 * n * 4 / (ms / 1e3)

    return _cached_rate(device, "copy", measure)
