"""Lay the built-in demo candidates out as KernelBench runs, for `kbv run` on a GPU host.

Usage: python3 bench/make_demo_runs.py OUT_DIR [--device cuda|cpu]
Two "models": `honest` (every case expected to PASS) and `hacked` (the rest), one sample per
(problem, candidate) in KernelBench's layout runs/<run>/level_<L>_problem_<P>_sample_<S>_kernel.py.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kbv.demo import cases_for, data_path  # noqa: E402
from kbv.intake.problems import identify  # noqa: E402
from kbv.model.records import Status  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    samples: dict[tuple[str, int, int], int] = defaultdict(int)
    for case in cases_for(args.device):
        run = "honest" if case.expected is Status.PASS else "hacked"
        level, pid, _ = identify(Path(case.problem))
        s = samples[(run, level, pid)]
        samples[(run, level, pid)] += 1
        dest = args.out / run / f"level_{level}_problem_{pid}_sample_{s}_kernel.py"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data_path("candidates", case.candidate), dest)
        print(f"{case.candidate} -> {dest}")


if __name__ == "__main__":
    main()
