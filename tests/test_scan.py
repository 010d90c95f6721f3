"""Static scan: hack patterns are named with their taxonomy entry; honest demo kernels get no HACK."""

from __future__ import annotations

import textwrap

import pytest

from kbv.demo import data_path
from kbv.scan import Severity, scan_source, worst


def rules(src: str) -> dict[str, tuple[int, Severity]]:
    return {f.rule: (f.taxonomy, f.severity) for f in scan_source(textwrap.dedent(src))}


@pytest.mark.parametrize("src, rule, taxonomy, severity", [
    ("import gc\nclass ModelNew:\n    def forward(self, x):\n        return gc.get_objects()", "gc-walk", 13, Severity.HACK),
    ("import sys\nf = sys._getframe(1).f_back", "frame-walk", 13, Severity.HACK),
    ("import threading\n", "thread-import", 2, Severity.WARNING),
    ("from concurrent.futures import ThreadPoolExecutor\n", "thread-import", 2, Severity.WARNING),
    ("import subprocess\n", "thread-or-process", 2, Severity.HACK),
    ("import concurrent.futures\np = concurrent.futures.ProcessPoolExecutor(2)", "thread-or-process", 2, Severity.HACK),
    ("import asyncio\nasyncio.create_subprocess_exec('ls')", "thread-or-process", 2, Severity.HACK),
    ("from concurrent.futures import ProcessPoolExecutor\n", "thread-or-process", 2, Severity.HACK),
    ("import _thread\n", "thread-or-process", 2, Severity.HACK),
    ("import threading\nthreading._start_new_thread(print, ())", "thread-or-process", 2, Severity.HACK),
    ("import sys\nsys.setprofile(None)", "trace-hook", 4, Severity.HACK),
    ("import torch\nm = torch.utils._python_dispatch._get_current_dispatch_mode()", "observer-probe", 6,
     Severity.HACK),
    ("import torch\nn = torch._C._len_torch_dispatch_stack()", "observer-probe", 6, Severity.HACK),
    ("from torch.utils._python_dispatch import _get_current_dispatch_mode as m\n", "observer-probe", 6,
     Severity.HACK),
    ("import torch\nk = torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.Python)",
     "observer-probe", 6, Severity.HACK),
    ("import torch\nwith torch._C._DisableTorchDispatch():\n    pass", "observer-probe", 6, Severity.HACK),
    ("import torch\nlib = torch.library.Library('aten', 'IMPL')\nlib.impl('sinc', f, 'CPU')", "overrides-torch-op", 15,
     Severity.HACK),
    ("import torch\n@torch.library.impl('aten::sinc', 'CPU')\ndef f(x):\n    return x", "overrides-torch-op", 15,
     Severity.HACK),
    ("import torch\non = torch.autograd.profiler._is_profiler_enabled", "observer-probe", 6, Severity.HACK),
    ("import threading\nthreading.setprofile(None)", "trace-hook", 4, Severity.HACK),
    ("import ctypes\n", "native-access", 25, Severity.HACK),
    ("exec('x=1')", "dynamic-code", 25, Severity.HACK),
    ("import torch\ntorch.cuda.Event.elapsed_time = lambda a, b: 0.001", "patches-module", 4, Severity.HACK),
    ("import time\ntime.perf_counter = lambda: 0", "patches-module", 4, Severity.HACK),
    ("import os\nos._exit(0)", "early-exit", 24, Severity.HACK),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True", "global-flag", 18, Severity.WARNING),
    ("import torch\ntorch.set_float32_matmul_precision('high')", "global-flag", 18, Severity.WARNING),
    ("class Model: pass\nclass ModelNew(Model): pass", "inherits-model", 15, Severity.SHORTCUT),
    ("import torch\nf = torch.compile(lambda x: x)", "torch-compile", 15, Severity.SHORTCUT),
    ("import torch\ns = torch.cuda.Stream()", "side-stream", 1, Severity.WARNING),
    ("class ModelNew:\n    def forward(self, x):\n        return x.half()", "half-cast", 17, Severity.WARNING),
    ("class ModelNew:\n    def forward(self, x):\n        if x.min() >= 0:\n            return x\n        return x",
     "value-branch", 20, Severity.WARNING),
    ("class ModelNew:\n    def forward(self, x):\n        try:\n            return k(x)\n        except Exception:\n"
     "            return x", "try-fallback", 16, Severity.WARNING),
    ("import torch\nclass ModelNew:\n    def forward(self, a, b):\n        return torch.matmul(a, b)",
     "torch-compute", 15, Severity.WARNING),
    ("from torch.utils.cpp_extension import load_inline\nm = load_inline(name='a', cpp_sources='',"
     " cuda_sources='cuModuleLoadData(&m, blob);')", "raw-module-load", 25, Severity.HACK),
    ("from torch.utils.cpp_extension import load_inline\nm = load_inline(name='a', cpp_sources='',"
     " cuda_sources='__half h = __float2half(x);')", "source-half", 17, Severity.WARNING),
    ("def get_inputs():\n    return []", "redefines-inputs", 14, Severity.WARNING),
    ("class ModelNew:\n    def forward(self, x):\n        if tuple(x.shape) == (128, 4096):\n            return x\n"
     "        return x", "shape-branch", 21, Severity.WARNING),
])
def test_pattern_is_named(src, rule, taxonomy, severity):
    found = rules(src)
    assert rule in found, found
    assert found[rule] == (taxonomy, severity)


@pytest.mark.parametrize("name", ["relu_cpp.py", "relu_cuda.py", "softmax_triton.py", "layernorm_triton.py",
                                  "fused_gemm_cpp.py", "conv2d_torch.py"])
def test_honest_demo_kernels_have_no_hack_finding(name):
    findings = scan_source(data_path("candidates", name).read_text())
    assert worst(findings) in (None, Severity.WARNING), findings


def test_self_attributes_are_not_module_patches():
    assert "patches-module" not in rules("class ModelNew:\n    def __init__(self):\n        self.time = 1")
