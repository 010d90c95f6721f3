"""Trusted-side bytes moved per job, as a multiple of B (issue 21: "a bench counts bytes moved per
job and reports it as a multiple of B"; goal <= 500 x B, measured ~4,650 x B at full size on the
H200 before the issue's work).

    PYTHONPATH=src .venv/bin/python bench/bytes_per_job.py [--problem P] [--candidate C]
        [--device cpu|cuda] [--json OUT] [--sites]

This process plays the reference worker: it builds the reference and runs one whole verification
(``kbv.pipeline.run.verify``, the default config, every check on) with its candidate worker as kbv
starts it. A ``TorchDispatchMode`` on the calling thread counts, for every aten op the trusted side
runs, the bytes of each tensor it reads (arguments) and writes (outputs): the reference runs, the
float64 oracle, input draws and copies, the comparisons and error statistics, the copies out of the
candidate's shared buffers, the baselines' timed calls. What the candidate worker does is its own
process's and is not counted; nor are ops on other threads of this process (none of the pipeline's
tensor work runs on one). B is one call's input bytes plus output bytes (the reference's). The
figure is per phase as well (the pipeline's own phase marks, ``Context._phase_peak``: ``bound-pass``
holds the timed rounds too, which end at its mark), with the ops that moved the most. A view (``slice``, ``view``, ``detach``, ...) moves nothing and is not counted;
``set_`` (a tensor pointed at a storage, as the shared-memory copies are made) moves nothing either;
``index`` (a gather of sampled positions) counts its indices and the elements it picks, not its source;
an in-place op counts what it reads and what it writes.

Default problem: the demo's ``level1/1_ReLU`` (16 x 16384 float32: B = 2 MiB); candidate:
``tests/data/candidates/relu_torch.py``. Figures: docs/scale.md ("Bytes per job").
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def _nbytes(x) -> int:
    import torch

    if isinstance(x, torch.Tensor) and x.device.type != "meta":
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(y) for y in x)
    if isinstance(x, dict):
        return sum(_nbytes(y) for y in x.values())
    return 0


def _site() -> str:
    """The innermost kbv frame calling the op, ``module:function:line``."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if "/kbv/" in name and "/bench/" not in name:
            return f"{Path(name).stem}:{f.f_code.co_name}:{f.f_lineno}"
        f = f.f_back
    return "?"


def measure(problem: Path, candidate: Path, device: str, sites: bool = False) -> dict:
    """One verification counted (module doc): totals, per phase and per op."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem
    from kbv.model.records import EvalConfig
    from kbv.pipeline import context
    from kbv.pipeline.run import verify
    from kbv.reference import inputs as inp
    from kbv.reference.build import build_reference
    from kbv.processes.host_environment import collect_environment

    since = [0]  # bytes since the last phase mark
    pending: collections.Counter = collections.Counter()  # per op, since the last phase mark
    phase_ops: dict = {}
    pending_sites: collections.Counter = collections.Counter()  # per call site, since the last phase mark
    phase_sites: dict = {}
    by_phase: collections.Counter = collections.Counter()
    by_op: collections.Counter = collections.Counter()
    ops = [0]
    by_site: collections.Counter = collections.Counter()
    # a tensor pointed at another storage, or new memory not yet written (``empty_like`` takes its
    # argument as a template only): nothing read or written
    NO_BYTES = {torch.ops.aten.set_, torch.ops.aten.empty, torch.ops.aten.empty_like,
                torch.ops.aten.empty_strided, torch.ops.aten.new_empty}
    GATHERS = {torch.ops.aten.index}  # an index by a tensor of positions (samples of an output)

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if getattr(func, "is_view", False) or func.overloadpacket in NO_BYTES:  # moves no bytes
                return out
            if func.overloadpacket in GATHERS:  # reads the indices and the elements they pick, not the source
                n = _nbytes(args[1:]) + 2 * _nbytes(out)
            else:
                n = _nbytes(args) + _nbytes(kwargs or {}) + _nbytes(out)
            since[0] += n
            by_op[str(func.overloadpacket)] += n
            pending[str(func.overloadpacket)] += n
            if sites:
                by_site[(_site(), str(func.overloadpacket))] += n
                pending_sites[(_site(), str(func.overloadpacket))] += n
            ops[0] += 1
            return out

    marked = context.Context._phase_peak

    def phase_mark(self, name: str) -> None:  # ``name`` is the phase that just ended
        marked(self, name)
        by_phase[name] += since[0]
        phase_ops.setdefault(name, collections.Counter()).update(pending)
        phase_sites.setdefault(name, collections.Counter()).update(pending_sites)
        since[0] = 0
        pending.clear()
        pending_sites.clear()

    context.Context._phase_peak = phase_mark
    config = EvalConfig(device=device)
    pref, cref = load_problem(problem), load_candidate(candidate)
    rp = build_reference(pref, config)
    sample = inp.draw(rp.module.get_inputs, 0, "meta")
    in_bytes = sum(a.numel() * a.element_size() for a in sample if isinstance(a, torch.Tensor))
    t0 = time.perf_counter()
    with Count():
        v = verify(rp, cref, config, collect_environment(device))
    wall = time.perf_counter() - t0
    context.Context._phase_peak = marked
    by_phase["verdict"] += since[0]
    b = in_bytes + max(rp.output_bytes, 0)
    total = sum(by_phase.values())
    return {"problem": str(problem), "candidate": str(candidate), "device": device, "status": v.status.value,
            "B_bytes": b, "bytes": total, "multiple_of_B": total / b if b else None, "aten_ops": ops[0],
            "wall_s": wall,
            "by_phase_x_B": {k: round(n / b, 1) for k, n in by_phase.most_common()},
            "top_ops_x_B": {k: round(n / b, 1) for k, n in by_op.most_common(12)},
            "top_ops_by_phase_x_B": {ph: {k: round(n / b, 1) for k, n in c.most_common(10)}
                                     for ph, c in phase_ops.items() if sum(c.values()) > b},
            **({"top_sites_x_B": {f"{site} {op}": round(n / b, 1) for (site, op), n in by_site.most_common(25)},
                "top_sites_by_phase_x_B": {ph: {f"{site} {op}": round(n / b, 1) for (site, op), n in c.most_common(12)}
                                           for ph, c in phase_sites.items() if sum(c.values()) > b}}
               if sites else {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", type=Path, default=ROOT / "src/kbv/data/problems/level1/1_ReLU.py")
    ap.add_argument("--candidate", type=Path, default=ROOT / "tests/data/candidates/relu_torch.py")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--sites", action="store_true", help="also the kbv call sites that moved the most")
    args = ap.parse_args()
    out = measure(args.problem, args.candidate, args.device, args.sites)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
