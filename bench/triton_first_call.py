"""Where a Triton candidate's first forward goes in a fresh process (docs/scale.md, "Triton's first call").

Each run is a fresh ``python3`` child that imports torch and Triton, loads a candidate file, builds
``ModelNew`` and calls it once on the problem's inputs under cProfile; the child reports the wall
seconds of the import, the first and the second forward (each ended by a device synchronisation),
and the cumulative seconds of the Triton functions that can dominate a first call: the key of
Triton's own sources (``triton_key``), the driver's utilities (``CudaUtils``), compiling a kernel
(``compile``), compiling its launcher (``make_launcher``/``compile_module_from_src``) and loading
the binary (``load_binary``). Runs: ``cold`` (an empty ``TRITON_CACHE_DIR``), ``warm`` (the same
directory again), ``warm-keyed`` (warm, with ``triton_key`` computed before the clock starts, as a
process forked from a parent that computed it would have it).

Usage: ``python3 bench/triton_first_call.py [--problem P] [--candidate C] [--json OUT]`` (cuda).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import cProfile, importlib.util, json, pstats, sys, time
t0 = time.perf_counter()
import torch, triton
t_import = time.perf_counter() - t0
if sys.argv[3] == "1":
    from triton.compiler.compiler import triton_key
    triton_key()
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
prob, cand = load(sys.argv[1], "problem"), load(sys.argv[2], "candidate")
torch.manual_seed(0)
model = cand.ModelNew(*prob.get_init_inputs()).cuda()
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
torch.cuda.synchronize()
prof = cProfile.Profile()
t1 = time.perf_counter(); prof.enable(); model(*inputs); torch.cuda.synchronize(); prof.disable()
first = time.perf_counter() - t1
t2 = time.perf_counter(); model(*inputs); torch.cuda.synchronize(); second = time.perf_counter() - t2
stats = pstats.Stats(prof).stats
parts = {}
for (file, line, fn), (cc, nc, tt, ct, callers) in stats.items():
    for want in ("triton_key", "__init__:CudaUtils", "compile", "make_launcher", "compile_module_from_src",
                 "load_binary", "_init_handles", "get_cache_key", "_do_compile"):
        name, _, where = want.partition(":")
        if fn == name and (not where or where.lower() in file.lower() or name != "__init__"):
            parts[f"{want}@{file.rsplit('/', 2)[-2]}/{file.rsplit('/', 1)[-1]}"] = round(ct, 4)
top = sorted(((ct, f"{fn}@{file.rsplit('/', 1)[-1]}:{line}") for (file, line, fn), (_, _, _, ct, _) in stats.items()),
             reverse=True)[:25]
print(json.dumps({"import_s": round(t_import, 3), "first_forward_s": round(first, 4), "second_forward_s": round(second, 5),
                  "parts": parts, "top_cumulative": [[round(c, 4), n] for c, n in top]}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="src/kbv/data/problems/level1/2_Softmax.py")
    ap.add_argument("--candidate", default="src/kbv/data/candidates/softmax_triton.py")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(cache, "triton"), TRITON_HOME=cache)
        for run, keyed in (("cold", "0"), ("warm", "0"), ("warm-keyed", "1")):
            out = subprocess.run([sys.executable, "-c", _CHILD, args.problem, args.candidate, keyed],
                                 env=env, capture_output=True, text=True, timeout=300)
            if out.returncode != 0:
                results[run] = {"error": out.stderr[-2000:]}
            else:
                results[run] = json.loads(out.stdout.strip().splitlines()[-1])
            print(run, json.dumps(results[run])[:1500], flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
