"""Where a bound pass's request time goes on cuda (issue 19: honest 33 µs Triton row sums credited
1.1 ms by the bound pass on an H100, 2026-12-06).

For each chosen candidate of bench/gpu_kernels.py (default: the five Triton row sums of problem 5 on
a 4096 x 4096 float32 input), one ``kbv eval`` in a fresh process, and from its verdict: the claim,
the floors and walls of each pass, the fixed cost allowed, and ``bound_request_costs`` (the primed
one-call request's wall, the resume and the stop inside each clock). Prints one JSON line per
candidate and writes them all to ``--json``.

    PYTHONPATH=src python3 bench/bound_request_costs.py --device cuda --json $OUT/request_costs.json
    PYTHONPATH=src TRITON_INTERPRET=1 python3 bench/bound_request_costs.py --device cpu --rows 64 --cols 256 \\
        --only 5_sample_2                                         # the plumbing, on cpu
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from gpu_kernels import kernels, write_problems, write_run  # noqa: E402

KEYS = ("claimed_median_ms", "credited_median_ms", "floor_ms", "calls", "wall_ms", "request_allow_ms",
        "null_per_call_ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--only", default="problem_5_sample_",
                    help="candidates whose file name contains this (default: the row sums)")
    ap.add_argument("--backend", default="triton", help="only candidates of this backend ('' for all)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbv-bound-costs-"))
    write_problems(work / "problems", a.rows, a.cols)
    names = write_run(work / "run", kernels(broken=False))
    rows = []
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src")}
    for name, (problem, backend, label) in sorted(names.items()):
        if a.only not in name or (a.backend and backend != a.backend):
            continue
        pid = name.split("_problem_")[1].split("_")[0]
        prob = next((work / "problems" / "level1").glob(f"{pid}_*.py"))
        out = work / f"{name}.json"
        r = subprocess.run([sys.executable, "-m", "kbv", "eval", str(prob), str(work / "run" / name),
                            "--device", a.device, "--json", str(out)], env=env, capture_output=True, text=True,
                           timeout=300)
        if not out.exists():
            rows.append({"candidate": name, "error": (r.stdout + r.stderr)[-600:]})
            print(json.dumps(rows[-1]), flush=True)
            continue
        v = json.loads(out.read_text())
        tb = v.get("evidence", {}).get("trusted_bound", {})
        row = {"candidate": name, "label": label, "status": v["status"],
               "bound": {k: tb.get(k) for k in KEYS},
               "request_costs": v.get("evidence", {}).get("bound_request_costs"),
               "findings": [f["check"] for f in v.get("findings", [])]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
