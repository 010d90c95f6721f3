"""The per-call cost of a 2048^2 TF32 matmul on cuda, timed one call at a time against a loop of
calls (the gap behind ``kbv.sandbox.timer``'s launch cover and warm-up: one call timed alone read
0.14 ms where a loop read 0.05 ms). Goal: the one-call figure within 10 % of the loop's once the
GPU is warm. Command (GPU host, repo root): ``python3 bench/diag_tf32.py``; writes
``$OUT/diag_tf32.json``."""
import json, os, sys, time, statistics as st
import torch
sys.path.insert(0, "src")
from kbv.sandbox import timer as timing

dev = torch.device("cuda:0")
A = torch.rand(2048, 2048, device=dev); B = torch.rand(2048, 2048, device=dev)
l2 = torch.cuda.get_device_properties(0).L2_cache_size

def plain(a, b):
    return torch.matmul(a, b)

def flipping(a, b):
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved

res = {}
for cover in (timing.LAUNCH_COVER_CYCLES, 10 * timing.LAUNCH_COVER_CYCLES):
    timing.LAUNCH_COVER_CYCLES = cover
    for name, fn, tf32 in (("plain-tf32", plain, True), ("flip", flipping, False), ("plain-fp32", plain, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for gap_ms in (0, 1, 5):
            ts = []
            for i in range(40):
                if gap_ms:
                    time.sleep(gap_ms / 1e3)
                ms, out, _ = timing.one_call(fn, (A, B), device=dev, flush_bytes=2 * l2)
                del out
                ts.append(ms)
            key = f"cover{cover}-{name}-gap{gap_ms}ms"
            res[key] = [round(st.median(ts[5:]), 4), round(min(ts[5:]), 4), round(max(ts[5:]), 4), [round(t, 3) for t in ts[5:15]]]
            print(key, res[key][:3], res[key][3], flush=True)
torch.backends.cuda.matmul.allow_tf32 = False
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), "diag_tf32.json"), "w"), indent=1)
