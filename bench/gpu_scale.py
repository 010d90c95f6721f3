"""GPU batch bench (issue 12): 40 honest CUDA/Triton candidates and one that does not compile,
built in the pool beside the lanes, then verified again with every build cached.

    PYTHONPATH=src python3 bench/gpu_scale.py [--gpus all] [--builds N] [--small] [--json FILE]
    PYTHONPATH=src python3 bench/gpu_scale.py --device cpu --n 3 --small --deadline-s 1500   # dry run

The batch is bench/gpu_kernels.py's: five problems (ReLU, Softmax, LayerNorm, SiLU, RowSum of a
4096 x 4096 float32 input), 16 CUDA ``load_inline`` kernels (each its own nvcc build), 24 Triton
kernels, and a CUDA file that does not compile. Two ``kbv run`` processes, one after the other:

1. **cold**: a fresh build cache, ``--gpus all`` (one lane per GPU) and the build pool (default
   size: cores / 2, ``MAX_JOBS`` 2 each; builds stopped while a lane times). Figure: the wall time
   over max(build CPU-seconds / cores, lane-busy seconds / lanes), goal <= 1.25. Build
   CPU-seconds are the pool's own count (kbv run's ``build pool:`` line: CPU time of every build
   process, compilers included); lane-busy seconds the lanes' own (``lanes:`` line: the time each
   lane had a job). The NVML kernel-active seconds are reported beside them when nvidia-ml-py is
   installed.
2. **warm**: the same candidates with every build cached, a fresh store, no pool, the same lanes.
   Figures: the amortised wall per kernel (wall / kernels, and the steady-state gap between
   verdicts, which leaves out the start-up), goal <= 2 s; whether every verdict equals the cold
   run's (identical verdicts with and without the pool); and for each candidate timed in both, the
   ratio of its median times (builds running beside the cold run's timing, none in the warm one).

Both use kbv's default configuration (every check; ``--small`` for 1 nominal seed, 3 trials, the
kbv-compat policy). Expected wall time on one H200: ~3-4 min cold (16 CUDA builds of 60-100 s,
8 at once, beside the lane), ~3 min warm; ``--deadline-s`` (default 450) bounds both (the cold run
gets at most the deadline less 180 s, the warm run the rest: a run cut short reports what it
stored). ``--device cpu`` runs the Triton kernels under the Triton interpreter on small inputs (no
CUDA build there): it checks the bench's plumbing, slowly. Writes JSON to ``--json``, default
``$OUT/gpu-scale.json`` when ``$OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from gpu_kernels import kernels, write_problems, write_run  # noqa: E402

SMALL = ["--seeds", "1", "--trials", "3", "--warmup", "1", "--policy", "kbv-compat"]
STATUSES = ("PASS", "SHORTCUT", "HACK", "INCORRECT", "COMPILE_ERROR", "RUNTIME_ERROR", "TIMEOUT", "CRASH",
            "EVAL_ERROR")
VERDICT_LINE = re.compile(rf"^({'|'.join(STATUSES)})\s+\S+ \S+ sample (\d+)")
POOL_LINE = re.compile(r"^build pool: (\d+) builds?, ([\d.]+) CPU-s, ([\d.]+) s of builds?; stopped ([\d.]+) s")
LANES_LINE = re.compile(r"^lanes: (\d+), busy ([\d.]+) s")


class GpuActivity:
    """NVML utilisation of the visible GPUs sampled every ``period`` s: the integral of the
    kernel-active fraction, in seconds summed over the GPUs (None without nvidia-ml-py)."""

    def __init__(self, period: float = 0.2):
        self.period, self.active_s, self._end = period, None, threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # noqa: BLE001 - no NVML: the figure is left out
            self._nvml = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        total, last = 0.0, time.monotonic()
        while not self._end.wait(self.period):
            now = time.monotonic()
            util = sum(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles)
            total += util / 100 * (now - last)
            last = now
        self.active_s = round(total, 1)

    def __enter__(self) -> "GpuActivity":
        if self._nvml is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._end.set()
        if self._nvml is not None:
            self._thread.join()


def run_kbv(work: Path, name: str, args: list[str], env: dict, timeout: float,
            ok_exits: tuple[int, ...] = (0, 130)) -> dict:
    """``kbv run`` of the batch into ``work/<name>.db``, stdout read line by line (each verdict
    line timestamped); a run past ``timeout`` gets SIGTERM (kbv releases its jobs) and is reported
    as ``timed_out`` with what it stored. An exit status outside ``ok_exits`` ends the bench."""
    db = work / f"{name}.db"
    cmd = [sys.executable, "-m", "kbv", "run", str(work / "problems"), str(work / "runs"), "--store", str(db), *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env={**env, "PYTHONUNBUFFERED": "1"}, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic() - t0, ln.rstrip()) for ln in proc.stdout),
                              daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"mode": name, "args": args, "wall_s": round(wall, 1), "exit": proc.returncode, "timed_out": timed_out,
           "tree_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
           "verdict_times_s": [round(t, 2) for t, ln in lines if VERDICT_LINE.match(ln)],
           "tail": [ln for _, ln in lines[-8:]]}
    for _, ln in lines:
        if m := POOL_LINE.match(ln):
            out.update(builds=int(m[1]), build_cpu_s=float(m[2]), build_wall_s=float(m[3]), builds_stopped_s=float(m[4]))
        if m := LANES_LINE.match(ln):
            out.update(lanes=int(m[1]), lane_busy_s=float(m[2]))
    if proc.returncode not in ok_exits and not timed_out:
        raise SystemExit(f"{name}: kbv run exited {proc.returncode}:\n" + "\n".join(ln for _, ln in lines[-40:]))
    out.update(read_store(db))
    return out


def verdict_rows(db: Path) -> list[tuple[str, str, dict]]:
    """(candidate path, status, verdict record) of every verdict in kbv's store ``db`` ([] if none)."""
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    rows = con.execute("SELECT j.candidate_path, v.status, v.verdict_json FROM verdicts v JOIN jobs j USING (job_key)"
                       ).fetchall()
    con.close()
    return [(path, status, json.loads(vj)) for path, status, vj in rows]


def read_store(db: Path) -> dict:
    """Status, candidate median and timing evidence of every verdict in ``db``, by file name."""
    rows = verdict_rows(db)
    jobs = {}
    for path, status, v in rows:
        cand = (v.get("timing") or {}).get("candidate")
        ev = v.get("evidence") or {}
        jobs[Path(path).name] = {
            "status": status,
            "median_ms": sorted(cand["times_ms"])[len(cand["times_ms"]) // 2] if cand else None,
            "stop": (ev.get("timing_stop") or {}).get("reason"),
            "builds_during_timing": ev.get("builds_during_timing"),
            "decided_in_pool": ev.get("decided_in") == "build pool",
            "phase_s": round(sum(float(x) for k, x in (v.get("phase_seconds") or {}).items() if k != "compile"), 2)}
    return {"verdicts": len(rows), "jobs": jobs}


def _count(values) -> dict:
    out: dict = {}
    for x in values:
        out[str(x)] = out.get(str(x), 0) + 1
    return out


def summarise(cold: dict, warm: dict | None, n: int, cores: int) -> dict:
    lanes = cold.get("lanes") or 1
    busy = cold.get("lane_busy_s") or sum(j["phase_s"] for j in cold["jobs"].values())
    build_cpu = cold.get("build_cpu_s")
    if build_cpu is None and warm is not None:  # the pool's count missing: the process trees' difference
        build_cpu = max(0.0, cold["tree_cpu_s"] - warm["tree_cpu_s"])
    bound = max((build_cpu or 0.0) / cores, busy / lanes)
    out = {"candidates": n, "cores": cores, "lanes": lanes,
           "cold_wall_s": cold["wall_s"], "build_cpu_s": build_cpu, "lane_busy_s": round(busy, 1),
           "bound_s": round(bound, 1), "ratio_wall_over_bound": round(cold["wall_s"] / bound, 2) if bound else None,
           "ratio_goal": 1.25, "builds": cold.get("builds"), "builds_stopped_s": cold.get("builds_stopped_s"),
           "decided_in_pool": sum(j["decided_in_pool"] for j in cold["jobs"].values()),
           "cold_statuses": _count(j["status"] for j in cold["jobs"].values()),
           "cold_stop_reasons": _count(j["stop"] for j in cold["jobs"].values()),
           "cold_builds_during_timing": _count(j["builds_during_timing"] for j in cold["jobs"].values())}
    if warm is None:
        return out
    done = warm["verdicts"]
    t = warm["verdict_times_s"]
    common = sorted(set(cold["jobs"]) & set(warm["jobs"]))
    diff = {k: (cold["jobs"][k]["status"], warm["jobs"][k]["status"]) for k in common
            if cold["jobs"][k]["status"] != warm["jobs"][k]["status"]}
    ratios = [cold["jobs"][k]["median_ms"] / warm["jobs"][k]["median_ms"] for k in common
              if cold["jobs"][k]["median_ms"] and warm["jobs"][k]["median_ms"]]
    out.update({
        "warm_wall_s": warm["wall_s"], "warm_verdicts": done, "warm_timed_out": warm["timed_out"],
        "amortised_s_per_kernel": round(warm["wall_s"] / done, 2) if done else None,
        "steady_s_per_kernel": round((t[-1] - t[0]) / (len(t) - 1), 2) if len(t) > 1 else None,
        "amortised_goal_s": 2.0,
        "identical_verdicts": not diff and len(common) == len(cold["jobs"]), "compared": len(common),
        "differences": diff,
        "cold_over_warm_median": {"n": len(ratios),
                                  "median": round(statistics.median(ratios), 4) if ratios else None,
                                  "within_2pct": sum(abs(r - 1) <= 0.02 for r in ratios),
                                  "within_5pct": sum(abs(r - 1) <= 0.05 for r in ratios),
                                  "worst": round(max(ratios, key=lambda r: abs(r - 1)), 4) if ratios else None},
        "warm_stop_reasons": _count(j["stop"] for j in warm["jobs"].values())})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--gpus", default="all", help="kbv run --gpus (cuda)")
    ap.add_argument("--builds", type=int, default=None, help="build pool size (default: kbv's, cores / 2)")
    ap.add_argument("--small", action="store_true", help="1 nominal seed, 3 trials, kbv-compat")
    ap.add_argument("--n", type=int, default=None, help="only the first N candidates (the dry run)")
    ap.add_argument("--deadline-s", type=float, default=450.0, help="both runs end within this")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--json", type=Path, default=Path(os.environ["OUT"]) / "gpu-scale.json" if os.environ.get("OUT") else None)
    a = ap.parse_args()
    t_start = time.monotonic()
    work = a.keep or Path(tempfile.mkdtemp(prefix="kbv-gpu-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "KBV_CACHE_DIR": str(work / "cache")}
    chosen = kernels(broken=True)
    if a.device == "cpu":  # Triton under its interpreter on CPU tensors: no CUDA build possible
        env["TRITON_INTERPRET"] = "1"
        chosen = [k for k in chosen if k[1] == "triton"]
    chosen = chosen[:a.n] if a.n else chosen
    write_problems(work / "problems", *((4096, 4096) if a.device == "cuda" else (64, 1000)))
    write_run(work / "runs" / "gpu", chosen)
    lanes = ["--gpus", a.gpus] if a.device == "cuda" else ["--device", "cpu"]
    config = SMALL if a.small else []
    pool = ["--builds", str(a.builds)] if a.builds is not None else []
    result: dict = {"device": a.device, "config": "small" if a.small else "default"}
    try:
        with GpuActivity() as act:
            cold = run_kbv(work, "cold", lanes + config + pool, env, max(0.6 * a.deadline_s, a.deadline_s - 180))
        cold["nvml_active_s"] = act.active_s
        left = a.deadline_s - (time.monotonic() - t_start)
        warm = run_kbv(work, "warm", lanes + config + ["--builds", "0"], env, left) if left > 30 else None
        cores = len(os.sched_getaffinity(0))
        result.update(summarise(cold, warm, len(chosen), cores), nvml_active_s=act.active_s,
                      bench_wall_s=round(time.monotonic() - t_start, 1))
        print(json.dumps(result, indent=2))
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps({**result, "cold": cold, "warm": warm}, indent=2))
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
