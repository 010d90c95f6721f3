"""What the anti-cheat detectors cost: wall time of whole verifications with and without them.

Issue 4's budget: a verify with every probe (static scan, per-call probes, caching re-runs,
timed-call re-checks, the synchronised timing pass, the roofline floor, the op/kernel profile)
costs at most twice the wall time of the same verify without them (``EvalConfig(integrity=False)``).

For each (problem, candidate) pair below, the pair is verified ``--repeats`` times in each mode,
alternating the order (on, off, off, on, ...) in one Evaluator so warm caches favour neither. The
first, untimed, verification of each pair builds the candidate. Reported per pair: median wall
seconds of ``Evaluator.evaluate`` in each mode, their ratio and every run's phase seconds
(load, correctness, vetting, timing); overall: the geometric mean ratio and the worst one.
``--only SUBSTR`` keeps the pairs whose candidate file name contains SUBSTR.

Usage (repo root):
    TRITON_INTERPRET=1 .venv/bin/python bench/probe_overhead.py --device cpu --out /tmp/overhead-cpu.json
    PYTHONPATH=src python3 bench/probe_overhead.py --device cuda --out $OUT/overhead-cuda.json   # on the H200
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import time

from kbv.intake.candidates import load_candidate
from kbv.demo import data_path
from kbv.batch.evaluator import Evaluator
from kbv.intake.problems import load_problem
from kbv.model.records import EvalConfig

PAIRS = {
    "cpu": [("level1/1_ReLU.py", "relu_cpp.py"), ("level1/1_ReLU.py", "relu_hack.py"),
            ("level1/5_Conv2d.py", "conv2d_torch.py"),
            ("level2/1_Gemm_Bias_ReLU_Scale.py", "fused_gemm_cpp.py")],
    "cuda": [("level1/1_ReLU.py", "relu_cuda.py"), ("level1/2_Softmax.py", "softmax_triton.py"),
             ("level1/3_LayerNorm.py", "layernorm_triton.py"), ("level1/4_Square_matmul.py", "matmul_tf32.py"),
             ("level1/5_Conv2d.py", "conv2d_torch.py")],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", help="write every measurement as JSON here")
    ap.add_argument("--only", default="", help="run only the pairs whose candidate file name contains this")
    args = ap.parse_args()
    base = EvalConfig(device=args.device) if args.device == "cuda" else EvalConfig(
        device="cpu", trials=6, timing_rounds=2, warmup=1)
    rows = []
    with Evaluator(args.device) as ev:
        for prob, cand in [p for p in PAIRS[args.device] if args.only in p[1]]:
            p = load_problem(data_path("problems", prob))
            c = load_candidate(data_path("candidates", cand))
            ev.evaluate(p, c, base)  # build and warm
            walls: dict[str, list[float]] = {"on": [], "off": []}
            phases: dict[str, list[dict]] = {"on": [], "off": []}
            statuses = {}
            for r in range(args.repeats):
                for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                    cfg = dataclasses.replace(base, integrity=mode == "on")
                    t0 = time.perf_counter()
                    v = ev.evaluate(p, c, cfg)
                    walls[mode].append(time.perf_counter() - t0)
                    phases[mode].append(dict(v.phase_seconds))
                    statuses[mode] = v.status.value
            on, off = statistics.median(walls["on"]), statistics.median(walls["off"])
            rows.append({"problem": prob, "candidate": cand, "on_s": on, "off_s": off, "ratio": on / off,
                         "walls": walls, "phase_seconds": phases, "status": statuses})
            print(f"{prob:38s} {cand:22s} on {on:7.2f} s  off {off:7.2f} s  ratio {on / off:5.2f}  "
                  f"({statuses['on']} / {statuses['off']})", flush=True)
    ratios = [r["ratio"] for r in rows]
    summary = {"device": args.device, "repeats": args.repeats,
               "geomean_ratio": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
               "worst_ratio": max(ratios), "pairs": rows}
    print(f"geomean ratio {summary['geomean_ratio']:.2f}, worst {summary['worst_ratio']:.2f} (budget 2.00)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
