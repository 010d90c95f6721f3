"""What bench/fidelity.py runs under ncu: one candidate on one input draw, ``calls`` forward calls
between ``cudaProfilerStart`` and ``cudaProfilerStop`` (ncu ``--profile-from-start off`` profiles
only those), after untimed warmup calls (Triton compiles, the extension loads).

    python3 bench/fidelity_target.py PROBLEM CANDIDATE CALLS

Trusted code only: the bench's own candidates, imported here without kbv's sandbox.
"""

from __future__ import annotations

import importlib.util
import sys

import torch


def _module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    problem, candidate, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ref = _module(problem, "kbv_fidelity_problem")
    cand = _module(candidate, "kbv_fidelity_candidate")
    torch.manual_seed(42)
    init = ref.get_init_inputs()
    model = cand.ModelNew(*init).cuda()
    x = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref.get_inputs()]
    with torch.no_grad():
        for _ in range(5):
            model(*x)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for _ in range(calls):
            model(*x)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"KBV_NCU_CALLS {calls}", flush=True)


if __name__ == "__main__":
    main()
