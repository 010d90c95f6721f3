"""The static scan's rule tables (:mod:`kbv.intake.scan`): torch compute ops, the modules and
attributes the rules look for in Python, and the patterns they look for in native sources.
Severities and taxonomy entries are given where each rule fires (:class:`kbv.intake.scan._Scanner`)."""

from __future__ import annotations

import re

from kbv.model.records import Severity


#: torch functions that do a problem's compute (a candidate calling them on the forward path may be
#: a wrapper, taxonomy 15). Layout and allocation ops (empty, view, contiguous...) are not listed.
TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "relu", "gelu", "silu", "softmax",
    "log_softmax", "layer_norm", "batch_norm", "group_norm", "instance_norm", "cross_entropy",
    "scaled_dot_product_attention", "max_pool2d", "avg_pool2d", "sigmoid", "tanh", "sum", "mean",
    "cumsum", "cumprod", "argmax", "argmin", "max", "min", "norm", "mse_loss", "tensordot",
}


TORCH_ROOTS = {"torch", "F", "nn", "functional"}


HARNESS_ROOTS = {"torch", "time", "kbv", "triton", "builtins", "gc", "sys", "os", "numpy", "np"}


FLAG_CALLS = {"set_float32_matmul_precision", "set_default_dtype", "use_deterministic_algorithms",
               "set_autocast_enabled", "set_flush_denormal"}


#: thread pools: legitimate when forward waits for them, so only a WARNING here; the runtime
#: probes (probe:thread-work, probe:writes-after-return) decide. Processes and raw ``_thread``
#: threads (which the thread probe cannot watch) stay HACK.
THREAD_MODULES = {"threading", "concurrent", "asyncio"}


PROCESS_MODULES = {"_thread", "multiprocessing", "subprocess"}


#: process and sub-interpreter pools reachable from the thread modules: concurrent.futures is only
#: a WARNING, its process pool must not be.
PROCESS_ATTRS = {"ProcessPoolExecutor", "InterpreterPoolExecutor", "create_subprocess_exec",
                  "create_subprocess_shell", "_interpreters", "interpreters"}


#: calls that hand back the calling code's frames or its callers' (``traceback.walk_stack`` walks
#: them, ``extract_stack`` names them): kbv's harness is up the stack, so a candidate can read the
#: worker's locals or see which of its calls the op counter makes (taxonomy 13); a kernel needs
#: none of them (a traceback of its own exception is ``format_exc``, not among them).
STACK_WALKERS = ("walk_stack", "extract_stack", "format_stack", "print_stack", "_current_frames", "currentframe",
                 "getouterframes", "_getframe", "_getframemodulename")


#: what a candidate would read to learn whether kbv's op counter (a dispatch mode) or profiler
#: is watching it, so as to behave differently only then, or switch to hide its ops from the
#: counter (taxonomy 6); no kernel needs them.
OBSERVER_PROBES = {
    "_get_current_dispatch_mode", "_get_current_dispatch_mode_stack", "_len_torch_dispatch_stack",
    "_get_dispatch_stack_at", "_is_any_torch_dispatch_mode_on", "is_in_torch_dispatch_mode", "_python_dispatch",
    "_peek_mode", "_is_profiler_enabled", "_profiler_enabled", "_get_profiler_state", "getprofile", "gettrace",
    "_dispatch_tls_is_dispatch_key_included", "_dispatch_tls_is_dispatch_key_excluded",
    "_dispatch_tls_local_include_set", "_dispatch_tls_local_exclude_set", "_dispatch_tls_set_dispatch_key_excluded",
    "_dispatch_tls_set_dispatch_key_included", "is_in_any_mode_without_ignore_compile_internals",
    "any_torch_dispatch_mode_on_stack", "_DisableTorchDispatch", "_ExcludeDispatchKeyGuard",
    "_IncludeDispatchKeyGuard", "_DisablePythonDispatcher", "_EnablePythonDispatcher", "_RestorePythonTLSSnapshot",
    "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_set_dispatch_mode", "_unset_dispatch_mode",
    "_get_dispatch_mode", "_pop_mode", "_push_mode",
}


#: torch's own operator namespaces: a candidate may define ops in a namespace of its own
#: (``torch.library.Library("mylib", "DEF")``), never (re)register kernels for these.
TORCH_NAMESPACES = {"aten", "prims", "prim", "_quantized", "quantized", "sparse"}


#: modules that load native libraries: honest (a prebuilt library's function); what the code
#: then touches decides (the ctypes rules below, the runtime probes).
FFI_MODULES = {"ctypes", "cffi"}


#: raw memory mappings of the process: no kernel needs them.
NATIVE_MODULES = {"mmap"}


NETWORK_MODULES = {"socket", "urllib", "http", "requests", "httpx", "ftplib"}


#: ctypes/cffi handles on the interpreter itself (its C API with the GIL held): frames, dicts
#: and any object in the process are reachable from there (taxonomy 4/13/25).
PYTHON_API_ATTRS = {"pythonapi", "PyDLL", "pydll"}


#: a Python C-API function name (``PyDict_SetItem``, ``PyEval_GetFrame``, ``_PyThreadState_GetFrame``):
#: used from Python only through ctypes on the interpreter.
PY_CAPI = re.compile(r"^_?Py(Eval|Frame|ThreadState|GILState|InterpreterState|Interpreter|Dict|Object|Sys|Import|"
                      r"Module|Run|Code|Function|Cell|Type|List|Tuple|Long|Unicode|Bytes|Capsule|Mem|Err|Gen|"
                      r"Method|Weakref|Set|Float|CFunction|Descr|Instance|Callable|Vectorcall|Unstable)_\w+$")


#: ctypes calls that read or write raw memory at an address: on ``id(obj)`` that is a Python
#: object's own memory (a harness function's defaults, a frame), never a kernel's data.
RAW_MEMORY_CALLS = {"memmove", "memset", "string_at", "wstring_at", "from_address", "cast", "addressof"}


#: the process's own memory read or written through procfs.
PROC_MEM = re.compile(r"/proc/(self|\d+|\{[^}]*\})/(mem|task/[^/]*/mem)\b")


#: a string that reads like C/C++ (a statement, a preprocessor line, a block): the other string
#: constants of the file are scanned with the source rules only when they do.
CODE_LIKE = re.compile(r'\)\s*;|;\s*$|^\s*#\s*(include|define|pragma)\b|\{\s*$|extern\s+"C"|__global__',
                        re.MULTILINE)


#: Python C-API functions that reach frames, their locals or thread states from native code: the
#: harness's local variables (the timing loop's plan, its inputs) are readable through them.
SOURCE_FRAME_API = (r"\bPyEval_Get(Frame|Locals|Globals|FrameLocals|FrameGlobals|FrameBuiltins)\b|\bPyFrame_\w+"
                     r"|\bPyThreadState_(Get|GetFrame|GetDict|Next|Swap|GetUnchecked)\b|\b_PyThreadState_\w+"
                     r"|\bPyGILState_GetThisThreadState\b|\bPyInterpreterState_(ThreadHead|Head|Main|Get|GetDict)\b"
                     r"|\b_PyEval_\w+|\b_PyFrame_\w+|\bPySys_GetObject\b|\bPyImport_GetModuleDict\b|\bf_locals\b")


#: torch's operator namespaces as C++ registrations name them, ``_`` being every namespace (a
#: backend fallback).
_NATIVE_NAMESPACES = r"(aten|prims|prim|quantized|_quantized|sparse|_)"

#: a kernel registered for one of torch's own ops from C++: ``TORCH_LIBRARY_IMPL(aten, CPU, m)``
#: (any dispatch key, ``_`` for a fallback), a fragment of ``aten``, ``m.impl("aten::copy_", ...)``,
#: a ``torch::Library`` built by hand, or the dispatcher's own registration calls.
SOURCE_OP_OVERRIDE = (r"\bTORCH_LIBRARY_(IMPL|FRAGMENT)\s*\(\s*" + _NATIVE_NAMESPACES + r"\s*,"
                       r"|\bTORCH_LIBRARY\s*\(\s*" + _NATIVE_NAMESPACES + r"\s*,"
                       r"|\bLibrary::(IMPL|FRAGMENT|DEF)\s*,\s*\"" + _NATIVE_NAMESPACES + r"\""
                       r"|\.impl\s*\(\s*\"" + _NATIVE_NAMESPACES + r"::"
                       r"|\bregister(Impl|Fallback|Def)\s*\(")

#: a call of PyTorch's kernel that bypasses the dispatcher (and with it the op counts): the entry
#: points of ``ATen/ops/<op>_<key>_dispatch.h`` (``at::cpu::mm``, ``at::cuda::mm``,
#: ``at::compositeexplicitautograd::...``), the kernels of ``<op>_native.h`` (``at::native::relu``),
#: ``at::redispatch::`` and ``at::_ops::<op>::redispatch``, and the headers that declare them. The
#: CUDA helpers of ``at::cuda::`` (``getCurrentCUDAStream``, ``warp_size``...) are no kernel.
SOURCE_ATEN_KERNEL = (r"\bat::(cpu|cuda|native|mps|compositeexplicitautograd\w*|compositeimplicitautograd\w*"
                       r"|redispatch)::(\w+::)*(?!get|set|is_|current|device|warp_size|stream|max_|Optional|CUDA)"
                       r"\w+\s*(<[^;(){}]*>)?\s*\("
                       r"|\bat::_ops::\w+::redispatch\b"
                       r"|#\s*include\s*[<\"]ATen/(ops/\w+_(cpu|cuda|mps|compositeexplicitautograd\w*"
                       r"|compositeimplicitautograd\w*)_dispatch|ops/\w+_native|RedispatchFunctions|NativeFunctions"
                       r"|CPUFunctions|CUDAFunctions|CompositeExplicitAutograd\w*Functions)\.h"
                       r"|\bfindSchema(OrThrow)?\s*\(\s*\"(aten|prims)::")


#: the start of a libc or system-call name, also as ``SYS_x``, ``__NR_x``, ``rt_x`` or ``::x``.
SYSCALL = r"(?<![A-Za-z0-9])"


SOURCE_PATTERNS = [
    (re.compile(r"\bcuModuleLoad(Data|DataEx|FatBinary)?\b|\bcudaLibraryLoad"), "raw-module-load", 25,
     Severity.HACK, "native source loads a module/cubin at run time"),
    (re.compile(r"\bcudaStreamCreate|\bcudaStreamCreateWithFlags|\bgetStreamFromPool"), "source-stream", 1,
     Severity.WARNING, "native source creates or takes its own CUDA stream"),
    (re.compile(r"\b__half\b|\b__nv_bfloat16\b|\b__float2half|\bhalf2\b|\bat::kHalf\b|\bat::kBFloat16\b"),
     "source-half", 17, Severity.WARNING, "native source computes in half/bfloat16"),
    (re.compile(r"CUBLAS_COMPUTE_32F_FAST_16F|CUBLAS_COMPUTE_16F|CUBLAS_COMPUTE_32F_FAST_TF32|CUBLAS_TF32_TENSOR_OP_MATH"),
     "source-reduced-precision-gemm", 17, Severity.WARNING, "native source asks cuBLAS for reduced precision"),
    (re.compile(SYSCALL + r"(dlsym|dlopen|dlvsym|dladdr)\b|/proc/self/mem\b|/proc/self/maps\b"),
     "source-native-patch", 25, Severity.HACK, "native source looks up or patches symbols or memory at run time"),
    (re.compile(SOURCE_FRAME_API), "source-frame-access", 13, Severity.HACK,
     "native source reads Python frames or thread states (the harness's local variables)"),
    (re.compile(r"\bPyGILState_(Ensure|Release)\b"), "source-python-call", 25, Severity.WARNING,
     "native source calls back into Python"),
    (re.compile(SYSCALL + r"(mprotect|pkey_mprotect|sigaction|userfaultfd|sigsetjmp)\b|\bsignal\s*\(|\bUFFDIO_\w+"),
     "source-fault-handler", 3, Severity.HACK,
     "native source changes page protections or handles faults/signals (work done when memory is touched, "
     "not when forward runs)"),
    (re.compile(SYSCALL + r"(memfd_create|shm_open|mremap)\b"), "source-raw-mapping", 3, Severity.WARNING,
     "native source maps memory of its own outside torch's allocator"),
    (re.compile(r"\bstd::thread\b|\bstd::jthread\b|\bpthread_create\b|\bstd::async\b"), "source-thread", 2,
     Severity.WARNING, "native source starts a thread (honest when joined before return; the runtime thread "
     "and writes-after-return probes decide)"),
    (re.compile(r"\bstatic\s+std::(unordered_)?map\b"), "source-static-cache", 11, Severity.WARNING,
     "native source keeps a static map (output caching?)"),
    (re.compile(SOURCE_OP_OVERRIDE), "overrides-torch-op", 15, Severity.HACK,
     "native source registers kernels for torch's own ops (what the reference and the harness run in the "
     "candidate's process, a copy_ or clone included, would run the candidate's code)"),
    (re.compile(SOURCE_ATEN_KERNEL), "source-aten-kernel", 15, Severity.WARNING,
     "native source calls PyTorch's own kernels past the dispatcher, where the op counts do not see them "
     "(the built extension's imports decide, profile:aten-kernels)"),
    (re.compile(r'(?m)^[ \t]*#[ \t]*line[ \t]+\d+[ \t]+"'), "source-line-directive", 15, Severity.WARNING,
     "native source renames its own file for the compiler's records (the site the dispatcher records for "
     "a kernel it registers)"),
]


#: the arguments of the extension builders that hold source text (``sources`` of ``load`` holds
#: file names, read from beside the candidate).
SOURCE_ARGS = {"cpp_sources", "cuda_sources", "sources"}
