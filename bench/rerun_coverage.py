"""Do kbv's speedup intervals cover a rerun? (issue: intervals that mean what they say)

    PYTHONPATH=src python3 bench/rerun_coverage.py first  WORK    # a kbv run of 40 honest GPU kernels
    PYTHONPATH=src python3 bench/rerun_coverage.py second WORK    # the same batch again, fresh processes
    PYTHONPATH=src python3 bench/rerun_coverage.py compare WORK [--json FILE]

The batch is bench/gpu_kernels.py's 40 honest candidates (16 CUDA, 24 Triton) over five problems on
a 4096 x 4096 float32 input, with kbv's default configuration; ``first`` builds into
``WORK/cache``, ``second`` reuses it (run it beside another GPU load, e.g. the cuda suite).
``compare`` reads both stores and reports, per baseline (eager-fp32, eager-tf32), how many of the
second run's speedups lie inside the first run's 95 % interval: kbv's recorded interval
(:func:`kbv.batch.scoring.speedup_interval`: the calls' bootstrap, the spread between rounds, the
rerun floor) beside the calls' bootstrap alone, and whether the verdicts are the same.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from gpu_kernels import kernels, write_problems, write_run  # noqa: E402
from gpu_scale import run_kbv  # noqa: E402


def _verdicts(db: Path) -> dict:
    from kbv.model.verdicts import verdict_from_json

    con = sqlite3.connect(db)
    rows = con.execute("SELECT j.candidate_path, v.verdict_json FROM verdicts v JOIN jobs j USING (job_key)").fetchall()
    con.close()
    return {Path(p).name: verdict_from_json(vj) for p, vj in rows}


def compare(work: Path) -> dict:
    from kbv.batch.scoring import speedup_interval
    from kbv.model.intervals import interval_seed, ratio_interval

    a, b = _verdicts(work / "first.db"), _verdicts(work / "second.db")
    common = sorted(set(a) & set(b))
    out: dict = {"candidates": len(common), "same_status": sum(a[k].status == b[k].status for k in common),
                 "statuses_first": {}, "baselines": {}}
    for k in common:
        out["statuses_first"][a[k].status.value] = out["statuses_first"].get(a[k].status.value, 0) + 1
    for base in ("eager-fp32", "eager-tf32"):
        rows = []
        for k in common:
            va, vb = a[k], b[k]
            sb = vb.speedup.get(base)
            iv = speedup_interval(va, base)
            if sb is None or iv is None:
                continue
            ca, ba = va.timing["candidate"].times_ms, va.timing[base].times_ms
            plain = ratio_interval(ba, ca, interval_seed(va.problem.sha256, va.candidate.sha256, base))
            rows.append({"candidate": k, "first": va.speedup.get(base), "second": sb, "interval": iv, "plain": plain,
                         "inside": iv[0] <= sb <= iv[1], "inside_plain": plain[0] <= sb <= plain[1]})
        n = len(rows)
        out["baselines"][base] = {
            "n": n, "inside": sum(r["inside"] for r in rows), "inside_plain": sum(r["inside_plain"] for r in rows),
            "coverage": round(sum(r["inside"] for r in rows) / n, 3) if n else None,
            "coverage_plain": round(sum(r["inside_plain"] for r in rows) / n, 3) if n else None,
            "rows": rows}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("first", "second", "compare"))
    ap.add_argument("work", type=Path)
    ap.add_argument("--deadline-s", type=float, default=540.0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    work = a.work
    if a.step == "compare":
        result = compare(work)
        text = json.dumps(result, indent=2)
        print(json.dumps({k: v for k, v in result.items() if k != "baselines"} |
                         {b: {k: v for k, v in r.items() if k != "rows"} for b, r in result["baselines"].items()},
                         indent=2))
        if a.json:
            a.json.write_text(text)
        return
    import os

    work.mkdir(parents=True, exist_ok=True)
    if not (work / "problems").exists():
        write_problems(work / "problems", 4096, 4096)
        write_run(work / "runs" / "gpu", kernels(broken=False))
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src"), "KBV_CACHE_DIR": str(work / "cache")}
    r = run_kbv(work, a.step, ["--gpus", "all"], env, a.deadline_s)
    print(json.dumps({k: v for k, v in r.items() if k not in ("jobs",)}, indent=2))


if __name__ == "__main__":
    main()
