"""Where the files of a batch are: problem files, candidate files (two layouts) and hidden tests.

Nothing here reads more than file names and directory listings, except :func:`vet_problems`,
which runs the static (``ast``-only) problem vetting of :mod:`kbv.intake.problems`. No problem or
candidate code is executed.

Candidate layouts (``docs/kernelbench-format.md``):

* ``kernelbench`` — KernelBench's generated-sample layout:
  ``<runs>/<run>/level_<L>_problem_<P>_sample_<S>_kernel.py``;
* ``plain`` — ``<run>/<level>/<problem id>/<sample>.py`` where ``<level>`` is ``level1``,
  ``level_1`` or ``1``, ``<problem id>`` is ``19`` or ``19_ReLU`` and ``<sample>`` is ``0``,
  ``sample0`` or ``sample_0``.

A candidate root given on the command line is either one run (its name is the folder's name) or a
folder of runs (each sub-folder holding candidates is one run). ``auto`` picks ``kernelbench`` when
the root holds any file named like a KernelBench sample, else ``plain``.

Hidden tests (KernelBench-Verified): ``hidden_tests/level<L>/<pid>_hidden.py`` defining
``get_hidden_inputs()``; :func:`discover_hidden_tests` finds them (see the module note on their use
in :mod:`kbv.batch.runner`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterable, Iterator

from kbv.intake.problems import _FILE_RE, ProblemError, load_problem
from kbv.model.records import ProblemRef


class Layout(str, enum.Enum):
    auto = "auto"
    kernelbench = "kernelbench"
    plain = "plain"


class LayoutError(ValueError):
    """Candidate or problem folders kbv cannot interpret (one line naming the path)."""


KERNELBENCH_RE = re.compile(r"^level_(?P<level>\d+)_problem_(?P<pid>\d+)_sample_(?P<sample>\d+)_kernel\.py$")
_PLAIN_LEVEL_RE = re.compile(r"^(?:level_?)?(?P<level>\d+)$")
_PLAIN_PROBLEM_RE = re.compile(r"^(?P<pid>\d+)(?:_.*)?$")
_PLAIN_SAMPLE_RE = re.compile(r"^(?:sample_?)?(?P<sample>\d+)\.py$")
_HIDDEN_LEVEL_RE = re.compile(r"^level_?(?P<level>\d+)$")
_HIDDEN_FILE_RE = re.compile(r"^(?P<pid>\d+)_hidden\.py$")


@dataclass(frozen=True)
class CandidateFile:
    """One candidate file found on disk, before any vetting."""

    path: Path  #: absolute path.
    run: str  #: the run (model) it belongs to.
    level: int
    problem_id: int
    sample_id: int
    layout: Layout  #: ``kernelbench`` or ``plain``.

    @property
    def identity(self) -> tuple[str, int, int, int]:
        return (self.run, self.level, self.problem_id, self.sample_id)


@dataclass(frozen=True)
class CandidateScan:
    """Everything found under the candidate roots."""

    files: tuple[CandidateFile, ...]  #: sorted by run, level, problem id, sample id.
    ignored: tuple[Path, ...]  #: ``.py`` files inside run folders that fit no pattern.

    def runs(self) -> list[str]:
        return sorted({f.run for f in self.files})


# Candidates ---------------------------------------------------------------------------------------

def _kernelbench_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.iterdir() if p.is_file() and KERNELBENCH_RE.match(p.name))


def _scan_kernelbench_run(run_dir: Path, run: str) -> tuple[list[CandidateFile], list[Path]]:
    files, ignored = [], []
    for p in sorted(run_dir.iterdir()):
        if not p.is_file():
            continue
        m = KERNELBENCH_RE.match(p.name)
        if m:
            files.append(CandidateFile(p.resolve(), run, int(m["level"]), int(m["pid"]), int(m["sample"]),
                                       Layout.kernelbench))
        elif p.suffix == ".py":
            ignored.append(p)
    return files, ignored


def _plain_level_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    out = []
    for d in sorted(run_dir.iterdir()):
        m = _PLAIN_LEVEL_RE.match(d.name)
        if d.is_dir() and m:
            out.append((int(m["level"]), d))
    return out


def _scan_plain_run(run_dir: Path, run: str) -> tuple[list[CandidateFile], list[Path]]:
    files, ignored = [], []
    levels = {d for _, d in _plain_level_dirs(run_dir)}
    for p in sorted(run_dir.iterdir()):  # what lies beside the level folders fits no layout
        if p not in levels:
            ignored += [p] if p.suffix == ".py" and p.is_file() else sorted(p.rglob("*.py")) if p.is_dir() else []
    for level, level_dir in _plain_level_dirs(run_dir):
        for pdir in sorted(level_dir.iterdir()):
            pm = _PLAIN_PROBLEM_RE.match(pdir.name)
            if not pdir.is_dir():
                if pdir.suffix == ".py":
                    ignored.append(pdir)
                continue
            if not pm:
                ignored += sorted(pdir.rglob("*.py"))
                continue
            for f in sorted(pdir.iterdir()):
                sm = _PLAIN_SAMPLE_RE.match(f.name)
                if f.is_file() and sm:
                    files.append(CandidateFile(f.resolve(), run, level, int(pm["pid"]), int(sm["sample"]),
                                               Layout.plain))
                elif f.suffix == ".py":
                    ignored.append(f)
    return files, ignored


def detect_layout(root: Path) -> Layout:
    """``kernelbench`` when ``root`` or one of its sub-folders holds a KernelBench sample file,
    else ``plain``."""
    if _kernelbench_files(root):
        return Layout.kernelbench
    if any(d.is_dir() and _kernelbench_files(d) for d in root.iterdir()):
        return Layout.kernelbench
    return Layout.plain


def scan_root(root: Path | str, layout: Layout = Layout.auto) -> CandidateScan:
    """Candidates under one root: a single run folder or a folder of run folders.

    Raises:
        LayoutError: ``root`` is not a folder, or no candidate fits the layout.
    """
    root = Path(root)
    if not root.exists():
        raise LayoutError(f"candidates '{root}': no such folder ({root.resolve()})")
    if not root.is_dir():
        raise LayoutError(f"candidates '{root}': a file, not a folder of candidates ({root.resolve()})")
    layout = Layout(layout)
    files: list[CandidateFile] = []
    ignored: list[Path] = []

    def scan_run(run: str, d: Path, kind: Layout) -> None:
        f, i = (_scan_kernelbench_run if kind is Layout.kernelbench else _scan_plain_run)(d, run)
        files.extend(f)
        ignored.extend(i)

    if _kernelbench_files(root) or _plain_level_dirs(root):  # the root is one run
        scan_run(root.resolve().name, root, detect_layout(root) if layout is Layout.auto else layout)
    else:  # a folder of runs: with ``auto`` each run folder in its own layout
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            kind = layout
            if layout is Layout.auto:
                kind = Layout.kernelbench if _kernelbench_files(d) else Layout.plain
            if (kind is Layout.kernelbench and _kernelbench_files(d)) or (kind is Layout.plain and _plain_level_dirs(d)):
                scan_run(d.name, d, kind)
            else:  # a folder whose files fit no layout (e.g. <run>/19/0.py), listed, not dropped
                ignored.extend(sorted(d.rglob("*.py")))
        ignored.extend(sorted(p for p in root.iterdir() if p.is_file() and p.suffix == ".py"))
    if not files:
        # problem files named as KernelBench names them (<id>_<Name>.py): the two folders swapped?
        swapped = " (it holds problem files: arguments swapped? the problems come first)" if problem_files(root) else ""
        raise LayoutError(
            f"{root}: no candidate files in the {layout.value} layout "
            "(kernelbench: <run>/level_<L>_problem_<P>_sample_<S>_kernel.py; "
            f"plain: <run>/<level>/<problem id>/<sample>.py){swapped}")
    return CandidateScan(tuple(files), tuple(ignored))


def discover_candidates(roots: Iterable[Path | str], layout: Layout = Layout.auto) -> CandidateScan:
    """Candidates under every root, several runs at once.

    Raises:
        LayoutError: a root fits no layout, or two files claim the same (run, level, problem,
            sample) — e.g. two roots each holding a run of the same name.
    """
    files: dict[tuple, CandidateFile] = {}
    ignored: list[Path] = []
    for root in roots:
        scan = scan_root(root, layout)
        ignored += scan.ignored
        for f in scan.files:
            if f.identity in files:
                raise LayoutError(f"{f.path}: run {f.run!r} level {f.level} problem {f.problem_id} sample "
                                  f"{f.sample_id} is also {files[f.identity].path}")
            files[f.identity] = f
    ordered = sorted(files.values(), key=lambda f: f.identity)
    return CandidateScan(tuple(ordered), tuple(ignored))


# Problems -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProblemScan:
    """Problem files under a root: the vetted ones and the ones that failed static vetting."""

    problems: tuple[ProblemRef, ...]  #: sorted by (level, id, name).
    errors: tuple[ProblemError, ...]  #: files named like problems that failed vetting.


def problem_files(root: Path | str) -> list[Path]:
    """Files named ``<id>_<Name>.py`` under ``root`` (a file, a ``levelN`` folder or a checkout),
    leaving out ``hidden_tests`` folders, hidden test files (``<id>_hidden.py``, wherever their
    folder is: a ``--hidden-tests`` folder inside the problems, newcomer helper) and ``__pycache__``.

    Raises:
        LayoutError: ``root`` does not exist.
    """
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise LayoutError(f"problems {str(root)!r}: no such file or folder ({root.resolve()})")
    return sorted(p for p in root.rglob("*.py")
                  if _FILE_RE.match(p.name) and not _HIDDEN_FILE_RE.match(p.name)
                  and "__pycache__" not in p.parts and "hidden_tests" not in p.relative_to(root).parts)


def unnamed_problem_files(root: Path | str) -> list[Path]:
    """The ``.py`` files under a problem folder that :func:`problem_files` leaves out because their
    names are not ``<id>_<Name>.py`` (``__init__.py``, ``hidden_tests`` and ``__pycache__`` aside):
    said to the user, never silently skipped. Empty when ``root`` is a file or no folder."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*.py")
                  if not _FILE_RE.match(p.name) and p.name != "__init__.py"
                  and "__pycache__" not in p.parts and "hidden_tests" not in p.relative_to(root).parts
                  and not _HIDDEN_FILE_RE.match(p.name))


def vet_problems(root: Path | str) -> ProblemScan:
    """Statically vet every problem file under ``root``; a broken file is collected, not raised,
    so one bad file does not stop a batch over a whole checkout.

    Raises:
        LayoutError: ``root`` does not exist, or two files share a (level, id).
    """
    refs, errors = [], []
    for p in problem_files(root):
        try:
            refs.append(load_problem(p))
        except ProblemError as exc:
            errors.append(exc)
    seen: dict[tuple, ProblemRef] = {}
    for r in refs:
        if r.problem_id is None:
            continue
        k = (r.level, r.problem_id)
        if k in seen:
            raise LayoutError(f"{r.path}: level {r.level} problem {r.problem_id} is also {seen[k].path}")
        seen[k] = r
    refs.sort(key=lambda r: (r.level or 0, r.problem_id or 0, r.name))
    return ProblemScan(tuple(refs), tuple(errors))


# Hidden tests -------------------------------------------------------------------------------------

def find_hidden_tests_root(*candidates: Path | str) -> Path | None:
    """The first ``hidden_tests`` folder among ``candidates`` (each may be the folder itself or
    a folder containing it)."""
    for c in candidates:
        c = Path(c)
        for d in (c, c / "hidden_tests"):
            if d.is_dir() and d.name == "hidden_tests":
                return d
    return None


def hidden_test_identity(path: Path | str) -> tuple[int | None, int | None]:
    """``(level, problem_id)`` a hidden test file's name gives (``level<L>/<pid>_hidden.py``), each
    None where the name or its folder's name does not follow that layout."""
    path = Path(path)
    fm, lm = _HIDDEN_FILE_RE.match(path.name), _HIDDEN_LEVEL_RE.match(path.parent.name)
    return (int(lm["level"]) if lm and fm else None), (int(fm["pid"]) if fm else None)


def _hidden_level_dirs(root: Path | str) -> Iterator[tuple[int, Path]]:
    """``(level, folder)`` of each ``level<L>`` folder of ``root``'s ``hidden_tests`` folder
    (``root`` itself or its ``hidden_tests`` subfolder), or of ``root`` itself under another name."""
    base = find_hidden_tests_root(root) or Path(root)
    if not base.is_dir():
        return
    for d in sorted(base.iterdir()):
        lm = _HIDDEN_LEVEL_RE.match(d.name)
        if lm and d.is_dir():
            yield int(lm["level"]), d


def misnamed_hidden_tests(root: Path | str, levels: Collection[int] | None = None) -> list[Path]:
    """``.py`` files (any case of the suffix) in ``root``'s ``level<L>`` folders (as
    :func:`discover_hidden_tests` reads them; ``levels``: those levels only) not named
    ``<pid>_hidden.py``: not used, and worth a word (``1_hidden_old.py``, ``3_hidden.PY``)."""
    return [f.absolute() for level, d in _hidden_level_dirs(root) if levels is None or level in levels
            for f in sorted(d.iterdir()) if f.suffix.lower() == ".py" and not _HIDDEN_FILE_RE.match(f.name)]


def discover_hidden_tests(root: Path | str) -> dict[tuple[int, int], Path]:
    """``{(level, problem_id): path}`` of every ``level<L>/<pid>_hidden.py`` of ``root``'s
    ``hidden_tests`` folder (``root`` itself or its ``hidden_tests`` subfolder), or of ``root``
    itself under another name.

    Raises:
        LayoutError: two files claim one problem (``level1/1_hidden.py`` and ``level1/01_hidden.py``,
            or ``level1/`` and ``level_1/``): which one holds its tests is not for kbv to guess.
    """
    out: dict[tuple[int, int], Path] = {}
    for level, d in _hidden_level_dirs(root):
        for f in sorted(d.iterdir()):
            fm = _HIDDEN_FILE_RE.match(f.name)
            if fm:  # a dangling link or a folder of that name too: vetting names it (not a file)
                key = (level, int(fm["pid"]))
                if key in out:
                    raise LayoutError(f"{out[key]} and {f.absolute()}: two hidden test files for level{key[0]}/"
                                      f"{key[1]}; keep one")
                out[key] = f.absolute()
    return out


__all__ = ["Layout", "LayoutError", "CandidateFile", "CandidateScan", "ProblemScan", "scan_root",
           "discover_candidates", "detect_layout", "problem_files", "unnamed_problem_files", "vet_problems",
           "discover_hidden_tests", "find_hidden_tests_root", "hidden_test_identity", "misnamed_hidden_tests",
           "KERNELBENCH_RE"]
