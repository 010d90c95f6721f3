"""The GPU benches' batch: five KernelBench-format problems and 40 honest candidates for them (16
CUDA ``load_inline`` kernels from bench/kernels_cuda.py, 24 Triton kernels from
bench/kernels_triton.py), plus one CUDA file that does not compile.

    python3 bench/gpu_kernels.py --check-triton   # Triton kernels vs torch on CPU (TRITON_INTERPRET=1)
    python3 bench/gpu_kernels.py --check-cuda     # every CUDA source through nvcc -c (no GPU needed)
    python3 bench/gpu_kernels.py --write DIR      # DIR/problems/level1/*.py, DIR/runs/gpu/*_kernel.py

Problems (float32 ``torch.rand`` inputs of ``rows`` x ``cols``, 4096 x 4096 by default: 64 MiB per
tensor, tens of microseconds per call on an H200): 1 ReLU, 2 Softmax (dim 1), 3 LayerNorm (last
dimension, affine), 4 SiLU, 5 RowSum (``torch.sum(x, dim=1)``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernels_cuda import broken_kernel, cuda_kernels  # noqa: E402
from kernels_triton import triton_kernels  # noqa: E402

#: problem id -> (name, forward body, init inputs)
PROBLEMS = {
    1: ("ReLU", "return torch.relu(x)", "[]"),
    2: ("Softmax", "return torch.softmax(x, dim=1)", "[]"),
    3: ("LayerNorm", "return self.ln(x)", "[cols]"),
    4: ("SiLU", "return torch.nn.functional.silu(x)", "[]"),
    5: ("RowSum", "return torch.sum(x, dim=1)", "[]"),
}
IDS = {name: pid for pid, (name, _, _) in PROBLEMS.items()}

PROBLEM = '''"""{name} of a {rows} x {cols} float32 input (kbv GPU bench problem)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self{init_sig}):
        super().__init__(){init}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        {body}


rows = {rows}
cols = {cols}


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return {init_inputs}
'''


def problem_source(pid: int, rows: int, cols: int) -> str:
    name, body, init_inputs = PROBLEMS[pid]
    ln = name == "LayerNorm"
    return PROBLEM.format(name=name, rows=rows, cols=cols, body=body, init_inputs=init_inputs,
                          init_sig=", normalized_shape: int" if ln else "",
                          init="\n        self.ln = nn.LayerNorm(normalized_shape)" if ln else "")


def write_problems(root: Path, rows: int = 4096, cols: int = 4096) -> Path:
    """``root/level1/<id>_<Name>.py`` for every problem; returns ``root``."""
    (root / "level1").mkdir(parents=True, exist_ok=True)
    for pid, (name, _, _) in PROBLEMS.items():
        (root / "level1" / f"{pid}_{name}.py").write_text(problem_source(pid, rows, cols))
    return root


def kernels(broken: bool = True) -> list[tuple[str, str, str, str]]:
    """(problem name, backend, label, source) of every candidate: 16 CUDA, 24 Triton (all honest),
    and with ``broken`` one CUDA file that does not compile."""
    out = [(p, "cuda", label, src) for p, label, src in cuda_kernels()]
    out += [(p, "triton", label, src) for p, label, src in triton_kernels()]
    if broken:
        p, label, src = broken_kernel()
        out.append((p, "cuda", label, src))
    return out


def write_run(run_dir: Path, chosen: list[tuple[str, str, str, str]]) -> dict[str, tuple[str, str, str]]:
    """One KernelBench-layout file per candidate (``level_1_problem_<id>_sample_<s>_kernel.py``);
    returns file name -> (problem, backend, label)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    counters: dict[int, int] = {}
    names = {}
    for problem, backend, label, src in chosen:
        pid = IDS[problem]
        s = counters[pid] = counters.get(pid, -1) + 1
        name = f"level_1_problem_{pid}_sample_{s}_kernel.py"
        (run_dir / name).write_text(src)
        names[name] = (problem, backend, label)
    return names


def check_triton(rows: int = 64, cols: int = 1000) -> list[str]:
    """Each Triton kernel under the Triton interpreter on CPU tensors against the torch reference
    (an odd column count exercises the masks). Returns the failures (empty: all match)."""
    os.environ["TRITON_INTERPRET"] = "1"
    import importlib.util

    import torch

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        probs = write_problems(Path(tmp) / "p", rows, cols)
        for problem, backend, label, src in kernels(broken=False):
            if backend != "triton":
                continue
            pid = IDS[problem]
            ref = _module(probs / "level1" / f"{pid}_{problem}.py", f"p{pid}")
            path = Path(tmp) / f"c_{problem}_{label}.py"
            path.write_text(src)
            cand = _module(path, f"c_{problem}_{label}")
            torch.manual_seed(42)
            model = ref.Model(*ref.get_init_inputs())
            torch.manual_seed(42)
            new = cand.ModelNew(*ref.get_init_inputs())
            for scale in (1.0, -1.0, 3.0, 1000.0):
                x = ref.get_inputs()[0] * scale
                want, got = model(x), new(x)
                if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
                    err = (got - want).abs().max().item() if got.shape == want.shape else "shape"
                    failures.append(f"{problem} {label} x{scale}: max error {err}")
    return failures


def _module(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_cuda(arch: str = "sm_90") -> list[str]:
    """Every CUDA candidate's CUDA source compiled with ``nvcc -c`` against torch's headers (the
    flags ``load_inline`` adds for a CUDA source, less the Python binding), and the broken one
    refused. Returns the failures."""
    from torch.utils.cpp_extension import include_paths

    import sysconfig

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # ATen/cuda/CUDAContext.h pulls in cuBLAS and cuSPARSE headers, which a toolkit without
        # those libraries lacks: a shim gives the one name the kernels use from it (and a CPU
        # build of torch lacks c10's generated CUDA macro header)
        shim = Path(tmp) / "shim" / "ATen" / "cuda"
        shim.mkdir(parents=True)
        (Path(tmp) / "shim" / "c10" / "cuda" / "impl").mkdir(parents=True)
        (Path(tmp) / "shim" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text(
            "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        (shim / "CUDAContext.h").write_text("#pragma once\n#include <c10/cuda/CUDAStream.h>\n"
                                            "namespace at { namespace cuda { using c10::cuda::getCurrentCUDAStream; } }\n")
        incs = [f"-I{Path(tmp) / 'shim'}"] + [f"-I{p}" for p in include_paths()] + [
            f"-I{sysconfig.get_paths()['include']}"]
        for problem, backend, label, src in kernels(broken=True):
            if backend != "cuda":
                continue
            cu = re.search(r'_CUDA_SOURCE = r"""(.*?)"""', src, re.S)
            path = Path(tmp) / f"{problem}_{label}.cu"
            path.write_text(cu[1] if cu else "")
            proc = subprocess.run(["nvcc", "-c", "-O3", f"-arch={arch}", "-std=c++17", "--expt-relaxed-constexpr",
                                   "-D__CUDA_NO_HALF_OPERATORS__", *incs, str(path), "-o", str(path.with_suffix(".o"))],
                                  capture_output=True, text=True)
            ok = proc.returncode == 0
            if ok == (label == "broken"):
                failures.append(f"{problem} {label}: nvcc exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check-triton", action="store_true")
    ap.add_argument("--check-cuda", action="store_true")
    ap.add_argument("--write", type=Path, metavar="DIR")
    a = ap.parse_args()
    bad: list[str] = []
    if a.check_triton:
        bad += check_triton()
    if a.check_cuda:
        bad += check_cuda()
    if a.write:
        write_problems(a.write / "problems")
        print(f"{len(write_run(a.write / 'runs' / 'gpu', kernels()))} candidates under {a.write / 'runs' / 'gpu'}")
    for line in bad:
        print("FAIL", line)
    if bad:
        raise SystemExit(1)
    print(f"{len(kernels(broken=False))} honest kernels; checks passed")


if __name__ == "__main__":
    main()
