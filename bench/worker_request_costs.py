"""What one request costs inside a candidate worker, by part (issue 21: the worker's share of the
time between verdicts, which the trusted side's profile shows only as waits).

    PYTHONPATH=src python3 bench/worker_request_costs.py [--device cuda|cpu] [--problem P]
        [--candidate C] [--n 30] [--json OUT]

Builds the worker's request server (:class:`kbv.sandbox.worker._Server`) in this process, as a
candidate worker does but without the sandbox (no process to stop, no pipe: the handlers are called
directly), loads the candidate, and times each handler ``--n`` times: ``Ping``, ``Forward``
without and with the probes, ``TimedCall`` (after ``SetTimingInputs``), and the reports every
reply carries (:meth:`kbv.sandbox.reply_reports.ReplyReports._with_reports`) with their parts: the
harness guard, the dispatcher's light read, the torch.library registry, the mode shield, the tensor
class watch. The server's audit hooks are installed as in a worker, so the figures include what
they cost. Medians in ms. The trace of a whole job is ``bench/request_trace.py``; figures in
docs/scale.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def _median_ms(fn, n: int, paused) -> float:
    """Median ms of ``n`` calls of ``fn``, each with the collector off (``paused()``), as the worker's
    request loop runs every request (:func:`kbv.sandbox.timer.gc_paused`)."""
    xs = []
    for _ in range(n):
        with paused():
            t0 = time.perf_counter()
            fn()
            xs.append((time.perf_counter() - t0) * 1e3)
    return round(statistics.median(xs), 3)


def measure(device: str, problem: Path, candidate: Path, n: int) -> dict:
    import multiprocessing as mp

    from kbv.intake.problems import load_problem
    from kbv.model.records import EvalConfig
    from kbv.reference import inputs as inp
    from kbv.reference.build import build_reference
    from kbv.sandbox import numeric_flags, protocol as p
    from kbv.sandbox import worker as w
    from kbv.sandbox.confinement import WorkerSetup
    from kbv.sandbox.timer import l2_flush_bytes

    config = EvalConfig(device=device)
    rp = build_reference(load_problem(problem), config)
    d = tempfile.mkdtemp()
    conn, _other = mp.Pipe()
    setup = WorkerSetup(workdir=d, build_dir=d, log_path=f"{d}/log", device=device, cgroup=None, uid=None,
                        shm_bytes=1 << 30, max_tasks=1000, preload=(), parent_notes=())
    t0 = time.perf_counter()
    s = w._Server(conn, setup, [])
    start_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    loaded = s.load(p.Load(str(candidate), "kbv_bench_candidate", tuple(rp.init_args), config.init_seed, device,
                           "fp32", numeric_flags.flags_for("eager-fp32")))
    load_ms = (time.perf_counter() - t0) * 1e3
    reports = w._Server._with_reports
    s.guard.check()
    args = inp.draw(rp.module.get_inputs, 1, rp.device)
    sets = [tuple(inp.draw(rp.module.get_inputs, k, rp.device)) for k in range(2)]
    out_bytes = sum(t.numel() * t.element_size() for t in rp.model(*args) if hasattr(t, "numel")) \
        if isinstance(rp.model(*args), (tuple, list)) else rp.model(*args).numel() * rp.model(*args).element_size()
    ready = s.set_timing_inputs(p.SetTimingInputs(tuple(sets), slot_bytes=max(1 << 20, out_bytes), slots=2))
    flush = l2_flush_bytes(rp.device)
    parts = {
        "guard.check": lambda: s.guard.check(),
        "dispatcher light read": lambda: s._dispatcher.check(full=False) if s._dispatcher else None,
        "torch.library registry": lambda: s._new_op_kernels(False),
        "mode shield": lambda: s._modes.take(),
        "tensor class watch": lambda: s._tensor_class.check(),
        "all reports": lambda: reports(s, p.Pong(), False),
        "flag check": lambda: s._check_flags(),
        "timed call's inputs": lambda: s._call_inputs(s._call_buffers[0], s.timing_sets, 0, (1, 7), ()),
        "timed call's clock (one_call)": lambda: s._one_call(s.model, s._call_buffers[0], device=s.device,
                                                             flush_bytes=flush),
        "forward's input copies": lambda: s._forward_args(p.Forward(tuple(args), probes=False)),
        "model call": lambda: s.model(*args),
        "free-memory poison": lambda: s.integrity.poison_free_memory(s.device, s.last_sizes),
    }
    handlers = {
        "Ping": lambda: reports(s, s.ping(p.Ping()), False),
        "Forward (no probes)": lambda: reports(s, s.forward(p.Forward(tuple(args), probes=False)), False),
        "Forward (probes)": lambda: reports(s, s.forward(p.Forward(tuple(args))), False),
        "TimedCall": lambda: reports(s, s.timed_call(p.TimedCall(0, flush, (1, 7), ())), False),
    }
    return {"device": device, "problem": str(problem), "candidate": str(candidate), "n": n,
            "loaded": type(loaded).__name__, "timing_ready": type(ready).__name__,
            "server_start_ms": round(start_ms, 1), "load_ms": round(load_ms, 1),
            "parts_ms": {k: _median_ms(f, n, s.timing.gc_paused) for k, f in parts.items()},
            "requests_ms": {k: _median_ms(f, n, s.timing.gc_paused) for k, f in handlers.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--problem", type=Path)
    ap.add_argument("--candidate", type=Path)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    data = ROOT / "src" / "kbv" / "data"
    problem = a.problem or data / ("problems" if a.device == "cuda" else "problems_cpu") / "level1" / "1_ReLU.py"
    candidate = a.candidate or (data / "candidates" / "relu_cuda.py" if a.device == "cuda"
                                else ROOT / "tests" / "data" / "candidates" / "relu_torch.py")
    out = measure(a.device, problem, candidate, a.n)
    text = json.dumps(out, indent=1)
    if a.json:
        a.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
