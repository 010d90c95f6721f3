"""CPU batch bench (issue 12): one batch of >= 50 generated candidates, verified sequentially and
then with the build pool and several lanes; the verdicts must be identical, the wall times are the
figures of docs/scale.md.

    .venv/bin/python bench/batch_cpu.py [--n 50] [--lanes 2] [--builds 1] [--json OUT] [--keep DIR]

The candidates are small problems of tests/data/problems (ReLU, log, softmax) with honest torch
kernels (several formulations; the ones that re-run the reference's own op are SHORTCUT), honest
C++ ``load_inline`` ReLUs (each a distinct file, so each is built), and broken ones: wrong results
(INCORRECT), a forward that raises (RUNTIME_ERROR), a syntax error (static COMPILE_ERROR), an
import of a missing module and a C++ file that does not compile (COMPILE_ERROR). Each mode runs
``kbv run`` in a fresh process with a fresh build cache (``KBV_CACHE_DIR``), so both build every
C++ candidate from cold. The config is small (``--seeds 1 --trials 3 --warmup 1 --policy
kbv-compat``): the bench measures the batch machinery, not kernel speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "data" / "problems" / "level1"
CPP = (ROOT / "src" / "kbv" / "data" / "candidates" / "relu_cpp.py").read_text()

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"

#: (problem file, expected kind, forward body or whole file)
TORCH = {
    "1_Small_ReLU": [
        ("honest", "return torch.clamp_min(x, 0.0)"),
        ("honest", "return torch.where(x > 0, x, torch.zeros_like(x))"),
        ("honest", "return x * (x > 0).to(x.dtype)"),
        ("honest", "return torch.maximum(x, torch.zeros_like(x))"),
        ("honest", "return (x + x.abs()) * 0.5"),
        ("honest", "return F.relu(x)"),
        ("honest", "return torch.relu(x)"),
        ("broken", "return x"),  # wrong on negative inputs (D4)
        ("broken", "return x.abs()"),
        ("broken", "raise RuntimeError('kernel launch failed')"),
    ],
    "3_Small_Log": [
        ("honest", "return torch.log(x + 1e-3)"),
        ("honest", "return (x + 1e-3).log()"),
        ("honest", "return torch.log1p(x + 1e-3 - 1.0)"),
        ("broken", "return torch.log1p(x)"),
    ],
    "5_Small_Softmax": [
        ("honest", "m = x.amax(dim=1, keepdim=True)\n        e = torch.exp(x - m)\n        return e / e.sum(dim=1, keepdim=True)"),
        ("honest", "return torch.softmax(x, dim=1)"),
        ("honest", "return F.softmax(x, dim=-1)"),
        ("broken", "return torch.softmax(x, dim=0)"),
    ],
}


def make_batch(root: Path, n: int, n_cpp: int) -> Path:
    """Problems and one run ``bench`` of ``n`` candidates under ``root``; returns the runs folder."""
    probs = root / "problems" / "level1"
    probs.mkdir(parents=True)
    for name in TORCH:
        shutil.copy(PROBLEMS / f"{name}.py", probs / f"{name}.py")
    run = root / "runs" / "bench"
    run.mkdir(parents=True)
    files: list[tuple[int, str]] = []
    for k in range(n_cpp):  # distinct C++ files: each is its own build
        src = CPP.replace("kbv_demo_relu_cpp", f"kbv_bench_relu_cpp_{k}").replace("-O3", "-O2")
        if k == n_cpp - 1:
            src = src.replace("const int64_t n = xc.numel();", "const int64_t n = xc.numel() +;")
        files.append((1, src))
    files.append((1, "class ModelNew(:\n"))
    files.append((1, "import torch\nimport kbv_no_such_module\n\n\nclass ModelNew(torch.nn.Module):\n"
                     "    def forward(self, x):\n        return x\n"))
    pid = {name: int(name.split("_")[0]) for name in TORCH}
    variants = [(pid[name], HEAD + "        " + body + "\n") for name, rows in TORCH.items() for _, body in rows]
    i = 0
    while len(files) < n:
        p, text = variants[i % len(variants)]
        files.append((p, text + f"# sample {i}\n"))
        i += 1
    counters: dict[int, int] = {}
    for p, text in files:
        s = counters[p] = counters.get(p, -1) + 1
        (run / f"level_1_problem_{p}_sample_{s}_kernel.py").write_text(text)
    return root / "runs"


#: the batch config of the bench: few calls, the KernelBench-Verified policy.
SMALL = ["--seeds", "1", "--trials", "3", "--warmup", "1", "--policy", "kbv-compat"]


def run_mode(root: Path, runs: Path, name: str, extra: list[str], *, problems: Path | None = None,
             base: list[str] | None = None) -> dict:
    """``kbv run`` of the batch in a fresh process with a fresh build cache; wall time (s) and the
    status of every candidate file. ``base`` (default ``--device cpu``) precedes the config."""
    db = root / f"{name}.db"
    env = {**os.environ, "KBV_CACHE_DIR": str(root / f"cache-{name}"), "PYTHONPATH": str(ROOT / "src")}
    base = ["--device", "cpu"] if base is None else base
    cmd = [sys.executable, "-m", "kbv", "run", str(problems or root / "problems"), str(runs), "--store", str(db),
           *base, *SMALL, *extra]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=7200)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{name}: kbv run exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    con = sqlite3.connect(db)
    rows = con.execute("SELECT j.candidate_path, v.status, v.verdict_json FROM verdicts v "
                       "JOIN jobs j USING (job_key)").fetchall()
    con.close()
    statuses = {Path(p).name: s for p, s, _ in rows}
    pool_decided = sum('"decided_in": "build pool"' in vj for _, _, vj in rows)
    return {"mode": name, "args": extra, "wall_s": round(wall, 1), "verdicts": len(rows),
            "statuses": statuses, "decided_in_pool": pool_decided}


def _busy(idle: bool) -> subprocess.Popen:
    """A process that burns one core, at normal priority or as the build pool runs its builds
    (``SCHED_IDLE``, nice 19: :func:`kbv.batch.executors.builds._lower_priority`)."""
    code = ("import os\n"
            "if %r:\n    os.setpriority(os.PRIO_PROCESS, 0, 19); os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
            "while True: pass\n") % idle
    return subprocess.Popen([sys.executable, "-c", code])


def interference(rounds: int = 5, calls: int = 20) -> dict:
    """Median time (ms) of a fixed single-threaded torch workload (~10-20 ms a call, longer than a
    scheduler time slice) alone, beside one busy process
    per core at normal priority, and beside the same at the build pool's priority: how much a
    build's CPU use would slow a lane's timing loop."""
    import statistics

    import torch

    torch.set_num_threads(1)
    a = torch.rand(512, 512)

    def median_ms() -> float:
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            for _ in range(4):
                a @ a
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    out: dict[str, list[float]] = {"alone": [], "normal_priority_builds": [], "idle_priority_builds": []}
    cores = len(os.sched_getaffinity(0))
    for _ in range(rounds):  # interleaved, so drift in the machine's load hits every condition
        out["alone"].append(median_ms())
        for key, idle in (("normal_priority_builds", False), ("idle_priority_builds", True)):
            procs = [_busy(idle) for _ in range(cores)]
            time.sleep(0.3)
            try:
                out[key].append(median_ms())
            finally:
                for pr in procs:
                    pr.kill()
                    pr.wait()
    med = {k: round(statistics.median(v), 3) for k, v in out.items()}
    return {"median_ms": med, "slowdown_normal": round(med["normal_priority_builds"] / med["alone"], 2),
            "slowdown_idle": round(med["idle_priority_builds"] / med["alone"], 2), "rounds": rounds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50, help="candidates (>= 50 for the issue's figure)")
    ap.add_argument("--cpp", type=int, default=3, help="C++ candidates among them (the last does not compile)")
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--builds", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    ap.add_argument("--interference", action="store_true",
                    help="only measure how builds at normal and at the pool's priority slow a timing loop")
    a = ap.parse_args()
    if a.interference:
        print(json.dumps(interference(), indent=2))
        return
    root = a.keep or Path(tempfile.mkdtemp(prefix="kbv-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        runs = make_batch(root, a.n, a.cpp)
        seq = run_mode(root, runs, "sequential", ["--builds", "0"])
        par = run_mode(root, runs, "pool", ["--builds", str(a.builds), "--lanes", str(a.lanes)])
        same = seq["statuses"] == par["statuses"]
        diff = {k: (seq["statuses"].get(k), par["statuses"].get(k)) for k in set(seq["statuses"]) | set(par["statuses"])
                if seq["statuses"].get(k) != par["statuses"].get(k)}
        counts: dict[str, int] = {}
        for s in seq["statuses"].values():
            counts[s] = counts.get(s, 0) + 1
        result = {"candidates": a.n, "cpp": a.cpp, "cores": len(os.sched_getaffinity(0)),
                  "load_avg_end": os.getloadavg(), "sequential_wall_s": seq["wall_s"], "pool_wall_s": par["wall_s"],
                  "speedup": round(seq["wall_s"] / par["wall_s"], 2), "identical_verdicts": same,
                  "differences": diff, "status_counts": counts, "decided_in_pool": par["decided_in_pool"],
                  "pool_args": par["args"]}
        print(json.dumps(result, indent=2))
        if a.json:
            a.json.write_text(json.dumps({**result, "sequential": seq, "pool": par}, indent=2))
        if not same:
            raise SystemExit("verdicts differ between sequential and pool runs")
    finally:
        if a.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
