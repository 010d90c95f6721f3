"""Timing and memory measurements: raw per-call samples, statistics derived on demand. No torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: IQR / median above which a measurement is marked too noisy to rank (torch.utils.benchmark
#: warns at 10 %, see ``torch/utils/benchmark/utils/common.py``).
NOISY_IQR_FRACTION = 0.10


@dataclass(frozen=True)
class Measurement:
    """Raw per-call times of one timed subject, with statistics derived on demand.

    ``times_ms`` are device times from CUDA events (cuda) or ``time.perf_counter`` (cpu), one per
    timed call, each preceded by an L2 flush on CUDA.
    """

    label: str  #: ``candidate``, ``eager-fp32``, ``eager-tf32``, ``compile``.
    device: str  #: ``cpu`` or ``cuda``.
    times_ms: tuple[float, ...]
    warmup: int  #: untimed calls made first.
    l2_flush_bytes: int | None = None  #: size of the buffer written before every call (None on cpu).
    clock: str = "cuda-event"  #: ``cuda-event`` or ``perf_counter``.

    def __post_init__(self) -> None:
        if not self.times_ms:
            raise ValueError(f"measurement {self.label}: no samples")
        bad = [t for t in self.times_ms if not (math.isfinite(t) and t > 0)]
        if bad:
            raise ValueError(f"measurement {self.label}: non-positive or non-finite times {bad[:3]}")

    @property
    def trials(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return float(np.median(self.times_ms))

    @property
    def q1_ms(self) -> float:
        return float(np.percentile(self.times_ms, 25))

    @property
    def q3_ms(self) -> float:
        return float(np.percentile(self.times_ms, 75))

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.times_ms))

    @property
    def std_ms(self) -> float:
        return float(np.std(self.times_ms))

    @property
    def min_ms(self) -> float:
        return float(np.min(self.times_ms))

    @property
    def max_ms(self) -> float:
        return float(np.max(self.times_ms))

    @property
    def noisy(self) -> bool:
        """IQR above :data:`NOISY_IQR_FRACTION` of the median: too noisy to rank."""
        return self.iqr_ms > NOISY_IQR_FRACTION * self.median_ms

    def summary(self) -> dict[str, Any]:
        return {
            "median_ms": self.median_ms,
            "iqr_ms": self.iqr_ms,
            "mean_ms": self.mean_ms,
            "std_ms": self.std_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "trials": self.trials,
            "noisy": self.noisy,
        }


@dataclass(frozen=True)
class MemoryMeasurement:
    """Peak device memory of one forward call (CUDA caching-allocator figures, bytes).

    ``peak_bytes = model_bytes + input_bytes + forward_peak_bytes``: what a process holding the
    model and one input set needs at the high point of a forward call. ``forward_peak_bytes`` is
    ``max_memory_allocated()`` during the call (after ``reset_peak_memory_stats()``) minus
    ``memory_allocated()`` just before it: outputs, intermediates and workspaces.
    ``model_bytes`` is the allocator growth across model construction (parameters, buffers and any
    tensor the model keeps, registered or not).
    """

    label: str
    peak_bytes: int
    forward_peak_bytes: int
    model_bytes: int
    input_bytes: int


def ratio_text(x: float) -> str:
    """A speedup or ratio as text: two decimals, or two significant digits below 0.095 (a 0.0043×
    Triton kernel under the interpreter read ``0.00x``): ``1.43``, ``0.88``, ``0.0043``."""
    return f"{x:.2f}" if abs(x) >= 0.095 or x == 0 else f"{x:.2g}"
