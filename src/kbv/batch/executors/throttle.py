"""GPU clock throttling seen while a lane verifies a job (nvidia-ml-py; nothing on cpu).

A thread samples the lane GPU's clock-event reasons (``nvmlDeviceGetCurrentClocksEventReasons``,
formerly "throttle reasons") every :data:`SAMPLE_S` seconds while a job runs. Reasons that slow
the clock for reasons other than idling or the application's own clock setting (hardware
slowdown, thermal and power brake slowdowns, software thermal and power caps) are *throttling*;
:func:`kbv.batch.runner.run_batch` records them in the verdict's ``evidence["gpu_throttle"]`` and prints a
warning. The samples are per job, not per timed call: a throttled job's speedups are flagged, and
the timing loop itself (kbv.sandbox.timer) would be where single samples are rejected.
"""

from __future__ import annotations

import threading
import time

SAMPLE_S = 0.05

#: NVML clock-event reason bits (nvml.h ``nvmlClocksEventReason*``) that count as throttling.
THROTTLE_BITS = {
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
}


def throttle_reasons(mask: int) -> list[str]:
    """Names of the throttling reasons set in an NVML clock-event reason ``mask``."""
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


class ThrottleWatch:
    """Samples one GPU's clock-event reasons in a thread between :meth:`start` and :meth:`stop`.

    Args:
        visible: the lane's ``CUDA_VISIBLE_DEVICES`` entry (an index in PCI bus order, as the lane
            sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, or a ``GPU-<uuid>``).
    Without nvidia-ml-py, or when NVML cannot open the GPU, it samples nothing and
    :meth:`stop` returns None.
    """

    def __init__(self, visible: str):
        self._nvml = self._handle = None
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self._nvml = pynvml
            if visible.startswith("GPU-"):
                self._handle = pynvml.nvmlDeviceGetHandleByUUID(visible)
            else:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(int(visible))
        except Exception:  # noqa: BLE001 - no NVML: nothing to watch
            self._handle = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _reasons(self) -> int:
        n = self._nvml
        fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(fn(self._handle))

    def start(self) -> None:
        """Begin sampling (a no-op without NVML)."""
        self._seen: dict[str, int] = {}
        self._samples = 0
        if self._handle is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kbv-throttle", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                mask = self._reasons()
            except Exception:  # noqa: BLE001 - the GPU went away: stop sampling
                return
            self._samples += 1
            for name in throttle_reasons(mask):
                self._seen[name] = self._seen.get(name, 0) + 1

    def stop(self) -> dict | None:
        """End sampling. Returns ``{"samples": n, "throttled": {reason: samples}}`` (``throttled``
        empty when the clock was never throttled), or None without NVML."""
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        return {"samples": self._samples, "interval_s": SAMPLE_S, "throttled": dict(self._seen)}


__all__ = ["ThrottleWatch", "throttle_reasons", "THROTTLE_BITS", "SAMPLE_S"]
