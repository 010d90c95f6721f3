"""Peak host memory of every kbv process, and the wall time, of one whole verification (issue 9).

The done-when of issue 9 on cpu: an honest ReLU on a 1 GiB input
(``bench/problems/level1/19_ReLU_1GiB.py``, 16384 x 16384 fp32) is PASS (or SHORTCUT for a torch
wrapper), and no kbv process exceeds 9 GiB of resident memory (the 4·B + 1 GiB bound of
:mod:`kbv.processes.footprint`, B = 2 GiB of inputs and outputs per call).

The verification runs in an :class:`kbv.batch.evaluator.Evaluator` in this process (the orchestrator)
with ``kbv eval``'s default config on cpu (every check on; ``--lean``: tests/e2e/test_memory.py's). While it runs, a thread samples the
resident set (``VmRSS`` of /proc, every ``--interval`` s) of this process and of each of its
descendants: the reference worker (this process's child), its sentinel (a fork of it, the same
command line) and each candidate worker (the reference worker's other children). Sampling can miss
a spike between two samples, so the peaks the kernel kept are reported too: ``VmHWM`` of this
process and the reference worker's and candidate worker's peaks from the verdict's
``evidence["memory_footprint"]`` (its per-phase peaks included), and a timeline of each role's
highest sample per second. Bytes throughout; ``wall_s`` is the seconds of ``Evaluator.evaluate``.

Usage (repo root):
    nice -n 5 .venv/bin/python bench/memory_peaks.py                       # 1 GiB ReLU, the figure
    nice -n 5 .venv/bin/python bench/memory_peaks.py --lean --hidden-tests bench/problems/hidden_tests/level1/19_hidden.py
    .venv/bin/python bench/memory_peaks.py --problem tests/data/memory/level1/1_ReLU_256MiB.py
Writes ``docs/data/memory-<problem stem>-cpu.json`` unless ``--out`` says otherwise; exit status 0
when the verdict is PASS or SHORTCUT and every peak is within the bound, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "bench" / "problems" / "level1" / "19_ReLU_1GiB.py"
CANDIDATE = ROOT / "tests" / "data" / "honest" / "candidates" / "relu_clamp_min_torch.py"


def _children() -> dict[int, list[int]]:
    """ppid -> pids of every process /proc shows."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(name))
    return out


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


class Sampler(threading.Thread):
    """Samples the resident bytes of this process and every descendant until :meth:`stop`."""

    def __init__(self, interval: float):
        super().__init__(daemon=True)
        self.interval = interval
        self.peaks: dict[int, int] = {}  #: pid -> highest VmRSS sampled
        self.role: dict[int, str] = {}  #: pid -> orchestrator / reference worker / sentinel / candidate worker / other
        self.samples = 0
        self.timeline: list = []  #: (seconds since start, {role: highest VmRSS over the second}) per second
        self._halt = threading.Event()

    def _classify(self, pid: int, parent: int, ref: int | None) -> str:
        me = os.getpid()
        if pid == me:
            return "orchestrator"
        if parent == me:
            return "reference worker"
        if parent == ref:
            return "sentinel" if _cmdline(pid) == _cmdline(ref) else "candidate worker"
        return "other"

    def run(self) -> None:
        from kbv.processes.footprint import host_rss_bytes

        me = os.getpid()
        t0 = time.monotonic()
        second: dict = {}
        while not self._halt.is_set():
            tree = _children()
            ref = next(iter(tree.get(me, [])), None)
            todo = [(me, 0)]
            while todo:
                pid, parent = todo.pop()
                rss = host_rss_bytes(pid)
                if rss is not None:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), rss)
                    role = self.role.setdefault(pid, self._classify(pid, parent, ref))
                    second[role] = max(second.get(role, 0), rss)
                todo += [(c, pid) for c in tree.get(pid, [])]
            self.samples += 1
            now = int(time.monotonic() - t0)
            if not self.timeline or self.timeline[-1][0] != now:
                self.timeline.append([now, second])
                second = {}
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def by_role(self) -> dict[str, int]:
        """role -> highest sampled VmRSS over the processes of that role (bytes)."""
        out: dict[str, int] = {}
        for pid, rss in self.peaks.items():
            r = self.role[pid]
            out[r] = max(out.get(r, 0), rss)
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default=str(PROBLEM))
    ap.add_argument("--candidate", default=str(CANDIDATE))
    ap.add_argument("--hidden-tests", help="a hidden test file (<pid>_hidden.py) whose sets are checked too, e.g. "
                    "bench/problems/hidden_tests/level1/19_hidden.py for the 1 GiB ReLU")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between RSS samples")
    ap.add_argument("--out", help="JSON file (default docs/data/memory-<problem stem>-cpu.json)")
    ap.add_argument("--lean", action="store_true",
                    help="tests/e2e/test_memory.py's config (1 nominal seed, D1 and D4, one randomised set, 4 timed "
                         "calls) instead of kbv eval's default")
    args = ap.parse_args()

    from kbv.processes import footprint as fp
    from kbv.intake.candidates import load_candidate
    from kbv.batch.evaluator import Evaluator
    from kbv.intake.problems import load_problem
    from kbv.model.records import EvalConfig

    config = EvalConfig(device="cpu") if not args.lean else EvalConfig(
        device="cpu", nominal_seeds=1, hidden=("D1", "D4"), distributions=("normal",), trials=4, timing_rounds=2,
        warmup=1, call_timeout_s=300, timing_timeout_s=600)
    problem, candidate = load_problem(args.problem), load_candidate(args.candidate)
    load0 = os.getloadavg()
    sampler = Sampler(args.interval)
    sampler.start()
    t0 = time.perf_counter()
    with Evaluator("cpu") as ev:
        verdict = ev.evaluate(problem, candidate, config, hidden_tests=args.hidden_tests)
    wall = time.perf_counter() - t0
    sampler.stop()
    print(f"{verdict.status.value}: {verdict.message}", flush=True)  # before anything else can fail
    m = verdict.evidence.get("memory_footprint", {})
    bound = m.get("bound_bytes")
    kept = {"orchestrator": fp.host_peak_bytes(),
            "reference worker": m.get("reference_host_peak_bytes"),
            "candidate worker": m.get("candidate_host_peak_bytes")}
    sampled = sampler.by_role()
    peaks = {r: max(v for v in (sampled.get(r), kept.get(r)) if v is not None)
             for r in set(sampled) | {k for k, v in kept.items() if v is not None}}
    record = {
        "problem": str(Path(args.problem).resolve().relative_to(ROOT)) if Path(args.problem).resolve().is_relative_to(ROOT)
        else args.problem,
        "candidate": Path(args.candidate).name, "status": verdict.status.value, "message": verdict.message,
        "wall_s": wall, "phase_seconds": dict(verdict.phase_seconds),
        "bound_bytes": bound, "peak_bytes": peaks, "sampled_peak_bytes": sampled, "kernel_peak_bytes": kept,
        "reference_phase_peak_bytes": m.get("phase_peaks", {}), "samples": sampler.samples,
        "interval_s": args.interval, "loadavg_before": load0, "loadavg_after": os.getloadavg(),
        "cpus": os.cpu_count(), "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "timeline_rss_bytes": sampler.timeline,
        "config": {"lean": args.lean, "nominal_seeds": config.nominal_seeds, "hidden": list(config.hidden),
                   "distributions": list(config.distributions), "trials": config.trials,
                   "timing_rounds": config.timing_rounds, "warmup": config.warmup},
        "findings": [f.describe() for f in verdict.findings],
    }
    record["hidden_tests"] = args.hidden_tests
    record["hidden_sets"] = [r.name for r in verdict.input_sets if r.name.startswith("HT")]
    stem = Path(args.problem).stem + ("-lean" if args.lean else "") + ("-hidden" if args.hidden_tests else "")
    out = Path(args.out) if args.out else ROOT / "docs" / "data" / f"memory-{stem}-cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    gib = 2 ** 30
    print(f"{verdict.status.value}: {verdict.message}")
    print(f"wall {wall:.1f} s; phases " + ", ".join(f"{k} {v:.1f} s" for k, v in verdict.phase_seconds.items()))
    for role, v in sorted(peaks.items()):
        print(f"  {role:17s} peak {v / gib:6.2f} GiB" + (f"  (bound {bound / gib:.2f} GiB)" if bound else ""))
    for phase, v in m.get("phase_peaks", {}).items():
        print(f"    reference {phase:14s} {v / gib:6.2f} GiB")
    print(f"written to {out}")
    ok = verdict.status.value in ("PASS", "SHORTCUT") and bound is not None and all(v <= bound for v in peaks.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
