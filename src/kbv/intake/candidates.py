"""Candidate files: static vetting, backend detection and the content-hash build cache.

Nothing here executes candidate code: files are read and parsed with :mod:`ast` in the
orchestrator; the import happens only in a candidate worker (:mod:`kbv.sandbox.worker`).

Backends (a small registry, first match wins in this order):

* ``cuda``   — ``load_inline``/``load`` with ``cuda_sources`` (C++/CUDA extension);
* ``triton`` — imports ``triton`` and defines an ``@triton.jit`` function;
* ``cpp``    — ``load_inline``/``load`` with C++ sources only;
* ``torch``  — none of the above: plain PyTorch.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Callable

from kbv.intake.problems import SourceError, parse_source, read_source, top_level_names
from kbv.model.records import CandidateRef
from kbv.model.paths import cache_root


class CandidateError(SourceError):
    """A candidate file kbv cannot evaluate (unreadable, syntax error, no ``ModelNew``)."""


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _call_name(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _is_cuda(tree: ast.Module) -> bool:
    for c in _calls(tree):
        if _call_name(c) in ("load_inline", "load"):
            for kw in c.keywords:
                if kw.arg == "cuda_sources":
                    return True
                if kw.arg == "sources" and ".cu" in ast.unparse(kw.value):
                    return True
    return False


def _is_triton(tree: ast.Module) -> bool:
    imports = any(
        (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "triton" for a in n.names))
        or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "triton")
        for n in ast.walk(tree)
    )
    jit = any(
        isinstance(n, (ast.FunctionDef,)) and any("jit" in ast.unparse(d) for d in n.decorator_list)
        for n in ast.walk(tree)
    )
    return imports and jit


def _is_cpp(tree: ast.Module) -> bool:
    return any(_call_name(c) in ("load_inline", "load") for c in _calls(tree))


#: backend name → predicate on the parsed module, checked in order.
BACKENDS: dict[str, Callable[[ast.Module], bool]] = {
    "cuda": _is_cuda,
    "triton": _is_triton,
    "cpp": _is_cpp,
    "torch": lambda tree: True,
}


def detect_backend(tree: ast.Module) -> str:
    return next(name for name, pred in BACKENDS.items() if pred(tree))


#: what a candidate of each backend imports besides torch (its load's slowest imports: 0.12-0.18 s
#: each on the 2-core dev machine, twice a job with the secret shape's worker).
_BACKEND_MODULES = {"cuda": ("torch.utils.cpp_extension",), "cpp": ("torch.utils.cpp_extension",),
                    "triton": ("triton", "triton.language")}


def backend_modules(backend: str) -> tuple[str, ...]:
    """The modules a candidate of ``backend`` (:func:`detect_backend`) will import, for its worker to
    import before the job's load (:class:`kbv.sandbox.confinement.WorkerSetup`); () for ``torch``."""
    return _BACKEND_MODULES.get(backend, ())


def load_candidate(path: Path | str, *, run: str | None = None, sample_id: int | None = None) -> CandidateRef:
    """Statically vet a candidate file and return its identity.

    Raises:
        CandidateError: unreadable, not UTF-8, too large, syntax error, or no module-level
            ``ModelNew``.
    """
    path = Path(path).resolve()
    text, raw = read_source(path, CandidateError)
    tree = parse_source(path, text, CandidateError)
    names = top_level_names(tree)
    if "ModelNew" not in names:
        swapped = " (a problem: arguments swapped? the problem comes first)" if "Model" in names else ""
        raise CandidateError(path, f"no ModelNew defined at module level{swapped}")
    return CandidateRef(
        path=str(path), sha256=hashlib.sha256(raw).hexdigest(), backend=detect_backend(tree),
        run=run, sample_id=sample_id,
    )


#: environment variables that change what a build produces (compiler choice, CUDA archs, flags).
BUILD_ENV = ("CXX", "CC", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "CFLAGS", "CXXFLAGS",
             "LDFLAGS", "NVCC_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS")


@functools.cache
def _tool_version(tool: str) -> str:
    """First line of ``tool --version`` (``tool`` a name on PATH or a path), or ``"absent"``."""
    exe = shutil.which(tool)
    if exe is None:
        return "absent"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{exe}: {type(exc).__name__}"
    lines = [ln.strip() for ln in (out.stdout or out.stderr).splitlines() if ln.strip()]
    # gcc and clang name their version on the first line, nvcc on its "release" line
    line = next((ln for ln in lines if "release" in ln), lines[0] if lines else "")
    return f"{os.path.realpath(exe)}: {line}"


def _torch_versions() -> tuple[str, str, str]:
    """(torch version, CUDA version torch was built with or ``"none"``, torch's git commit), without
    importing torch when it is not imported yet (the orchestrator never imports it for this)."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "version"):
        return (str(torch.__version__), str(torch.version.cuda or "none"),
                str(getattr(torch.version, "git_version", "unknown")))
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown", "unknown", "unknown"
    found = {"cuda": "unknown", "git_version": "unknown"}
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        vfile = Path(list(spec.submodule_search_locations)[0]) / "version.py"
        try:
            text = vfile.read_text()
        except OSError:
            text = ""
        for name in found:
            m = re.search(rf"^{name}\s*(?::[^=]*)?=\s*(.+)$", text, re.M)
            if m:
                found[name] = m.group(1).strip().strip("'\"")
    cuda = "none" if found["cuda"] == "None" else found["cuda"]
    return version, cuda, found["git_version"]


def build_key(device: str, environ: dict | None = None) -> dict[str, str]:
    """Everything besides the candidate's source that changes the binary a build produces: the
    Python ABI (implementation, version, extension suffix), torch (version, its CUDA, its commit),
    the compilers (``$CXX`` or ``c++``, and ``nvcc`` on cuda) and the build variables of
    :data:`BUILD_ENV`. Each value a string; ``environ`` defaults to ``os.environ``. Runs
    ``--version`` of each compiler once per process.

    Nothing that names *where* this runs is in it (the interpreter's path, the venv, kbv's version):
    ``kbv eval`` runs ``.venv/bin/python3`` (its script's shebang) where a script calling
    :func:`kbv.verify` may run ``.venv/bin/python``, and both must find the other's builds."""
    environ = os.environ if environ is None else environ
    torch_version, torch_cuda, torch_git = _torch_versions()
    key = {"python": sys.version, "python_abi": f"{sys.implementation.cache_tag}"
                                                 f"{sysconfig.get_config_var('EXT_SUFFIX') or ''}",
           "torch": torch_version, "torch_cuda": torch_cuda, "torch_git": torch_git, "device": device,
           "cxx": _tool_version(environ.get("CXX") or "c++")}
    if device == "cuda":
        home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
        key["nvcc"] = _tool_version(os.path.join(home, "bin", "nvcc") if home else "nvcc")
    key.update({f"env:{k}": environ.get(k, "") for k in BUILD_ENV})
    return key


def build_dir(candidate: CandidateRef, device: str, environ: dict | None = None) -> Path:
    """Per-candidate build directory (created), keyed by the file's content hash and
    :func:`build_key` only: a different Python ABI, torch, CUDA, compiler or build variable gets its
    own directory, so builds of one never evict or reuse another's, and every process of one
    toolchain (``kbv eval``, ``kbv run``, :func:`kbv.verify`) shares one build of one file.

    ``load_inline`` writes to ``<dir>/torch_extensions`` and Triton to ``<dir>/triton``.
    """
    key = build_key(device, environ)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    tag = re.sub(r"[^A-Za-z0-9.]+", "_", key["torch"])
    d = cache_root() / "build" / f"{candidate.sha256[:20]}-{device}-torch{tag}-{digest}"
    d.mkdir(parents=True, exist_ok=True)
    return d
