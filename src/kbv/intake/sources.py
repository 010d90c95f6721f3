"""Problems and candidates given as paths or as source text: text is written once to
``<kbv cache>/sources/`` (mode 0700) under a name made of its SHA-256, so the same text is the same
file on every call and in every process (Triton and ``inspect`` read the file; the build cache is
keyed by the content hash). Nothing here runs the code."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Any, Union

from kbv.model.records import CandidateRef, ProblemRef

#: a problem or candidate: a path (``str`` without a newline, or ``os.PathLike``), source text (a
#: ``str`` with a newline), or a ref already vetted by :func:`kbv.intake.problems.load_problem` /
#: :func:`kbv.intake.candidates.load_candidate`.
Source = Union[str, "os.PathLike[str]", ProblemRef, CandidateRef]


def _sources_dir() -> Path:
    from kbv.model.paths import cache_root

    d = cache_root() / "sources"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def source_file(text: str, kind: str, name: str | None = None) -> Path:
    """The file holding ``text`` (UTF-8) under ``<kbv cache>/sources/``:
    ``<kind>_<first 24 hex digits of its SHA-256>/<name>.py`` (``name`` defaults to ``kind``; it is
    what verdicts and reports show, and for a problem a KernelBench name such as ``19_ReLU`` also
    gives its id; a ``.py`` ending is the file's, not the stem's). Written once (atomically): the
    same path for the same text and name on every call and in every process.

    Raises:
        ValueError: ``name`` is not a plain file stem (letters, digits, ``_``, ``.``, ``-``; at most 100).
        OSError: the cache folder cannot be written.
    """
    if name is not None and not _NAME.fullmatch(name):
        raise ValueError(f"{kind} name {name!r} must be a plain file stem (letters, digits, '_', '.', '-')")
    if name is not None and name.endswith(".py") and len(name) > 3:
        name = name[:-3]  # a file name given for its stem: shown as written, not as "x.py.py"
    raw = text.encode("utf-8")
    folder = _sources_dir() / f"{kind}_{hashlib.sha256(raw).hexdigest()[:24]}"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{name or kind}.py"
    try:
        if path.read_bytes() == raw:
            return path
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(raw)
    os.replace(tmp, path)  # never a half-written file under the final name
    return path


def as_path(value: Any, kind: str, name: str | None = None) -> Path:
    """``value`` as a file path: source text (a ``str`` with a newline) is written with
    :func:`source_file` under ``name``; a path must exist (``name`` is then not allowed)."""
    if isinstance(value, str) and "\n" in value:
        return source_file(value, kind, name)
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{kind} must be a path, source text or a kbv ref, not {type(value).__name__}")
    if name is not None:
        raise ValueError(f"{kind}_name is for source text; a {kind} file is named by its path")
    path = Path(value).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{kind} file {str(path)!r} does not exist (source text must contain a newline)")
    return path


def problem_ref(problem: Source, name: str | None = None) -> ProblemRef:
    """A statically vetted problem (nothing runs).

    Raises:
        FileNotFoundError: a path that names no file.
        kbv.intake.problems.ProblemError: not a KernelBench problem (unreadable, syntax error, ``Model``,
            ``get_inputs`` or ``get_init_inputs`` missing).
        TypeError: ``problem`` is neither a path, text nor a ``ProblemRef``.
    """
    if isinstance(problem, ProblemRef):
        return problem
    from kbv.intake.problems import load_problem

    return load_problem(as_path(problem, "problem", name))
