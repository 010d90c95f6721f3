"""Static scan of a candidate file (AST, plus a look inside the C++/CUDA sources it compiles).

Runs anywhere (orchestrator included): it parses, it never executes. Each finding names the rule,
the entry of ``../shared/hack-taxonomy.md`` it bears on, a severity and the line. The severity
follows one rule: **HACK only where the pattern is a cheat in itself**; a pattern an honest
kernel may need is a WARNING, and a runtime probe confirms or clears it.

* ``HACK`` — nothing an honest kernel needs (frame or gc walking, the interpreter's C API through
  ctypes or from native code, exec of strings, patching torch or the harness, subprocesses,
  signal handlers and page protections in native code, loading raw cubins). The verdict fails.
* ``SHORTCUT`` — the speed would come from PyTorch itself (``ModelNew`` inherits ``Model``,
  ``torch.compile``). Reported with the speedup, kept out of correct speedup.
* ``WARNING`` — legitimate in some kernels, suspicious in others (ctypes loading a library, thread
  pools and native threads, side streams, half casts, a torch compute op on the forward path,
  try/except fallbacks, branches on tensor values, global flag writes, environment edits, file
  access). Reported as evidence; runtime probes decide.

Native sources are read where the compiler gets them: the arguments of ``load_inline`` /
``load`` are resolved statically (string constants and the names bound to them anywhere in the
file, concatenations, f-strings, ``%`` and ``.format``, ``textwrap.dedent``, lists, dicts and
``**kwargs``, the return values of the file's own functions, ``X.__doc__``, and files beside the
candidate read with ``open(...).read()`` / ``Path.read_text()`` or named in ``load(sources=...)``).
Every other string constant of the file that reads like C/C++ (not docstrings) gets the same
rules, so a source handed to the compiler in a way the resolver does not follow is still read.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kbv.intake.resolve import Resolver, docstring_nodes, root_name, strip_c_comments, unparsed
from kbv.intake.scan_rules import (CODE_LIKE, FFI_MODULES, FLAG_CALLS, HARNESS_ROOTS, NATIVE_MODULES, NETWORK_MODULES,
                                   OBSERVER_PROBES, PROC_MEM, PROCESS_ATTRS, PROCESS_MODULES, PY_CAPI,
                                   PYTHON_API_ATTRS, RAW_MEMORY_CALLS, SOURCE_ARGS, SOURCE_PATTERNS, STACK_WALKERS,
                                   THREAD_MODULES,
                                   TORCH_COMPUTE, TORCH_NAMESPACES, TORCH_ROOTS)
from kbv.model.records import Finding as RecordFinding
from kbv.model.records import Severity


@dataclass(frozen=True)
class Finding:
    rule: str
    taxonomy: int  #: entry number in hack-taxonomy.md.
    severity: Severity
    line: int
    message: str

    def record(self) -> RecordFinding:
        """This finding as a verdict record (``check`` = ``scan:<rule>``)."""
        return RecordFinding(f"scan:{self.rule}", (self.taxonomy,), self.severity,
                             f"line {self.line}: {self.message}", self.line)


class _Scanner(ast.NodeVisitor):
    def __init__(self, resolver: Resolver, constants: list[ast.Constant]) -> None:
        self.resolver = resolver
        self.constants = constants  #: the file's string constants, to place source findings on a line
        self.findings: list[Finding] = []
        self.in_forward = 0
        self.in_try_forward = 0
        #: names bound by ``import a.b as x`` or ``from a import b as x`` -> the dotted name they stand for,
        #: so an assignment through an alias (``F.gelu = ...``) is judged as the full name would be
        self.aliases: dict[str, str] = {}

    def add(self, node: ast.AST, rule: str, taxonomy: int, severity: Severity, message: str) -> None:
        self.findings.append(Finding(rule, taxonomy, severity, getattr(node, "lineno", 0), message))

    # imports -------------------------------------------------------------------------------
    def _check_module(self, node: ast.AST, name: str) -> None:
        top = name.split(".")[0]
        if top in THREAD_MODULES:
            self.add(node, "thread-import", 2, Severity.WARNING,
                     f"imports {name}: threads (honest only if forward waits for them)")
        elif top in PROCESS_MODULES:
            self.add(node, "thread-or-process", 2, Severity.HACK, f"imports {name}: work outside the timed call")
        elif top in FFI_MODULES:
            self.add(node, "ffi-import", 25, Severity.WARNING,
                     f"imports {name}: loads native libraries (honest for a prebuilt library; what it touches is "
                     "checked by the ctypes rules and the runtime probes)")
        elif top in NATIVE_MODULES:
            self.add(node, "native-access", 25, Severity.HACK, f"imports {name}: raw memory mappings")
        elif top in NETWORK_MODULES:
            self.add(node, "network", 26, Severity.HACK, f"imports {name}: network access")
        elif top in ("inspect", "marshal", "pickle", "base64", "zlib", "importlib"):
            self.add(node, "introspection-import", 13 if top == "inspect" else 25, Severity.WARNING,
                     f"imports {name}")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(node, a.name)
            if a.asname:
                self.aliases[a.asname] = a.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._check_module(node, node.module or "")
        for a in node.names:
            if node.module and not node.level and a.name != "*":
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        pools = [a.name for a in node.names if a.name in PROCESS_ATTRS]
        if pools:
            self.add(node, "thread-or-process", 2, Severity.HACK,
                     f"imports {pools[0]}: work in another process or interpreter, out of every probe's sight")
        probes = [p for p in [*(node.module or "").split("."), *(a.name for a in node.names)] if p in OBSERVER_PROBES]
        if probes:
            self.add(node, "observer-probe", 6, Severity.HACK,
                     f"imports {probes[0]}: checks whether it is being profiled or counted")
        self.generic_visit(node)

    # classes and forward -------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew":
            for b in node.bases:
                if unparsed(b).split(".")[-1] == "Model":
                    self.add(node, "inherits-model", 15, Severity.SHORTCUT, "ModelNew inherits the reference Model")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in ("get_inputs", "get_init_inputs"):
            self.add(node, "redefines-inputs", 14, Severity.WARNING,
                     f"defines {node.name}(): inputs come only from the problem")
        fwd = node.name == "forward"
        self.in_forward += fwd
        self.generic_visit(node)
        self.in_forward -= fwd

    def visit_Try(self, node: ast.Try) -> None:
        if self.in_forward and node.handlers:
            self.add(node, "try-fallback", 16, Severity.WARNING,
                     "try/except on the forward path (silent fallback to torch?)")
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        if self.in_forward:
            test = unparsed(node.test)
            if re.search(r"\.(min|max|sum|mean|all|any|item|abs)\(|torch\.(all|any|isnan|isinf)\(", test):
                self.add(node, "value-branch", 20, Severity.WARNING, f"branches on tensor values: if {test}")
            elif re.search(r"\.shape\b|\.size\(|\.numel\(|\.dim\(", test):
                self.add(node, "shape-branch", 21, Severity.WARNING,
                         f"dispatches on the input shape: if {test} (legitimate specialisation, or a path only "
                         "for the benchmark shape)")
        self.generic_visit(node)

    # calls -----------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        name = unparsed(node.func)
        last = name.split(".")[-1]
        root = root_name(node.func)
        if name in ("exec", "eval", "compile", "__import__") or last in ("b64decode", "loads") and root in (
                "base64", "marshal", "pickle"):
            self.add(node, "dynamic-code", 25, Severity.HACK, f"calls {name}(): code from strings")
        if name in ("sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.getouterframes") or \
                last in ("f_back", "f_globals", *STACK_WALKERS):
            self.add(node, "frame-walk", 13, Severity.HACK, f"calls {name}(): walks the caller's frames")
        if name == "setattr" and len(node.args) >= 2 and isinstance(node.args[0], (ast.Name, ast.Attribute)):
            # setattr(torch.Tensor, "__setitem__", f) is the assignment torch.Tensor.__setitem__ = f, judged alike
            attr = node.args[1].value if isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
                else "<name>"
            self._check_target(ast.copy_location(ast.Attribute(value=node.args[0], attr=attr, ctx=ast.Store()), node))
        if name in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            self.add(node, "gc-walk", 13, Severity.HACK, f"calls {name}(): searches live objects")
        if name in ("torch.compile", "torch.jit.script", "torch.jit.trace") or last == "compile" and root == "torch":
            self.add(node, "torch-compile", 15, Severity.SHORTCUT, f"calls {name}(): the compiler, not a kernel")
        if last in ("Stream", "ExternalStream", "default_stream", "stream", "set_stream") and root in ("torch", "cuda"):
            self.add(node, "side-stream", 1, Severity.WARNING, f"creates a stream: {name}()")
        if last in FLAG_CALLS or name.startswith("torch.autocast") or name.startswith("torch.cuda.amp.autocast"):
            self.add(node, "global-flag", 18, Severity.WARNING, f"changes a global numeric setting: {name}()")
        if last in ("half", "bfloat16") and isinstance(node.func, ast.Attribute):
            self.add(node, "half-cast", 17, Severity.WARNING, f"casts to {last}")
        if last == "to" and any(re.search(r"float16|bfloat16|half", unparsed(a)) for a in node.args):
            self.add(node, "half-cast", 17, Severity.WARNING, f"casts with {unparsed(node)}")
        if last in ("Library", "impl", "register_kernel", "fallthrough_kernel", "_impl", "py_impl", "define") and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str)
                and (a.value in TORCH_NAMESPACES or a.value.split("::")[0] in TORCH_NAMESPACES and "::" in a.value)
                for a in [*node.args, *(k.value for k in node.keywords)]):
            self.add(node, "overrides-torch-op", 15, Severity.HACK,
                     f"{name}(): registers a kernel for one of torch's own ops (a wrapper hidden behind another op)")
        if name in ("os.fork", "os.forkpty", "os.setsid", "os.setpgid", "os.killpg", "os.posix_spawn",
                    "os.posix_spawnp") or name.startswith(("os.spawn", "os.exec")):
            self.add(node, "process-escape", 26, Severity.HACK, f"calls {name}(): starts or detaches processes")
        # files: the sandbox leaves only the worker's cwd and build directory writable, where an honest
        # extension writes and removes its own files (a WARNING); a shell or a signal is never a kernel's
        if name in ("open", "os.remove", "os.unlink", "shutil.rmtree", "os.system", "os.popen", "os.kill"):
            self.add(node, "file-or-process", 26,
                     Severity.WARNING if name in ("open", "os.remove", "os.unlink", "shutil.rmtree") else Severity.HACK,
                     f"calls {name}()")
        if name in ("os._exit", "sys.exit", "exit", "quit", "os.abort"):
            self.add(node, "early-exit", 24, Severity.HACK, f"calls {name}(): ends the worker itself")
        if name in ("os.putenv", "os.environ.update", "os.environ.setdefault"):
            self.add(node, "env-edit", 26, Severity.WARNING, f"edits the environment: {name}()")
        if name in ("torch.manual_seed", "torch.seed", "random.seed", "np.random.seed", "numpy.random.seed") or \
                last in ("manual_seed", "set_rng_state", "set_state") and isinstance(node.func, ast.Attribute):
            self.add(node, "seeding", 22, Severity.WARNING, f"calls {name}(): reseeding the RNG")
        if last in ("load_inline", "compile_inline") or last == "load" and (
                name in ("load", "cpp_extension.load", "torch.utils.cpp_extension.load")
                or any(k.arg == "sources" for k in node.keywords)):
            self._scan_builder(node, last)
        if last in PYTHON_API_ATTRS and isinstance(node.func, ast.Attribute) or name in PYTHON_API_ATTRS:
            self.add(node, "python-capi", 25, Severity.HACK,
                     f"calls {name}(): the interpreter's own C API (frames, dicts, any object of the harness)")
        if last in ("CDLL", "LoadLibrary", "dlopen", "WinDLL") and (
                not node.args or isinstance(node.args[0], ast.Constant) and node.args[0].value in (None, "")):
            self.add(node, "ffi-process-symbols", 25, Severity.WARNING,
                     f"{name}(None): opens the process's own symbols (libpython, libtorch) rather than a library")
        if (last in RAW_MEMORY_CALLS or root == "ctypes") and any(
                isinstance(n, ast.Call) and unparsed(n.func) == "id" for a in node.args for n in ast.walk(a)):
            self.add(node, "raw-object-memory", 25, Severity.HACK,
                     f"calls {name}() on id(...): reads or writes a Python object's own memory")
        if self.in_forward and (last == "data_ptr" and isinstance(node.func, ast.Attribute) or name == "id"):
            self.add(node, "identity-key", 11, Severity.WARNING,
                     f"forward reads {name}(): keys on tensor identity (output caching?)")
        if self.in_forward and root in TORCH_ROOTS and last in TORCH_COMPUTE:
            self.add(node, "torch-compute", 15, Severity.WARNING, f"forward calls {name}()")
        if self.in_forward and isinstance(node.func, ast.Attribute) and last in TORCH_COMPUTE and \
                root not in TORCH_ROOTS and last in ("matmul", "mm", "bmm", "softmax", "relu"):
            self.add(node, "torch-compute", 15, Severity.WARNING, f"forward calls tensor method .{last}()")
        self.generic_visit(node)

    def _scan_builder(self, node: ast.Call, last: str) -> None:
        """The sources handed to ``load_inline``/``load``: every argument that carries source text
        (``cpp_sources``, ``cuda_sources``; ``sources`` of ``load`` names files), positional ones
        and ``**kwargs`` included, resolved statically."""
        r = self.resolver
        files = last == "load"
        exprs = [k.value for k in node.keywords if k.arg in SOURCE_ARGS or k.arg is None]
        exprs += node.args[1:3] if last != "load" else node.args[1:2]
        for e in exprs:
            if files:
                for text in r.source_files(e):
                    self._scan_text(node, text, "a source file read by load()")
            text = r.text(e)
            if text is not None:
                self._scan_text(node, text)

    def _scan_text(self, node: ast.AST, text: str, where: str = "") -> None:
        """The native-source rules over ``text`` (comments dropped), each finding placed on the
        line of the string constant that holds the match (else on ``node``'s line)."""
        code = strip_c_comments(text)
        for pattern, rule, tax, sev, msg in SOURCE_PATTERNS:
            m = pattern.search(code)
            if m is None:
                continue
            line = getattr(node, "lineno", 0)
            token = m.group(0)
            if not where:
                for c in self.constants:
                    i = c.value.find(token)
                    if i >= 0:
                        line = c.lineno + c.value.count("\n", 0, i)
                        break
            self.findings.append(Finding(rule, tax, sev, line, f"{msg}: {token}" + (f" ({where})" if where else "")))

    # assignments ----------------------------------------------------------------------------
    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            root = root_name(target)
            dotted = unparsed(target)
            if root in self.aliases and root not in HARNESS_ROOTS:  # F.gelu = ... is torch.nn.functional.gelu = ...
                dotted = self.aliases[root] + dotted[len(root):]
                root = dotted.split(".")[0]
            if dotted.startswith("torch.backends.") or dotted.startswith("torch.cuda.matmul"):
                self.add(target, "global-flag", 18, Severity.WARNING, f"assigns {dotted}")
            elif root in HARNESS_ROOTS and root != "self":
                compare = dotted.split(".")[-1] in ("allclose", "equal", "isclose", "assert_close", "eq", "ne")
                self.add(target, "patches-module", 13 if compare else 4, Severity.HACK,
                         f"assigns {dotted}: patches a module" + (" (the comparison: stealing the oracle)"
                                                                  if compare else ""))
        elif isinstance(target, ast.Subscript) and unparsed(target.value) == "os.environ":
            self.add(target, "env-edit", 26, Severity.WARNING, f"edits the environment: {unparsed(target)}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        if self.in_forward:
            self.add(node, "state-across-calls", 11, Severity.WARNING,
                     f"forward rebinds module globals {', '.join(node.names)} (state kept across calls)")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "_version" and self.in_forward:
            self.add(node, "identity-key", 11, Severity.WARNING, "forward reads ._version: keys on tensor identity")
        if node.attr in ("f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "cr_frame", "ag_frame"):
            self.add(node, "frame-walk", 13, Severity.HACK, f"reads .{node.attr}: walks frames")
        if node.attr in ("setprofile", "settrace", "setprofile_all_threads", "settrace_all_threads", "_profile_hook",
                         "_trace_hook", "monitoring"):
            self.add(node, "trace-hook", 4, Severity.HACK, f"touches .{node.attr}: the harness's thread watch")
        if node.attr in OBSERVER_PROBES:
            self.add(node, "observer-probe", 6, Severity.HACK,
                     f"uses .{node.attr}: checks, or switches off, the op counter or profiler watching it")
        if node.attr in ("start_new_thread", "_start_new_thread", "start_new", "_start_joinable_thread",
                         "start_joinable_thread"):
            self.add(node, "thread-or-process", 2, Severity.HACK, f"uses .{node.attr}: a raw thread")
        if node.attr in PROCESS_ATTRS:
            self.add(node, "thread-or-process", 2, Severity.HACK,
                     f"uses .{node.attr}: work in another process or interpreter, out of every probe's sight")
        if node.attr in PYTHON_API_ATTRS or PY_CAPI.match(node.attr):
            self.add(node, "python-capi", 25, Severity.HACK,
                     f"uses .{node.attr}: the interpreter's own C API through ctypes (frames, dicts, any object)")
        if node.attr in ("_dispatch_library", "_dispatch_impl", "_dispatch_register_python_kernel"):
            self.add(node, "overrides-torch-op", 15, Severity.HACK,
                     f"uses .{node.attr}: registers kernels with the dispatcher directly")
        self.generic_visit(node)


def scan_source(text: str, path: str | os.PathLike | None = None) -> list[Finding]:
    """Scan candidate source text. ``path`` is the candidate file's own path: with it, native
    sources read from files beside the candidate are scanned too. Raises ``SyntaxError`` if the
    text does not parse."""
    tree = ast.parse(text)
    docs = docstring_nodes(tree)
    constants = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and id(n) not in docs]
    s = _Scanner(Resolver(tree, path), constants)
    s.visit(tree)
    # every other string of the file that reads like C/C++: a source handed to the compiler in a
    # way the resolver does not follow (a helper's parameter, a file written at run time)
    for c in constants:
        if id(c) in s.resolver.used or not CODE_LIKE.search(c.value):
            continue
        s._scan_text(c, c.value)
    for c in constants:
        if PROC_MEM.search(c.value):
            s.add(c, "native-access", 25, Severity.HACK, "names the process's own memory (/proc/.../mem)")
        if PY_CAPI.match(c.value):
            s.add(c, "python-capi", 25, Severity.HACK,
                  f"names {c.value}: the interpreter's own C API, looked up by name through ctypes")
    seen = set()
    out = []
    for f in sorted(s.findings, key=lambda f: (f.line, f.rule)):
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            out.append(f)
    return out


def scan_file(path: str | os.PathLike) -> list[Finding]:
    """:func:`scan_source` over the file at ``path`` (files beside it included)."""
    return scan_source(Path(path).read_text(encoding="utf-8", errors="replace"), path)


def worst(findings: list[Finding]) -> Severity | None:
    """The most severe level present (HACK > SHORTCUT > WARNING), or None."""
    from kbv.model.findings import worst as most_severe

    return most_severe(findings)
