"""CPU benches of issue 12 items 1 and 2: early candidate workers, and builds stopped while a lane
times. Each mode is a fresh ``kbv run`` process with a fresh build cache (bench/batch_cpu.py's
``run_mode``, its small config).

    .venv/bin/python bench/workers_cpu.py prestart [--n 16] [--json OUT]
    .venv/bin/python bench/workers_cpu.py pause [--honest 6] [--cpp 2] [--json OUT]

``prestart``: a batch of ``--n`` torch candidates (bench/batch_cpu.py's, no C++), one lane, no
pool, with and without ``--no-prestart``: wall time, the median ``load`` phase (spawn and import
for a fresh worker, the import alone for an early one), how many jobs loaded into an early worker,
and whether every verdict is the same.

``pause``: ``--honest`` copies of one honest kernel (``torch.clamp_min`` on a 2048 x 1024 ReLU,
about a millisecond a call) timed alone, then beside ``--cpp`` C++ builds in the pool with the
builds stopped while the lane times (the default), then with the builds only at
idle priority (``--no-build-pause``). For each mode: the median over the honest jobs of their
candidate and eager-fp32 medians, the spread of those medians over the jobs ((max - min) /
median) and the median within-job spread (IQR / median); and whether the honest jobs' verdicts are
the same in the three modes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from batch_cpu import CPP, make_batch, run_mode  # noqa: E402

PROBLEM = '''"""ReLU of a 2048 x 1024 float32 input (kbv bench problem)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(2048, 1024)]


def get_init_inputs():
    return []
'''
HONEST = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
          "        return torch.clamp_min(x, 0.0)\n")


def _rows(db: Path) -> dict[str, dict]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT j.candidate_path, v.verdict_json FROM verdicts v JOIN jobs j USING (job_key)").fetchall()
    con.close()
    return {Path(p).name: json.loads(vj) for p, vj in rows}


def _median(v: dict, label: str) -> float | None:
    m = (v.get("timing") or {}).get(label)
    return statistics.median(m["times_ms"]) if m else None


def _iqr_rel(v: dict, label: str) -> float | None:
    m = (v.get("timing") or {}).get(label)
    if not m or len(m["times_ms"]) < 4:
        return None
    q = statistics.quantiles(m["times_ms"], n=4)
    return (q[2] - q[0]) / q[1]


def prestart(a) -> dict:
    root = Path(tempfile.mkdtemp(prefix="kbv-bench-prestart-"))
    try:
        runs = make_batch(root, a.n, 0)
        modes = {name: run_mode(root, runs, name, ["--builds", "0", *flags])
                 for name, flags in (("fresh", ["--no-prestart"]), ("early", []))}
        rows = {name: _rows(root / f"{name}.db") for name in modes}
        used = sum(bool(v["evidence"].get("worker_started_early")) for v in rows["early"].values())
        return {"bench": "prestart", "candidates": a.n, "cores": len(os.sched_getaffinity(0)),
                "load_avg_end": os.getloadavg(),
                "wall_s": {k: m["wall_s"] for k, m in modes.items()},
                "wall_ratio_early_over_fresh": round(modes["early"]["wall_s"] / modes["fresh"]["wall_s"], 3),
                "identical_verdicts": modes["fresh"]["statuses"] == modes["early"]["statuses"],
                "jobs_in_an_early_worker": used,
                "load_phase_s_median": {k: round(statistics.median(v["phase_seconds"].get("load", 0.0)
                                                                   for v in r.values() if v.get("phase_seconds")), 2)
                                        for k, r in rows.items()}}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def pause(a) -> dict:
    root = Path(tempfile.mkdtemp(prefix="kbv-bench-pause-"))
    try:
        (root / "problems" / "level1").mkdir(parents=True)
        (root / "problems" / "level1" / "1_ReLU_2048x1024.py").write_text(PROBLEM)
        out: dict = {"bench": "pause", "honest": a.honest, "cpp": a.cpp, "cores": len(os.sched_getaffinity(0))}
        modes = {"alone": (0, []), "builds_stopped": (a.cpp, ["--builds", "1"]),
                 "builds_idle_priority": (a.cpp, ["--builds", "1", "--no-build-pause"])}
        statuses = {}
        for name, (n_cpp, flags) in modes.items():
            runs = root / f"runs-{name}"
            run = runs / "bench"
            run.mkdir(parents=True)
            for s in range(a.honest):
                (run / f"level_1_problem_1_sample_{s}_kernel.py").write_text(HONEST + f"# sample {s}\n")
            for k in range(n_cpp):  # distinct sources: each its own build
                (run / f"level_1_problem_1_sample_{a.honest + k}_kernel.py").write_text(
                    CPP.replace("kbv_demo_relu_cpp", f"kbv_bench_pause_cpp_{k}"))
            m = run_mode(root, runs, name, flags or ["--builds", "0"])
            rows = _rows(root / f"{name}.db")
            honest = [rows[f"level_1_problem_1_sample_{s}_kernel.py"] for s in range(a.honest)
                      if f"level_1_problem_1_sample_{s}_kernel.py" in rows]
            statuses[name] = {f"sample_{s}": v["status"] for s, v in enumerate(honest)}
            fig: dict = {"wall_s": m["wall_s"]}
            for label in ("candidate", "eager-fp32"):
                med = [x for x in (_median(v, label) for v in honest) if x]
                iqr = [x for x in (_iqr_rel(v, label) for v in honest) if x is not None]
                if med:
                    mid = statistics.median(med)
                    fig[label] = {"median_ms": round(mid, 4), "spread_over_jobs": round((max(med) - min(med)) / mid, 3),
                                  "median_within_job_iqr": round(statistics.median(iqr), 3) if iqr else None}
            fig["builds_during_timing"] = sorted({str(v["evidence"].get("builds_during_timing")) for v in honest})
            out[name] = fig
        out["identical_honest_verdicts"] = len({json.dumps(s, sort_keys=True) for s in statuses.values()}) == 1
        out["load_avg_end"] = os.getloadavg()
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", choices=("prestart", "pause"))
    ap.add_argument("--n", type=int, default=16, help="prestart: candidates")
    ap.add_argument("--honest", type=int, default=6, help="pause: honest jobs")
    ap.add_argument("--cpp", type=int, default=2, help="pause: C++ builds beside them")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    result = prestart(a) if a.bench == "prestart" else pause(a)
    print(json.dumps(result, indent=2))
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
