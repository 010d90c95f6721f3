"""``GET /metrics`` of ``kbv serve``: the Prometheus text format (version 0.0.4), written here
from the queue's counts and the service's lane and latency records (a handful of series: no
client library needed).

Series:
    ``kbv_serve_queue_depth``: jobs waiting for a lane (gauge).
    ``kbv_serve_jobs{state}``: jobs per state, every job in the store (gauge).
    ``kbv_serve_verdicts_total{status}``: finished jobs per verdict status (counter, over the store).
    ``kbv_serve_lane_busy_fraction{lane}``: share of the time since start each lane spent on jobs (gauge).
    ``kbv_serve_latency_seconds``: submit-to-result seconds of the jobs finished since start (histogram).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbv.serve.service import Service

#: the latency histogram's upper bounds (s): a CPU job takes seconds, a GPU job with a build minutes.
LATENCY_BUCKETS_S = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def histogram_lines(name: str, values: list[float], buckets: tuple[float, ...]) -> list[str]:
    """The ``_bucket``/``_sum``/``_count`` lines of a histogram of ``values`` (cumulative buckets)."""
    out = []
    for b in buckets:
        out.append(f'{name}_bucket{{le="{b:g}"}} {sum(1 for v in values if v <= b)}')
    out.append(f'{name}_bucket{{le="+Inf"}} {len(values)}')
    out.append(f"{name}_sum {sum(values):.6f}")
    out.append(f"{name}_count {len(values)}")
    return out


def exposition(service: "Service") -> str:
    """The metrics text of ``service`` (module docstring)."""
    counts = service.queue.counts()
    lines = ["# HELP kbv_serve_queue_depth Jobs waiting for a lane.", "# TYPE kbv_serve_queue_depth gauge",
             f"kbv_serve_queue_depth {counts['queued']}",
             "# HELP kbv_serve_jobs Jobs in the store per state.", "# TYPE kbv_serve_jobs gauge"]
    lines += [f'kbv_serve_jobs{{state="{s}"}} {n}' for s, n in counts.items()]
    lines += ["# HELP kbv_serve_verdicts_total Finished verifications per verdict status.",
              "# TYPE kbv_serve_verdicts_total counter"]
    lines += [f'kbv_serve_verdicts_total{{status="{_label(s)}"}} {n}' for s, n in sorted(service.queue.statuses().items())]
    lines += ["# HELP kbv_serve_lane_busy_fraction Share of the time since start each lane spent verifying.",
              "# TYPE kbv_serve_lane_busy_fraction gauge"]
    lines += [f'kbv_serve_lane_busy_fraction{{lane="{_label(k)}"}} {v:.4f}' for k, v in service.lane_busy().items()]
    lines += ["# HELP kbv_serve_latency_seconds Submit-to-result seconds of the jobs finished since start.",
              "# TYPE kbv_serve_latency_seconds histogram"]
    lines += histogram_lines("kbv_serve_latency_seconds", list(service.latencies_s), LATENCY_BUCKETS_S)
    return "\n".join(lines) + "\n"


__all__ = ["exposition", "histogram_lines", "LATENCY_BUCKETS_S"]
