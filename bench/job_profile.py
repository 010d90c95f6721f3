"""Where one verification's wall time goes (issue 21: the gap between verdicts, goal 2 s on the H200):
the pipeline run in this process, which plays the reference worker as kbv's does, under cProfile,
after one unprofiled verification that warms the builds and caches.

    PYTHONPATH=src python3 bench/job_profile.py [--problem P] [--candidate C] [--device cpu|cuda]
        [--top N] [--json OUT]

Prints the verdict's ``phase_seconds`` (the pipeline's own marks), the wall of the profiled run,
and the functions with the largest cumulative time (kbv's own and torch's): where a cut would
pay. The candidate worker is a separate process and is not profiled: its time shows as the
orchestrating side's waits (``wait_readable``, ``poll``). Default: the demo's ``level1/1_ReLU`` and
``src/kbv/data/candidates/relu_cuda.py`` on cuda (``tests/data/candidates/relu_torch.py`` on cpu).
Figures: docs/scale.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def profile(problem: Path, candidate: Path, device: str, top: int) -> dict:
    """One warm verification of ``candidate`` on ``problem``, profiled (module doc)."""
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem
    from kbv.model.records import EvalConfig
    from kbv.pipeline.run import verify
    from kbv.processes.host_environment import collect_environment
    from kbv.reference.build import build_reference

    config = EvalConfig(device=device)
    pref, cref = load_problem(problem), load_candidate(candidate)
    rp = build_reference(pref, config)
    env = collect_environment(device)
    t0 = time.perf_counter()
    warm = verify(rp, cref, config, env)
    warm_wall = time.perf_counter() - t0
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    v = verify(rp, cref, config, env)
    prof.disable()
    wall = time.perf_counter() - t0
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return {"problem": str(problem), "candidate": str(candidate), "device": device, "status": v.status.value,
            "warm_wall_s": round(warm_wall, 3), "wall_s": round(wall, 3),
            "phase_seconds": {k: round(x, 3) for k, x in v.phase_seconds.items()},
            "timing_stop": v.evidence.get("timing_stop"), "profile_text": out.getvalue()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", type=Path, default=ROOT / "src/kbv/data/problems/level1/1_ReLU.py")
    ap.add_argument("--candidate", type=Path)
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    cand = args.candidate or ROOT / ("src/kbv/data/candidates/relu_cuda.py" if args.device == "cuda"
                                     else "tests/data/candidates/relu_torch.py")
    out = profile(args.problem, cand, args.device, args.top)
    print(json.dumps({k: v for k, v in out.items() if k != "profile_text"}, indent=2))
    print(out["profile_text"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
