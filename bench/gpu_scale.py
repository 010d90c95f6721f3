"""GPU batch bench (issue 12): >= 40 CUDA/Triton candidates, one lane sequentially without the build
pool, then ``--gpus all`` with the pool; identical verdicts, wall times, and the issue's ratio.

    python3 bench/gpu_scale.py [--copies 14] [--gpus all] [--builds 8] [--json OUT]

The candidates are the demo's cuda cases (``kbv.demo.cases_for("cuda")``: CUDA ``load_inline``
kernels, Triton kernels: ``--copies`` each, 42 by default; the SHORTCUT and HACK cases: 2 each) with
its own extension name, so every CUDA copy is a separate build, plus one CUDA file that does not
compile. Each mode runs ``kbv run`` in a fresh
process with a fresh build cache. The ratio is the pooled wall time over
max(build seconds / cores, GPU-busy seconds / GPUs), where build seconds is the sum of the
sequential run's ``compile`` phases (builds ran one at a time there: wall seconds of builds of one
or two translation units, so a lower bound of their CPU-seconds) and GPU-busy seconds the sum of the
pooled run's non-compile phases (the lanes' verification time: an upper bound of GPU-busy time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from batch_cpu import run_mode  # noqa: E402
from kbv.demo import cases_for, data_path  # noqa: E402
from kbv.intake.problems import identify  # noqa: E402


def make_runs(root: Path, copies: int) -> Path:
    """``copies`` of each CUDA and Triton case (each CUDA copy its own extension name), 2 of the
    others, and one CUDA ReLU whose kernel does not compile."""
    from kbv.intake.candidates import load_candidate

    run = root / "runs" / "gpu"
    run.mkdir(parents=True)
    samples: dict[tuple[int, int], int] = {}
    for case in cases_for("cuda"):
        level, pid, _ = identify(Path(case.problem))
        path = data_path("candidates", case.candidate)
        text = path.read_text()
        kind = load_candidate(path).backend
        if case.candidate == "relu_cuda.py":
            s = samples[(level, pid)] = samples.get((level, pid), -1) + 1
            broken = text.replace('name="kbv_demo_relu_cuda"', 'name="kbv_bench_broken_relu_cuda"')
            broken = re.sub(r"__global__ void", "__global__ void void", broken, count=1)
            (run / f"level_{level}_problem_{pid}_sample_{s}_kernel.py").write_text(broken)
        for k in range(copies if kind in ("cuda", "triton") else 2):
            s = samples[(level, pid)] = samples.get((level, pid), -1) + 1
            src = re.sub(r'name\s*=\s*"([A-Za-z0-9_]+)"', lambda m: f'name="{m[1]}_s{s}"', text)
            (run / f"level_{level}_problem_{pid}_sample_{s}_kernel.py").write_text(src + f"\n# copy {k}\n")
    return root / "runs"


def phase_sums(db: Path) -> tuple[float, float]:
    con = sqlite3.connect(db)
    comp = other = 0.0
    for (vj,) in con.execute("SELECT verdict_json FROM verdicts"):
        ph = json.loads(vj).get("phase_seconds") or {}
        comp += float(ph.get("compile", 0.0))
        other += sum(float(v) for k, v in ph.items() if k != "compile")
    con.close()
    return comp, other


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=14, help="copies of each CUDA/Triton case")
    ap.add_argument("--gpus", default="all")
    ap.add_argument("--builds", type=int, default=None)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kbv-gpu-scale-"))
    try:
        runs = make_runs(root, a.copies)
        n = len(list((runs / "gpu").iterdir()))
        problems = data_path("problems")
        common = ["--device", "cuda"]
        seq = run_mode(root, runs, "sequential", ["--builds", "0"], problems=problems, base=common)
        pool_args = ["--gpus", a.gpus] + (["--builds", str(a.builds)] if a.builds is not None else [])
        par = run_mode(root, runs, "pool", pool_args, problems=problems, base=[])
        build_s, _ = phase_sums(root / "sequential.db")
        _, busy_s = phase_sums(root / "pool.db")
        cores = len(os.sched_getaffinity(0))
        bound = max(build_s / cores, busy_s / max(1, _gpu_count(a.gpus)))
        result = {"candidates": n, "sequential_wall_s": seq["wall_s"], "pool_wall_s": par["wall_s"],
                  "speedup": round(seq["wall_s"] / par["wall_s"], 2),
                  "identical_verdicts": seq["statuses"] == par["statuses"],
                  "differences": {k: (seq["statuses"].get(k), par["statuses"].get(k)) for k in seq["statuses"]
                                  if seq["statuses"].get(k) != par["statuses"].get(k)},
                  "build_s_sequential": round(build_s, 1), "lane_busy_s_pool": round(busy_s, 1), "cores": cores,
                  "ratio_wall_over_bound": round(par["wall_s"] / bound, 2) if bound else None,
                  "decided_in_pool": par["decided_in_pool"], "pool_args": pool_args}
        print(json.dumps(result, indent=2))
        if a.json:
            a.json.write_text(json.dumps({**result, "sequential": seq, "pool": par}, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _gpu_count(gpus: str) -> int:
    if gpus != "all":
        return len([g for g in gpus.split(",") if g.strip()])
    import torch

    return torch.cuda.device_count()


if __name__ == "__main__":
    main()
