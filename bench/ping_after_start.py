"""A candidate worker's readiness Ping right after its start-up (docs/scale.md, "Workers ready before
they are needed"): what a job pays for each worker started ahead when it takes it
(:meth:`kbv.pipeline.prestart.Prestarted.take` sends one Ping and waits for its Pong).

Each run spawns a worker for a Triton candidate (torch and Triton imported at start-up), waits for
its start-up Pong, then times one more Ping round trip (ms). The Ping runs a full collection
(:func:`kbv.sandbox.timer.collect`); the worker's start-up ends by moving its objects out of the
collector's generations, so that collection walks only what came after.

Usage: ``python3 bench/ping_after_start.py [--device cpu|cuda] [--runs N] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kbv.processes.candidate import CandidateProcess  # noqa: E402
from kbv.sandbox import protocol  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    times = []
    for _ in range(a.runs):
        with CandidateProcess(device=a.device, build_dir=Path(tempfile.mkdtemp()),
                              preload=("triton", "triton.language")) as w:
            w.send(protocol.Ping(), phase="start")
            w.receive(phase="start", timeout=300)
            t0 = time.perf_counter()
            w.send(protocol.Ping(), phase="start")
            w.receive(phase="start", timeout=60)
            times.append(round((time.perf_counter() - t0) * 1e3, 2))
    out = {"device": a.device, "ping_after_start_ms": times, "median_ms": statistics.median(times)}
    print(json.dumps(out))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
