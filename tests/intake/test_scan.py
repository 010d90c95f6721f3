"""Static scan: hack patterns are named with their taxonomy entry; honest demo kernels get no HACK."""

from __future__ import annotations

import textwrap

import pytest

from kbv.demo import data_path
from kbv.intake.scan import Severity, scan_file, scan_source, worst


def rules(src: str) -> dict[str, tuple[int, Severity]]:
    return {f.rule: (f.taxonomy, f.severity) for f in scan_source(textwrap.dedent(src))}


@pytest.mark.parametrize("src, rule, taxonomy, severity", [
    ("import gc\nclass ModelNew:\n    def forward(self, x):\n        return gc.get_objects()", "gc-walk", 13, Severity.HACK),
    ("import sys\nf = sys._getframe(1).f_back", "frame-walk", 13, Severity.HACK),
    # a red-team helper's two wins (2026-12-06): the worker's locals reached through traceback's frames
    # (its guard swapped, its clock edited: PASS 7.7x), and the op counter seen by its callers' names
    ("import traceback\nfor fr, _ in traceback.walk_stack(None):\n    v = getattr(fr, 'f_' + 'locals')",
     "frame-walk", 13, Severity.HACK),
    ("import traceback as tb\nnames = [f.name for f in tb.extract_stack()]", "frame-walk", 13, Severity.HACK),
    ("from traceback import format_stack\ns = format_stack()", "frame-walk", 13, Severity.HACK),
    ("import sys\nf = sys._current_frames()", "frame-walk", 13, Severity.HACK),
    ("def g():\n    yield\ngen = g()\nf = gen.gi_frame", "frame-walk", 13, Severity.HACK),
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
    ("import ctypes\n", "ffi-import", 25, Severity.WARNING),
    ("import mmap\n", "native-access", 25, Severity.HACK),
    ("import ctypes\napi = ctypes.pythonapi", "python-capi", 25, Severity.HACK),
    ("import ctypes\nlib = ctypes.CDLL(None)\nf = lib.PyEval_GetFrame", "python-capi", 25, Severity.HACK),
    ("import ctypes\nlib = ctypes.CDLL(None)\nf = getattr(lib, 'PyFrame_GetLocals')", "python-capi", 25, Severity.HACK),
    ("import ctypes\nlib = ctypes.PyDLL(None)", "python-capi", 25, Severity.HACK),
    ("import ctypes\nlib = ctypes.CDLL(None)", "ffi-process-symbols", 25, Severity.WARNING),
    ("import ctypes\nctypes.memmove(id(f) + 24, b, 8)", "raw-object-memory", 25, Severity.HACK),
    ("import ctypes\nv = ctypes.c_long.from_address(id(f.__kwdefaults__))", "raw-object-memory", 25, Severity.HACK),
    ("f = open('/proc/self/mem', 'rb+')", "native-access", 25, Severity.HACK),
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


# Native sources are read where the compiler gets them ------------------------------------------

LOAD = "from torch.utils.cpp_extension import load_inline\n"


def found_rules(src: str, path=None) -> dict[str, tuple[int, Severity, int]]:
    return {f.rule: (f.taxonomy, f.severity, f.line) for f in scan_source(textwrap.dedent(src), path)}


@pytest.mark.parametrize("src", [
    # a module-level constant (the usual layout)
    LOAD + 'SRC = r"""\n#include <dlfcn.h>\nvoid* f() { return dlsym(RTLD_DEFAULT, "x"); }\n"""\n'
           'm = load_inline(name="a", cpp_sources=SRC, functions=["f"])\n',
    # concatenation that splits the token across two constants
    LOAD + 'HEAD = "void* f() { return dl"\nSRC = HEAD + "sym(RTLD_DEFAULT, name); }"\n'
           'm = load_inline(name="a", cpp_sources=SRC)\n',
    # f-string, .format, textwrap.dedent, a list, positional arguments
    LOAD + 'import textwrap\nFN = "dlsym"\nSRC = textwrap.dedent(f"""\n    void* f() {{ return {FN}(h, n); }}\n""")\n'
           'm = load_inline("a", [SRC])\n',
    LOAD + 'T = "void* f() {{ return {0}(h, n); }}"\nm = load_inline("a", T.format("dlsym"))\n',
    # +=, **kwargs
    LOAD + 'SRC = "#include <dlfcn.h>\\n"\nSRC += "void* g() { return dlsym(h, n); }"\n'
           'KW = dict(name="a", cpp_sources=SRC)\nm = load_inline(**KW)\n',
    # a class attribute and a function returning the source
    LOAD + 'def src():\n    return "void* g() { return dlsym(h, n); }"\nm = load_inline(name="a", cpp_sources=src())\n',
    # a helper whose parameter the resolver cannot follow: the file-wide pass reads the string
    LOAD + 'SRC = "void* g() { return dlsym(h, n); }"\ndef build(s):\n    return load_inline(name="a", cpp_sources=s)\n'
           'm = build(SRC)\n',
])
def test_sources_held_in_variables_are_scanned(src):
    assert found_rules(src)["source-native-patch"][:2] == (25, Severity.HACK)


def test_source_finding_is_placed_on_the_line_that_holds_it():
    src = LOAD + 'X = 1\nSRC = """\n#include <Python.h>\nvoid f() {\n  PyFrameObject* fr = PyEval_GetFrame();\n}\n"""\n' \
                 'm = load_inline(name="a", cpp_sources=SRC)\n'
    assert found_rules(src)["source-frame-access"] == (13, Severity.HACK, 6)


@pytest.mark.parametrize("name", ["PyEval_GetFrame()", "PyFrame_GetLocals(f)", "PyThreadState_Get()",
                                  "PyEval_GetLocals()", "PyFrame_GetBack(f)", "_PyThreadState_GetDict()",
                                  "PyThreadState_GetFrame(ts)", "PyGILState_GetThisThreadState()"])
def test_frame_and_thread_state_api_in_native_source_is_hack(name):
    src = LOAD + f'SRC = "void f() {{ auto p = {name}; }}"\nm = load_inline(name="a", cpp_sources=SRC)\n'
    assert found_rules(src)["source-frame-access"][:2] == (13, Severity.HACK)


@pytest.mark.parametrize("code, rule, severity", [
    ("mprotect(p, n, PROT_NONE);", "source-fault-handler", Severity.HACK),
    ("struct sigaction sa; sa.sa_sigaction = h; sigaction(SIGSEGV, &sa, nullptr);", "source-fault-handler",
     Severity.HACK),
    ("signal(SIGSEGV, handler);", "source-fault-handler", Severity.HACK),
    ("int fd = syscall(SYS_userfaultfd, O_CLOEXEC);", "source-fault-handler", Severity.HACK),
    ("int fd = memfd_create(\\\"out\\\", 0);", "source-raw-mapping", Severity.WARNING),
    ("PyGILState_STATE s = PyGILState_Ensure(); PyGILState_Release(s);", "source-python-call", Severity.WARNING),
    ("std::thread t(work); t.join();", "source-thread", Severity.WARNING),
])
def test_native_source_rules(code, rule, severity):
    src = LOAD + f'SRC = "void f() {{ {code} }}"\nm = load_inline(name="a", cpp_sources=SRC)\n'
    assert found_rules(src)[rule][1] is severity


@pytest.mark.parametrize("where", ["inline", "variable"])
def test_joined_threads_are_a_warning_wherever_the_source_is(where):
    body = 'void f() { std::vector<std::thread> ts; for (int i = 0; i < 4; ++i) ts.emplace_back(w, i); ' \
           'for (auto& t : ts) t.join(); }'
    src = LOAD + (f'm = load_inline(name="a", cpp_sources="{body}")\n' if where == "inline"
                  else f'SRC = "{body}"\nm = load_inline(name="a", cpp_sources=SRC)\n')
    findings = scan_source(src)
    assert {f.rule for f in findings} >= {"source-thread"}
    assert worst(findings) is Severity.WARNING, findings


def test_comments_docstrings_and_messages_are_not_sources():
    src = LOAD + '''"""Never calls dlsym, mprotect or PyEval_GetFrame (a docstring)."""
SRC = r"""
// no dlsym or mprotect here; signal (done) is a word in a comment
/* PyEval_GetFrame would read frames */
float f(float x) { return x > 0 ? x : 0; }
"""
m = load_inline(name="a", cpp_sources=SRC)
def check():
    raise RuntimeError("could not dlopen libfoo; install it")
'''
    assert worst(scan_source(src)) is None, scan_source(src)


def test_a_comment_marker_inside_a_c_string_does_not_hide_the_rest_of_the_line():
    src = LOAD + 'SRC = r"""\nvoid f() { const char* u = "http://x"; void* p = dlsym(h, "n"); }\n"""\n' \
                 'm = load_inline(name="a", cpp_sources=SRC)\n'
    assert "source-native-patch" in found_rules(src)


@pytest.mark.parametrize("reader", [
    'open(os.path.join(os.path.dirname(__file__), "k.cpp")).read()',
    'Path(__file__).with_name("k.cpp").read_text()',
    '(Path(__file__).resolve().parent / "k.cpp").read_text()',
    'open("k.cpp").read()',
])
def test_sources_read_from_files_beside_the_candidate(tmp_path, reader):
    (tmp_path / "k.cpp").write_text("#include <Python.h>\nvoid f() { auto fr = PyEval_GetFrame(); }\n")
    cand = tmp_path / "cand.py"
    cand.write_text(LOAD + f"import os\nfrom pathlib import Path\nSRC = {reader}\n"
                           "m = load_inline(name='a', cpp_sources=SRC)\n")
    assert "source-frame-access" in {f.rule for f in scan_file(cand)}
    # without the candidate's path nothing beside it is read
    assert "source-frame-access" not in {f.rule for f in scan_source(cand.read_text())}


def test_with_open_alias_and_load_sources(tmp_path):
    (tmp_path / "k.cpp").write_text("void f(void* p) { mprotect(p, 4096, PROT_NONE); }\n")
    cand = tmp_path / "cand.py"
    cand.write_text(LOAD + "with open('k.cpp') as fh:\n    SRC = fh.read()\nm = load_inline(name='a', cpp_sources=SRC)\n")
    assert "source-fault-handler" in {f.rule for f in scan_file(cand)}
    cand.write_text("from torch.utils.cpp_extension import load\nimport os\n"
                    "m = load(name='a', sources=[os.path.join(os.path.dirname(__file__), 'k.cpp')])\n")
    assert "source-fault-handler" in {f.rule for f in scan_file(cand)}


def test_files_outside_the_candidate_directory_are_not_read(tmp_path):
    (tmp_path / "k.cpp").write_text("void f(void* p) { mprotect(p, 4096, PROT_NONE); }\n")
    (tmp_path / "sub").mkdir()
    cand = tmp_path / "sub" / "cand.py"
    cand.write_text(LOAD + "SRC = open('../k.cpp').read()\nm = load_inline(name='a', cpp_sources=SRC)\n")
    assert "source-fault-handler" not in {f.rule for f in scan_file(cand)}


def test_ctypes_loading_a_prebuilt_library_is_only_a_warning():
    src = """
    import ctypes, ctypes.util
    import torch
    _m = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    _m.expf.restype = ctypes.c_float
    _m.expf.argtypes = (ctypes.c_float,)
    class ModelNew(torch.nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            ctypes.memmove(out.data_ptr(), x.data_ptr(), x.numel() * 4)
            return out
    """
    findings = scan_source(textwrap.dedent(src))
    assert "ffi-import" in {f.rule for f in findings}
    assert worst(findings) is Severity.WARNING, findings


@pytest.mark.parametrize("name", ["relu_cpp.py", "relu_cuda.py", "fused_gemm_cpp.py"])
def test_demo_sources_in_variables_are_resolved(name):
    """The demo's C++/CUDA sources sit in module constants: the resolver reaches them (a pattern
    planted in the constant is found) and the honest originals stay clean."""
    text = data_path("candidates", name).read_text()
    assert worst(scan_file(data_path("candidates", name))) in (None, Severity.WARNING)
    planted = text.replace('#include <torch/extension.h>', '#include <torch/extension.h>\nstatic int g = mprotect(0, 0, 0);', 1)
    assert planted != text
    assert "source-fault-handler" in {f.rule for f in scan_source(planted)}


@pytest.mark.parametrize("code", [
    'TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("copy_", my_copy); }',
    'TORCH_LIBRARY_IMPL(aten, AutogradCPU, m) { m.impl("clone", f); }',
    'TORCH_LIBRARY_IMPL(_, ADInplaceOrView, m) { m.fallback(f); }',
    'TORCH_LIBRARY_FRAGMENT(aten, m) { m.impl("mm", f); }',
    'static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);',
    'TORCH_LIBRARY_IMPL(mine, CPU, m) { m.impl("aten::copy_", f); }',
    'c10::Dispatcher::singleton().registerImpl(op, key, kernel, sig, schema, "x");',
])
def test_native_registrations_for_torch_ops_are_hack(code):
    src = LOAD + f'SRC = r"""{code}"""\nm = load_inline(name="a", cpp_sources=SRC)\n'
    assert found_rules(src)["overrides-torch-op"][:2] == (15, Severity.HACK)


def test_native_ops_of_a_namespace_of_ones_own_are_not_overrides():
    code = 'TORCH_LIBRARY(myops, m) { m.def("relu(Tensor x) -> Tensor"); }\n' \
           'TORCH_LIBRARY_IMPL(myops, CPU, m) { m.impl("relu", my_relu); }'
    src = LOAD + f'SRC = r"""{code}"""\nm = load_inline(name="a", cpp_sources=SRC)\n'
    assert "overrides-torch-op" not in found_rules(src)


@pytest.mark.parametrize("code", [
    "return at::cpu::mm(a, b);", "return at::cuda::mm(a, b);", "return at::native::relu(a);",
    "return at::compositeexplicitautograd::clamp_min(a, 0);", "return at::redispatch::mm(ks, a, b);",
    "return at::_ops::mm::redispatch(ks, a, b);", "at::native::cpublas::gemm<float>(t, t, m, n, k);",
    "#include <ATen/ops/mm_cpu_dispatch.h>", "#include <ATen/ops/relu_native.h>", "#include <ATen/CPUFunctions.h>",
    'auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mm", "");',
])
def test_pytorch_kernels_called_past_the_dispatcher_are_a_warning(code):
    src = LOAD + f'SRC = r"""{code}\n"""\nm = load_inline(name="a", cpp_sources=SRC)\n'
    assert found_rules(src)["source-aten-kernel"][:2] == (15, Severity.WARNING)


@pytest.mark.parametrize("code", [
    "auto s = at::cuda::getCurrentCUDAStream(); at::cuda::OptionalCUDAGuard g(x.device());",
    "auto o = at::empty({n}, x.options()); float* p = o.data_ptr<float>(); return at::mm(a, b);",
    "int w = at::cuda::warp_size(); auto* prop = at::cuda::getCurrentDeviceProperties();",
    "return torch::relu(x);",
])
def test_dispatched_calls_and_cuda_helpers_are_not_kernel_calls(code):
    src = LOAD + f'SRC = r"""{code}\n"""\nm = load_inline(name="a", cpp_sources=SRC)\n'
    assert "source-aten-kernel" not in found_rules(src)


def test_a_line_directive_in_native_source_is_a_warning():
    src = LOAD + 'SRC = r"""\n#line 1 "/usr/lib/torch/x.py"\nvoid f() {}\n"""\nm = load_inline(name="a", cpp_sources=SRC)\n'
    assert found_rules(src)["source-line-directive"][:2] == (15, Severity.WARNING)


@pytest.mark.parametrize("imports", ["import torch.nn.functional as F", "from torch.nn import functional as F"])
def test_a_module_patched_through_an_import_alias_is_named(imports):
    """``F.gelu = ...`` went unnamed where ``torch.nn.functional.gelu = ...`` was (newcomer report)."""
    found = scan_source(f"{imports}\nF.gelu = lambda x, approximate='none': x\n")
    patched = [f for f in found if f.rule == "patches-module"]
    assert patched and patched[0].severity is Severity.HACK and "torch.nn.functional.gelu" in patched[0].message
    assert not [f for f in scan_source("import json as js\ncfg = js.loads('{}')\n") if f.rule == "patches-module"]


def test_setattr_on_a_harness_module_is_judged_as_the_assignment():
    """``setattr(torch.Tensor, "__setitem__", f)`` went unnamed where the assignment was named
    (red-team helper, eighth session); ``setattr(self, ...)`` is no patch."""
    found = scan_source('import torch\nsetattr(torch.Tensor, "__setitem__", lambda *a: None)\n')
    assert any(f.rule == "patches-module" and "torch.Tensor.__setitem__" in f.message for f in found)
    mine = scan_source("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
                       "        super().__init__()\n        setattr(self, 'scale', 2.0)\n")
    assert not [f for f in mine if f.rule == "patches-module"]


def test_removing_a_file_is_a_warning_a_shell_or_a_signal_is_hack():
    """A red-team helper's false HACK (2026-12-06): an honest kernel that removed the temp file it had
    written in its own cwd got HACK; the sandbox leaves only its cwd and build directory writable."""
    for call in ("os.remove(p)", "os.unlink(p)", "shutil.rmtree(p)"):
        assert rules(f"import os, shutil\n{call}")["file-or-process"] == (26, Severity.WARNING), call
    for call in ("os.system('ls')", "os.popen('ls')", "os.kill(1, 9)"):
        assert rules(f"import os\n{call}")["file-or-process"] == (26, Severity.HACK), call
    assert "frame-walk" not in rules("import traceback\ntry:\n    f()\nexcept Exception:\n"
                                     "    print(traceback.format_exc())")
