"""Timing fidelity bench (issue 12 item 5): is kbv's median a figure you can quote?

    PYTHONPATH=src python3 bench/fidelity.py [--device cuda] [--repeats 5] [--json FILE]
    PYTHONPATH=src python3 bench/fidelity.py --device cpu      # dry run of the plumbing, no GPU, no ncu

For each kernel (honest Triton kernels of bench/kernels_triton.py on 8192 x 8192 float32 inputs,
256 MiB each: 0.1-0.3 ms per call on an H200; ``--with-cuda`` adds a CUDA ``load_inline`` ReLU,
built once):

1. **Spread.** ``kbv.verify`` in ``--repeats`` fresh Python processes, one after another; each
   gives the candidate's median time per call. Spread = (max - min) / median of those medians.
   Goal: <= 2 %.
2. **Against ncu.** The same candidate, on one ``get_inputs()`` draw, called ``--ncu-calls``
   times between ``cudaProfilerStart``/``Stop`` under ``ncu --clock-control none
   --profile-from-start off --metrics gpu__time_duration.sum`` (bench/fidelity_target.py); the
   median kernel time per call. Goal: kbv's median (the median of the fresh-process medians)
   within 5 % of ncu's for kernels of 50 us or more. ncu flushes the caches before each kernel
   (its default ``--cache-control all``), as kbv flushes L2 before each timed call; both let the
   clocks float.

Each verification checks correctness on one nominal set and D1 only and times against eager-fp32
only (the fidelity of the timing is what is measured here; the rest of kbv's checks run as
always). Writes the figures as JSON to ``--json``, default ``$OUT/fidelity.json`` when ``$OUT`` is
set. Expected wall time on one H200: about 5 minutes (15 fresh verifications of 15-20 s, 3 ncu
runs of ~20 s). ``--device cpu``: small inputs, torch candidates, ncu skipped: checks that the
bench runs, not the goals.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from gpu_kernels import IDS, problem_source  # noqa: E402
from kernels_cuda import cuda_kernels  # noqa: E402
from kernels_triton import triton_kernels  # noqa: E402

#: (problem, label) of the Triton kernels measured on cuda.
CUDA_KERNELS = [("ReLU", "b1024w4maximum"), ("Softmax", "online2048"), ("LayerNorm", "chunk2048")]
CPU_KERNELS = {  # torch candidates for the dry run (the timing is what is read, not the verdict)
    "ReLU": "return torch.clamp_min(x, 0.0)",
    "Softmax": "m = x.amax(dim=1, keepdim=True)\n        e = torch.exp(x - m)\n        return e / e.sum(dim=1, keepdim=True)",
}
SPREAD_GOAL = 0.02
NCU_GOAL = 0.05
NCU_MIN_MS = 0.05

VERIFY = r"""
import json, sys, time
import kbv
t0 = time.monotonic()
cfg = kbv.EvalConfig(device=sys.argv[3], nominal_seeds=1, hidden=("D1",), distributions=(), baselines=("eager-fp32",))
v = kbv.verify(sys.argv[1], sys.argv[2], cfg)
cand = v.timing.get("candidate")
print("KBV_FIDELITY " + json.dumps({
    "status": v.status.value, "message": v.message[:300],
    "median_ms": cand.median_ms if cand else None, "trials": cand.trials if cand else 0,
    "iqr_ms": cand.iqr_ms if cand else None,
    "baseline_median_ms": v.timing["eager-fp32"].median_ms if "eager-fp32" in v.timing else None,
    "timing_stop": v.evidence.get("timing_stop"), "gpu_throttle": v.evidence.get("gpu_throttle"),
    "wall_s": round(time.monotonic() - t0, 2)}))
"""


def _candidates(device: str, with_cuda: bool) -> list[tuple[str, str, str]]:
    if device == "cpu":
        head = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        "
        return [(p, "torch", head + body + "\n") for p, body in CPU_KERNELS.items()]
    tri = {(p, label): src for p, label, src in triton_kernels()}
    out = [(p, label, tri[(p, label)]) for p, label in CUDA_KERNELS]
    if with_cuda:
        out += [(p, label, src) for p, label, src in cuda_kernels() if (p, label) == ("ReLU", "float4_256")]
    return out


def fresh_verify(problem: Path, candidate: Path, device: str, env: dict, timeout: float) -> dict:
    """``kbv.verify`` in a new Python process; its figures (see VERIFY)."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", VERIFY, str(problem), str(candidate), device], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("KBV_FIDELITY "):
            return {**json.loads(line[len("KBV_FIDELITY "):]), "process_wall_s": round(time.monotonic() - t0, 2)}
    return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-1500:]}"}


def _ncu_path() -> str | None:
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and os.path.exists(cand):
            return cand
    return None


def ncu_median(problem: Path, candidate: Path, calls: int, env: dict, timeout: float) -> dict:
    """Median ``gpu__time_duration.sum`` (ms) per forward call under ncu (bench/fidelity_target.py)."""
    ncu = _ncu_path()
    if ncu is None:
        return {"error": "ncu not found (PATH, /usr/local/cuda/bin)"}
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", "gpu__time_duration.sum",
           "--csv", "--print-units", "base", "--target-processes", "all",
           sys.executable, str(BENCH / "fidelity_target.py"), str(problem), str(candidate), str(calls)]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    import csv

    rows = [r for r in csv.reader(line for line in proc.stdout.splitlines() if line.startswith('"'))]
    if not rows:
        return {"error": f"ncu exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-1500:]}"}
    head, body = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(head)}
    per_call: dict[int, float] = {}  # launch id -> ms; the target profiles only its forward calls
    names = set()
    for r in body:
        if r[col["Metric Name"]] != "gpu__time_duration.sum":
            continue
        unit = r[col["Metric Unit"]] if "Metric Unit" in col else "ns"
        value = float(r[col["Metric Value"]].replace(",", ""))
        ms = value / {"ns": 1e6, "nsecond": 1e6, "us": 1e3, "usecond": 1e3, "ms": 1.0, "msecond": 1.0}.get(unit, 1e6)
        kid = int(r[col["ID"]])
        names.add(r[col["Kernel Name"]])
        per_call[kid] = ms
    kernels = [per_call[k] for k in sorted(per_call)]
    marker = subprocess_marker(proc.stdout)
    k_per_call = max(1, len(kernels) // max(1, marker or calls))
    sums = [sum(kernels[i:i + k_per_call]) for i in range(0, len(kernels) - k_per_call + 1, k_per_call)]
    return {"median_ms": statistics.median(sums), "calls": len(sums), "kernels_per_call": k_per_call,
            "kernel_names": sorted(names)[:5], "min_ms": min(sums), "max_ms": max(sums)}


def subprocess_marker(stdout: str) -> int | None:
    """The forward calls the target reported profiling (its ``KBV_NCU_CALLS n`` line)."""
    for line in stdout.splitlines():
        if line.startswith("KBV_NCU_CALLS "):
            return int(line.split()[1])
    return None


def _all_ncu_ok(results: list[dict]) -> bool | None:
    """Every kernel of 50 us or more within the ncu goal; None when ncu measured none of them."""
    judged = [r["ncu_ok"] for r in results if r.get("ncu_applies")]
    return all(judged) if judged else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per kernel")
    ap.add_argument("--ncu-calls", type=int, default=20)
    ap.add_argument("--with-cuda", action="store_true", help="also a CUDA load_inline ReLU (one nvcc build, ~1.5 min)")
    ap.add_argument("--size", type=int, default=None, help="rows = cols of the inputs (default 8192; cpu 256)")
    ap.add_argument("--json", type=Path, default=Path(os.environ["OUT"]) / "fidelity.json" if os.environ.get("OUT") else None)
    a = ap.parse_args()
    size = a.size or (8192 if a.device == "cuda" else 256)
    work = Path(tempfile.mkdtemp(prefix="kbv-fidelity-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "KBV_CACHE_DIR": str(work / "cache")}
    results = []
    t_start = time.monotonic()
    try:
        for problem, label, src in _candidates(a.device, a.with_cuda):
            pfile = work / "problems" / "level1" / f"{IDS[problem]}_{problem}.py"
            pfile.parent.mkdir(parents=True, exist_ok=True)
            pfile.write_text(problem_source(IDS[problem], size, size))
            cfile = work / f"{problem}_{label}.py"
            cfile.write_text(src)
            runs = [fresh_verify(pfile, cfile, a.device, env, 900) for _ in range(a.repeats)]
            medians = [r["median_ms"] for r in runs if r.get("median_ms")]
            row = {"problem": problem, "kernel": label, "size": [size, size], "runs": runs}
            if len(medians) >= 2:
                mid = statistics.median(medians)
                row.update(kbv_median_ms=mid, spread=(max(medians) - min(medians)) / mid,
                           spread_ok=(max(medians) - min(medians)) / mid <= SPREAD_GOAL)
            if a.device == "cuda":
                ncu = ncu_median(pfile, cfile, a.ncu_calls, env, 600)
                row["ncu"] = ncu
                if "median_ms" in ncu and "kbv_median_ms" in row:
                    rel = row["kbv_median_ms"] / ncu["median_ms"] - 1
                    row.update(kbv_over_ncu=rel, ncu_applies=ncu["median_ms"] >= NCU_MIN_MS,
                               ncu_ok=abs(rel) <= NCU_GOAL if ncu["median_ms"] >= NCU_MIN_MS else None)
            results.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {"device": a.device, "repeats": a.repeats, "wall_s": round(time.monotonic() - t_start, 1),
               "spread_goal": SPREAD_GOAL, "ncu_goal": NCU_GOAL,
               "all_spread_ok": all(r.get("spread_ok") for r in results),
               "all_ncu_ok": _all_ncu_ok(results),
               "kernels": results}
    print(json.dumps({k: v for k, v in summary.items() if k != "kernels"}, indent=2))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
