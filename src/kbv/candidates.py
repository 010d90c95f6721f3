"""Candidate files: static vetting, backend detection and the content-hash build cache.

Nothing here executes candidate code: files are read and parsed with :mod:`ast` in the
orchestrator; the import happens only in a candidate worker (:mod:`kbv.candidate_worker`).

Backends (a small registry, first match wins in this order):

* ``cuda``   — ``load_inline``/``load`` with ``cuda_sources`` (C++/CUDA extension);
* ``triton`` — imports ``triton`` and defines an ``@triton.jit`` function;
* ``cpp``    — ``load_inline``/``load`` with C++ sources only;
* ``torch``  — none of the above: plain PyTorch.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import re
from pathlib import Path
from typing import Callable

from kbv.problems import SourceError, parse_source, read_source, top_level_names
from kbv.records import CandidateRef


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


def load_candidate(path: Path | str, *, run: str | None = None, sample_id: int | None = None) -> CandidateRef:
    """Statically vet a candidate file and return its identity.

    Raises:
        CandidateError: unreadable, not UTF-8, too large, syntax error, or no module-level
            ``ModelNew``.
    """
    path = Path(path).resolve()
    text, raw = read_source(path, CandidateError)
    tree = parse_source(path, text, CandidateError)
    if "ModelNew" not in top_level_names(tree):
        raise CandidateError(path, "no ModelNew defined at module level")
    return CandidateRef(
        path=str(path), sha256=hashlib.sha256(raw).hexdigest(), backend=detect_backend(tree),
        run=run, sample_id=sample_id,
    )


def cache_root() -> Path:
    """Root of kbv's build cache: ``$KBV_CACHE_DIR``, else ``~/.cache/kbv``."""
    env = os.environ.get("KBV_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kbv"


def build_dir(candidate: CandidateRef, device: str) -> Path:
    """Per-candidate build directory keyed by content hash, device and torch version.

    ``load_inline`` writes to ``<dir>/torch_extensions`` and Triton to ``<dir>/triton``.
    """
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "unknown"
    tag = re.sub(r"[^A-Za-z0-9.]+", "_", torch_version)
    d = cache_root() / "build" / f"{candidate.sha256[:20]}-{device}-torch{tag}"
    d.mkdir(parents=True, exist_ok=True)
    return d
