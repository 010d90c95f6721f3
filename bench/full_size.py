"""Full-size bench (issue 21): KernelBench-Verified's level-1 problems at their published sizes, with
their hidden tests, one reference-wrapping candidate each, through ``kbv run``.

The problem files and hidden tests are KernelBench-Verified's, fetched into ``bench/kbv-verified/``
(git-ignored, never committed: ``KernelBench/level1/*.py`` and ``hidden_tests/level1/<pid>_hidden.py``;
``--problems`` and ``--hidden`` name other folders of the same layout). Each problem's candidate is
its own source with ``Model`` renamed ``ModelNew``: the cost of a verification with every check on
(its verdict is SHORTCUT: torch's own kernels, found by the op count after every other stage).

One ``kbv run`` (default config, hidden tests on, one lane) over the problems chosen by ``--pids``,
its stdout read line by line, each verdict line timestamped; then every verdict read from its store.
Per job: status, message, seconds since the previous verdict (the gap), the verdict's own phase
seconds, the reference worker's and candidate worker's host peaks, the reference worker's device
peak (and per phase, ``phase_device_peaks``), and the bound ``4·B + 1 GiB`` (:mod:`kbv.processes.footprint`). Figures, against the issue's
goals:

- ``median_gap_s``: the median gap between consecutive verdicts (the first job's start-up left
  out), goal <= 6 s;
- ``over_bound``: jobs whose host or device peak exceeds the bound, goal none;
- ``over_bound_with_forward``: the same against ``4·B + 1 GiB + W``, W the reference's own eager
  forward beyond its inputs and outputs (``reference_forward_working_bytes``, the memory stage's
  measurement): a loss's or a 3-D convolution's intermediates, which any evaluator pays;
- ``eval_errors``: EVAL_ERROR verdicts other than "does not fit this machine", goal none.

A run past ``--deadline-s`` is stopped (SIGTERM: kbv stores what it finished) and reported with what
it stored; ``--store`` keeps the store, so a second call with the same store resumes where the
first stopped.

    PYTHONPATH=src python3 bench/full_size.py --device cuda --pids 1-50 --deadline-s 540
    PYTHONPATH=src python3 bench/full_size.py --device cpu --problems tests/data/problems \\
        --hidden tests/data/hidden_tests --pids 1 --quick          # the dry run: the plumbing, on cpu

Writes JSON to ``--json`` (default ``$OUT/full-size.json`` when ``$OUT`` is set) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from gpu_scale import run_kbv, verdict_rows  # noqa: E402

DATA = BENCH / "kbv-verified"
QUICK = ["--seeds", "1", "--trials", "3", "--warmup", "1"]
NOT_FIT = "does not fit this machine"


def pids(spec: str) -> set[int]:
    """``"1-50,95"`` -> {1, ..., 50, 95}."""
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


#: appended to a candidate with ``--tf32``: its forward runs with TF32 on for matmuls and
#: convolutions (restored after), so its outputs differ from the strict-fp32 reference's and every
#: set takes the fp64 oracle's path (the path whose memory an exact copy never reaches)
TF32_FORWARD = """

_kbv_bench_forward = ModelNew.forward


def _kbv_bench_tf32_forward(self, *args, **kwargs):
    import torch
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        return _kbv_bench_forward(self, *args, **kwargs)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


ModelNew.forward = _kbv_bench_tf32_forward
"""


def write_candidates(problems: Path, chosen: set[int], runs: Path, tf32: bool = False) -> list[Path]:
    """One reference-copying candidate per chosen problem of ``problems/level1``, in KernelBench's
    runs layout (``runs/full/level_1_problem_<P>_sample_0_kernel.py``); ``tf32``: its forward under
    TF32 (:data:`TF32_FORWARD`)."""
    out = []
    (runs / "full").mkdir(parents=True, exist_ok=True)
    for p in sorted((problems / "level1").glob("*.py"), key=lambda f: int(f.name.split("_")[0])):
        pid = int(p.name.split("_")[0])
        if pid not in chosen:
            continue
        dest = runs / "full" / f"level_1_problem_{pid}_sample_0_kernel.py"
        dest.write_text(re.sub(r"\bModel\b", "ModelNew", p.read_text()) + (TF32_FORWARD if tf32 else ""))
        out.append(dest)
    return out


def forward_working_bytes(verdict: dict, bound: int | None) -> int | None:
    """The reference's own eager forward beyond its inputs and outputs (bytes): its measured forward
    peak over the inputs (``memory["reference"]["forward_peak_bytes"]``, the memory stage's) less the
    outputs, O = B - inputs with B from the bound ``4·B + 1 GiB``; None where either is missing."""
    ref = (verdict.get("memory") or {}).get("reference") or {}
    peak, inputs = ref.get("forward_peak_bytes"), ref.get("input_bytes")
    if not bound or peak is None or inputs is None:
        return None
    out = max(0, (bound - (1 << 30)) // 4 - int(inputs))
    return max(0, int(peak) - out)


def read_jobs(db: Path) -> dict:
    """Every verdict of ``db`` by problem id: status, message, phase seconds and memory figures."""
    jobs = {}
    for path, status, v in verdict_rows(db):
        mem = (v.get("evidence") or {}).get("memory_footprint") or {}
        bound = mem.get("bound_bytes")
        peaks = {k: mem.get(k) for k in ("reference_host_peak_bytes", "candidate_host_peak_bytes",
                                         "reference_device_peak_bytes")}
        pid = int(re.search(r"problem_(\d+)_", Path(path).name)[1])
        working = forward_working_bytes(v, bound)
        jobs[pid] = {"status": status, "message": (v.get("message") or "")[:400],
                     "phase_s": round(sum(float(x) for x in (v.get("phase_seconds") or {}).values()), 2),
                     **peaks, "bound_bytes": bound,
                     # the reference worker's device peak so far at the end of each phase: the phase that went over
                     "phase_device_peaks": mem.get("phase_device_peaks") or {},
                     "over_bound": [k for k, x in peaks.items() if bound and x and x > bound],
                     # the problem's own eager forward beyond its inputs and outputs (W): what any
                     # evaluator that runs the reference pays; the device peak against 4·B + 1 GiB + W
                     "reference_forward_working_bytes": working,
                     "over_bound_with_forward": [k for k, x in peaks.items()
                                                 if bound and x and x > bound + (working or 0)],
                     # a candidate's out-of-memory failure: what the device held when it came
                     **({"device_capacity": v["evidence"]["device_capacity"]}
                        if (v.get("evidence") or {}).get("device_capacity") else {})}
    return jobs


def summarise(run: dict, jobs: dict, chosen: set[int]) -> dict:
    times = run["verdict_times_s"]
    gaps = [round(b - a, 2) for a, b in zip(times, times[1:])]
    return {
        "problems": len(chosen), "verdicts": len(jobs), "wall_s": run["wall_s"], "timed_out": run["timed_out"],
        "first_verdict_s": times[0] if times else None, "gaps_s": gaps,
        "median_gap_s": round(statistics.median(gaps), 2) if gaps else None, "goal_gap_s": 6.0,
        "median_phase_s": round(statistics.median(j["phase_s"] for j in jobs.values()), 2) if jobs else None,
        "statuses": {s: sum(j["status"] == s for j in jobs.values()) for s in sorted({j["status"] for j in jobs.values()})},
        "over_bound": {pid: j["over_bound"] for pid, j in sorted(jobs.items()) if j["over_bound"]},
        "over_bound_with_forward": {pid: j["over_bound_with_forward"] for pid, j in sorted(jobs.items())
                                    if j["over_bound_with_forward"]},
        "does_not_fit": sorted(pid for pid, j in jobs.items() if j["status"] == "EVAL_ERROR" and NOT_FIT in j["message"]),
        "eval_errors": {pid: j["message"] for pid, j in sorted(jobs.items())
                        if j["status"] == "EVAL_ERROR" and NOT_FIT not in j["message"]},
        "jobs": {pid: jobs[pid] for pid in sorted(jobs)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--problems", type=Path, default=DATA / "KernelBench", help="folder holding level1/")
    ap.add_argument("--hidden", type=Path, default=DATA / "hidden_tests", help="folder holding level1/<pid>_hidden.py")
    ap.add_argument("--pids", default="1-100", help="problem ids, e.g. 1-50,95")
    ap.add_argument("--quick", action="store_true", help="1 nominal seed, 3 trials (the dry run)")
    ap.add_argument("--tf32", action="store_true", help="each candidate's forward under TF32: outputs that differ "
                    "from the reference's, so every set takes the fp64 oracle's path")
    ap.add_argument("--deadline-s", type=float, default=540.0)
    ap.add_argument("--store", type=Path, help="kbv's store (kept; a second call resumes)")
    ap.add_argument("--json", type=Path, default=Path(os.environ["OUT"]) / "full-size.json" if os.environ.get("OUT") else None)
    args = ap.parse_args()
    for folder, what in ((args.problems / "level1", "--problems"), (args.hidden / "level1", "--hidden")):
        if not folder.is_dir():
            raise SystemExit(f"full_size.py: {what}: no folder {folder} (fetch KernelBench-Verified into {DATA}, "
                             "see bench/README.md)")
    chosen = pids(args.pids)
    with tempfile.TemporaryDirectory(prefix="kbv-full-") as tmp:
        work = Path(tmp)
        (work / "problems").symlink_to(args.problems.resolve())
        if not write_candidates(args.problems, chosen, work / "runs", args.tf32):
            raise SystemExit(f"full_size.py: no problem of {args.problems}/level1 has an id in {args.pids}")
        db = work / "full.db"  # run_kbv's store; a kept one is copied in and back
        if args.store and args.store.exists():
            shutil.copyfile(args.store, db)
        kbv_args = ["--device", args.device, "--hidden-tests", str(args.hidden.resolve()), *(QUICK if args.quick else [])]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        # exit 3 (kbv's internal errors on some jobs) still leaves the others' verdicts to report
        run = run_kbv(work, "full", kbv_args, env, args.deadline_s, ok_exits=(0, 3, 130))
        if args.store and db.exists():
            shutil.copyfile(db, args.store)
        out = {"device": args.device, "kbv_args": kbv_args, "exit": run["exit"], "tail": run["tail"], **summarise(run, read_jobs(db), chosen)}
    text = json.dumps(out, indent=1, default=str)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
