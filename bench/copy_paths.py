"""Where the candidate worker's bound-pass loop spends its extra milliseconds per GiB on cuda
(docs/anti-cheat.md, "Who measures each number"): the output copy's paths timed side by side.

    PYTHONPATH=src python3 bench/copy_paths.py [--mib 1024] [--json FILE]

Per path, the median of 5 CUDA-event times and of 5 host walls (``perf_counter`` around the copy
and a synchronize) of one copy of ``--mib`` MiB: torch's ``copy_`` between two tensors of this
process, the driver's ``cuMemcpy`` (kbv.sandbox.rawcopy's route) between the same two, and both
again with the destination allocated by another process and opened here through CUDA IPC (as the
candidate worker's slots and the bound pass's input sets are shared with the reference worker),
plus an elementwise kernel (``clamp_min``) reading IPC memory against reading local memory.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time

import torch
import torch.multiprocessing as mp


def _timed(fn, reps: int = 5) -> dict:
    fn()
    torch.cuda.synchronize()
    ev, wall = [], []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        ev.append(s.elapsed_time(e))
    return {"event_ms": statistics.median(ev), "wall_ms": statistics.median(wall)}


def _measure(shared: torch.Tensor, q) -> None:
    from kbv.sandbox import pointers

    lib = pointers.copier()
    n = shared.numel()
    src = torch.randn(n // 4, device="cuda").view(torch.uint8)
    local = torch.empty(n, dtype=torch.uint8, device="cuda")

    def cu(dst):
        return lambda: lib.cuMemcpy(ctypes.c_uint64(dst.data_ptr()), ctypes.c_uint64(src.data_ptr()),
                                    ctypes.c_size_t(n))

    res = {
        "torch_copy_local": _timed(lambda: local.copy_(src)),
        "cuMemcpy_local": _timed(cu(local)),
        "torch_copy_ipc": _timed(lambda: shared.copy_(src)),
        "cuMemcpy_ipc": _timed(cu(shared)),
        "clamp_read_local": _timed(lambda: torch.clamp_min(local.view(torch.float32), 0)),
        "clamp_read_ipc": _timed(lambda: torch.clamp_min(shared.view(torch.float32), 0)),
    }
    q.put(res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--json")
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    shared = torch.zeros(a.mib << 20, dtype=torch.uint8, device="cuda")  # this process owns it
    q = ctx.Queue()
    p = ctx.Process(target=_measure, args=(shared, q))
    p.start()
    res = q.get(timeout=300)
    p.join(60)
    res = {"mib": a.mib, "gpu": torch.cuda.get_device_name(), **res}
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
