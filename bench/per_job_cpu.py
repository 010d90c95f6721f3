"""The fixed per-job cost of a batch on cpu (issue 21): the steady-state gap between consecutive
verdicts of one ``kbv run`` lane, and each verdict's phases.

A batch of ``--n`` honest torch candidates (``torch.clamp_min`` and a no-op term, distinct files)
of the cpu demo's ReLU (16 x 16384 float32, about 0.1 ms a call), the default config (every check
on: 3 nominal seeds, D1-D4, the randomised sets, 3 rounds of 10 timed calls, the bound pass, the
sync pass, the op count), one lane, early workers on. The kernel costs almost nothing, so what is
measured is kbv's own cost per job: requests, pauses, input sets, the trusted loops.

    PYTHONPATH=src .venv/bin/python bench/per_job_cpu.py [--n 8] [--src DIR] [--json OUT]

``--src``: the ``src`` folder of the kbv to measure (a ``git worktree`` of another commit, for a
before/after pair on one machine); default this tree's. Goal: the median gap falls and the
verdicts stay PASS. Figures: docs/scale.md ("The fixed per-job cost").
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "src" / "kbv" / "data" / "problems_cpu" / "level1" / "1_ReLU.py"
CANDIDATE = ("import torch\nimport torch.nn as nn\n\n# variant {k}\nclass ModelNew(nn.Module):\n"
             "    def forward(self, x):\n        return torch.clamp_min(x, 0.0) + 0.0 * {k}\n")


def run(n: int, src: Path, root: Path) -> dict:
    """One ``kbv run`` of ``n`` candidates from ``src``; the gaps between claims and the phases."""
    (root / "problems" / "level1").mkdir(parents=True)
    (root / "problems" / "level1" / PROBLEM.name).write_text(PROBLEM.read_text())
    runs = root / "runs" / "m"
    runs.mkdir(parents=True)
    for k in range(n):
        (runs / f"level_1_problem_1_sample_{k}_kernel.py").write_text(CANDIDATE.format(k=k))
    db = root / "s.db"
    env = {**os.environ, "PYTHONPATH": str(src), "KBV_CACHE_DIR": str(root / "cache")}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kbv", "run", str(root / "problems"), str(root / "runs"),
                           "--store", str(db), "--device", "cpu"], env=env, capture_output=True, text=True,
                          timeout=3600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kbv run exited {proc.returncode}: {proc.stderr[-2000:]}")
    con = sqlite3.connect(db)
    rows = con.execute("SELECT v.verdict_json, j.claimed_at FROM verdicts v JOIN jobs j USING (job_key) "
                       "ORDER BY j.claimed_at").fetchall()
    con.close()
    phases: dict[str, list[float]] = {}
    statuses = []
    for vj, _ in rows:
        v = json.loads(vj)
        statuses.append(v["status"])
        for k, x in (v.get("phase_seconds") or {}).items():
            phases.setdefault(k, []).append(x)
    claimed = [float(c) for _, c in rows if c]
    gaps = [b - a for a, b in zip(claimed[1:], claimed[2:])]  # from the second job: steady state
    return {"src": str(src), "n": n, "wall_s": round(wall, 1), "statuses": statuses,
            "gap_median_s": round(statistics.median(gaps), 2) if gaps else None,
            "phase_median_s": {k: round(statistics.median(x), 2) for k, x in phases.items()},
            "load_average": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbv-per-job-") as d:
        out = run(a.n, a.src.resolve(), Path(d))
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
