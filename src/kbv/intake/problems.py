"""KernelBench-format problems: discovery, identity and static vetting of the files.

A problem file is a Python module defining ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()`` (``docs/kernelbench-format.md``). This module reads files and parses
them with :mod:`ast` only; it never executes problem code. Importing the module happens in the
reference worker (:mod:`kbv.pipeline.reference_worker`), where an import failure becomes a
:class:`ProblemError` with a one-line message.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from kbv.model.records import ProblemRef

#: Largest source file kbv reads (bytes). KernelBench problems are a few KB; generated candidates
#: with inline CUDA reach ~50 KB. Anything past this is refused rather than parsed.
MAX_SOURCE_BYTES = 1 << 20

REQUIRED_PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")

_FILE_RE = re.compile(r"^(?P<id>\d+)_(?P<name>.+)\.py$")
_LEVEL_RE = re.compile(r"^level_?(?P<level>\d+)$")


class SourceError(ValueError):
    """A problem or candidate file that kbv cannot use. ``str()`` is one line naming the file."""

    def __init__(self, path: Path | str, fault: str):
        self.path = str(path)
        self.fault = fault
        super().__init__(f"{path}: {fault}")


class ProblemError(SourceError):
    """A broken problem file (missing names, syntax error, import failure, bad inputs)."""


class HiddenTestsError(ProblemError):
    """A hidden test file that failed when it ran (:mod:`kbv.reference.hidden_tests`), raised by
    :func:`kbv.verify` after the verification: ``verdict`` is the verdict made without (some of)
    its sets, as ``kbv eval`` prints it before exiting 2."""

    def __init__(self, path: Path | str, fault: str, verdict: object = None):
        super().__init__(path, fault)
        self.verdict = verdict


def read_source(path: Path, error: type[SourceError] = SourceError) -> tuple[str, bytes]:
    """Read a Python source file as UTF-8, refusing what cannot be a source file.

    Returns:
        ``(text, raw_bytes)``.
    Raises:
        SourceError (or ``error``): missing file, a directory, over :data:`MAX_SOURCE_BYTES`,
        not UTF-8, or containing NUL bytes.
    """
    if not path.exists():
        raise error(path, "no such file")
    if not path.is_file():
        raise error(path, "not a regular file")
    size = path.stat().st_size
    if size > MAX_SOURCE_BYTES:
        raise error(path, f"file is {size} bytes, over the {MAX_SOURCE_BYTES}-byte limit for a source file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(path, f"not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})") from None
    if "\x00" in text:
        raise error(path, "contains NUL bytes, not a Python source file")
    return text, raw


def top_level_names(tree: ast.Module) -> set[str]:
    """Names bound at module level: defs, classes, assignments, imports (``from x import Model``)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            # names bound under a top-level if/try/with count too (guarded imports, fallbacks)
            sub = ast.Module(body=list(ast.iter_child_nodes(node)), type_ignores=[])
            sub.body = [n for n in sub.body if isinstance(n, ast.stmt)]
            for h in getattr(node, "handlers", []):
                sub.body.extend(h.body)
            names |= top_level_names(sub)
    return names


def parse_source(path: Path, text: str, error: type[SourceError] = SourceError) -> ast.Module:
    """Parse without executing. Raises ``error`` naming the line of a syntax error."""
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise error(path, f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # e.g. deeply nested expressions
        raise error(path, f"cannot parse: {exc}") from None


def identify(path: Path) -> tuple[int | None, int | None, str]:
    """Level, id and name from a KernelBench path: ``level1/19_ReLU.py`` → ``(1, 19, "ReLU")``.

    Files not named ``<id>_<Name>.py`` keep their stem as name and get ``id=None``; a level is read
    from the parent folder (``level1`` or ``level_1``), else None.
    """
    m = _FILE_RE.match(path.name)
    pid, name = (int(m["id"]), m["name"]) if m else (None, path.stem)
    lm = _LEVEL_RE.match(path.parent.name)
    level = int(lm["level"]) if lm else None
    return level, pid, name


def load_problem(path: Path | str) -> ProblemRef:
    """Statically vet a problem file and return its identity.

    Raises:
        ProblemError: unreadable, not UTF-8, too large, syntax error, or one of ``Model``,
            ``get_inputs``, ``get_init_inputs`` not defined at module level.
    """
    path = Path(path).resolve()
    text, raw = read_source(path, ProblemError)
    tree = parse_source(path, text, ProblemError)
    names = top_level_names(tree)
    missing = [n for n in REQUIRED_PROBLEM_NAMES if n not in names]
    if missing:
        swapped = " (a candidate: arguments swapped? the problem comes first)" if "ModelNew" in names else ""
        raise ProblemError(path, f"not a KernelBench problem: missing {', '.join(missing)}{swapped}")
    level, pid, name = identify(path)
    return ProblemRef(
        path=str(path), name=name, level=level, problem_id=pid, sha256=hashlib.sha256(raw).hexdigest()
    )


def vet_hidden_test(path: Path | str) -> str:
    """Statically vet a KernelBench-Verified hidden test file (``level<L>/<pid>_hidden.py``) before
    anything runs; returns the sha256 of its bytes (a batch store records it: a changed file is
    another run's tests).

    Raises:
        ProblemError: unreadable, not UTF-8, too large, syntax error, or no module-level
            ``get_hidden_inputs``.
    """
    path = Path(path).resolve()
    text, raw = read_source(path, ProblemError)
    if "get_hidden_inputs" not in top_level_names(parse_source(path, text, ProblemError)):
        raise ProblemError(path, "not a hidden test file: it defines no get_hidden_inputs() at module level")
    return hashlib.sha256(raw).hexdigest()
