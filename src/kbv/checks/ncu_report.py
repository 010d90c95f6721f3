"""Nsight Compute's figures for the kernels of one forward (``kbv profile``, ``--profile``;
:mod:`kbv.pipeline.diagnostics`): its CSV read into one record per kernel launch.

kbv runs ``ncu --csv --page raw`` with the sections of :data:`SECTIONS` and reads the columns below
from what they collect; a column ncu did not print is left None (its names change little between
versions, but a GPU or a version without a counter prints none). The CSV starts after ncu's own
``==PROF==`` lines: a header row (``"ID","Process ID",...,"Kernel Name",...`` and one column per
metric), then a row of units, then one row per profiled launch. Values may carry thousands
separators (``"1,234.5"``).

Figures per launch (ncu's metric names):

* ``duration_ms``: ``gpu__time_duration.sum``, converted from its unit to ms;
* ``sm_pct`` / ``dram_pct``: ``sm__throughput`` / ``dram__throughput`` (``gpu__dram_throughput`` in
  the speed-of-light section of newer ncu, :data:`DRAM_METRICS`) ``.avg.pct_of_peak_sustained_elapsed``
  (speed of light, % of peak);
* ``memory_pct``: ``gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed``;
* ``occupancy_pct``: ``sm__warps_active.avg.pct_of_peak_sustained_active`` (achieved occupancy);
* ``registers``: ``launch__registers_per_thread``; ``shared_bytes``: static plus dynamic shared
  memory per block (``launch__shared_mem_per_block_*``, converted to bytes);
* ``stalls``: the top :data:`TOP_STALLS` warp stall reasons (columns ``*issue_stalled_<reason>*``),
  largest first, as ncu gives them (cycles per issued instruction, or % of warps).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

#: the sections kbv asks ncu for (``--section``): speed of light, occupancy, launch figures, stalls.
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats")
#: stall reasons kept per kernel.
TOP_STALLS = 3
#: DRAM throughput's raw metric, first found: ncu's older name, then the speed-of-light section's on
#: Hopper with ncu 2025.3 (where the H200 and H100 runs of 2026-12-05 had no ``dram__throughput``).
DRAM_METRICS = ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
                "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")
_TIME_UNITS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
               "second": 1e3, "s": 1e3}
_BYTE_UNITS = {"byte": 1, "Kbyte": 1000, "Mbyte": 1000 ** 2, "Gbyte": 1000 ** 3, "KB": 1024, "MB": 1024 ** 2,
               "Kibyte": 1024, "Mibyte": 1024 ** 2}
_STALL = re.compile(r"issue_stalled_(?P<reason>[a-z_]+?)(?:_per_[a-z_]+)?\.(?:ratio|pct)$")
#: stall "reasons" that are issuing, not stalling.
_NOT_STALLS = ("selected", "not_selected")


@dataclass(frozen=True)
class KernelFigures:
    """One profiled launch (module doc for each figure)."""

    name: str
    duration_ms: float | None = None
    sm_pct: float | None = None
    dram_pct: float | None = None
    memory_pct: float | None = None
    occupancy_pct: float | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    grid: str | None = None
    block: str | None = None
    stalls: tuple[tuple[str, float], ...] = field(default_factory=tuple)

    def as_dict(self) -> dict:
        return {"name": self.name, "duration_ms": self.duration_ms, "sm_pct": self.sm_pct, "dram_pct": self.dram_pct,
                "memory_pct": self.memory_pct, "occupancy_pct": self.occupancy_pct, "registers": self.registers,
                "shared_bytes": self.shared_bytes, "grid": self.grid, "block": self.block,
                "stalls": [list(s) for s in self.stalls]}


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    text = text.strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_csv(text: str) -> list[KernelFigures]:
    """``ncu --csv --page raw`` output (module doc) as one :class:`KernelFigures` per launch, in
    launch order; empty when there is no CSV (ncu profiled nothing)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = [r for r in csv.reader(io.StringIO("\n".join(lines[start:]))) if r]
    header, body = rows[0], rows[1:]
    units = {}
    if body and not body[0][0].strip():  # the units row
        units = dict(zip(header, body[0]))
        body = body[1:]
    out = []
    for row in body:
        if len(row) != len(header):
            continue
        r = dict(zip(header, row))

        def value(name: str) -> float | None:
            return _number(r.get(name))

        def scaled(name: str, table: dict) -> float | None:
            v = value(name)
            return None if v is None else v * table.get(units.get(name, ""), 1.0)

        dur = value("gpu__time_duration.sum")
        if dur is not None:
            dur *= _TIME_UNITS.get(units.get("gpu__time_duration.sum", "nsecond"), 1e-6)
        shared = [scaled(f"launch__shared_mem_per_block_{k}", _BYTE_UNITS) for k in ("static", "dynamic")]
        regs = value("launch__registers_per_thread")
        stalls = []
        for col, text_value in r.items():
            m = _STALL.search(col)
            v = _number(text_value)
            if m and v is not None and m["reason"] not in _NOT_STALLS:
                stalls.append((m["reason"], v))
        best: dict[str, float] = {}
        for reason, v in stalls:  # one figure per reason: the first column that names it
            best.setdefault(reason, v)
        top = tuple(sorted(best.items(), key=lambda kv: -kv[1])[:TOP_STALLS])
        out.append(KernelFigures(
            name=r.get("Kernel Name", "?"), duration_ms=dur,
            sm_pct=value("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            dram_pct=next((v for v in map(value, DRAM_METRICS) if v is not None), None),
            memory_pct=value("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
            occupancy_pct=value("sm__warps_active.avg.pct_of_peak_sustained_active"),
            registers=None if regs is None else int(regs),
            shared_bytes=None if all(s is None for s in shared) else int(sum(s or 0 for s in shared)),
            grid=r.get("Grid Size") or r.get("launch__grid_size"), block=r.get("Block Size") or r.get("launch__block_size"),
            stalls=top))
    return out


def summary(kernels: list[KernelFigures]) -> dict:
    """The launches' total duration (ms) and the longest launch's figures: what a table row shows."""
    timed = [k for k in kernels if k.duration_ms is not None]
    top = max(timed, key=lambda k: k.duration_ms) if timed else (kernels[0] if kernels else None)
    return {"launches": len(kernels), "total_ms": sum(k.duration_ms for k in timed) if timed else None,
            "longest": top.as_dict() if top else None}


__all__ = ["SECTIONS", "KernelFigures", "parse_csv", "summary"]
