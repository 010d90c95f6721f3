"""Planning a batch (``kbv run``): the (problem, candidate) jobs from file names and static reads
only (:mod:`kbv.intake.layout`, :mod:`kbv.intake.problems`, :mod:`kbv.intake.candidates`); problem
files that fail static vetting become :class:`BrokenProblemFile` entries, never jobs. And the store
side of a rerun: its configuration must be the batch's (:func:`check_config`), exclusions follow the
problem files' hashes (:func:`_sync_exclusions`), and jobs of changed files are superseded
(:func:`remove_superseded`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kbv.batch.jobs import Job, config_hash, planned_tests_hash, problem_key, with_hidden_tests
from kbv.batch.store import Store
from kbv.intake.candidates import CandidateError, load_candidate
from kbv.intake.layout import (CandidateFile, Layout, LayoutError, discover_candidates, discover_hidden_tests,
    find_hidden_tests_root, misnamed_hidden_tests, vet_problems)
from kbv.intake.problems import ProblemError, identify, vet_hidden_test
from kbv.batch.evaluator import rejected_candidate
from kbv.model.records import CandidateRef, EvalConfig, ProblemRef, to_dict


#: Prefix of the exclusion reasons this module writes; the file hash follows, then the fault.
BROKEN_PREFIX = "broken problem file"
_BROKEN_RE = re.compile(rf"^{BROKEN_PREFIX} \(sha256 (?P<sha>[0-9a-f]+)\): ")
_SHA_CHARS = 16


def broken_reason(sha256: str, fault: str) -> str:
    """Exclusion reason of a broken problem file: names the file's hash so a changed file is retried."""
    return f"{BROKEN_PREFIX} (sha256 {sha256[:_SHA_CHARS]}): {fault}"


# Selection and planning -------------------------------------------------------------------------

@dataclass(frozen=True)
class Selection:
    """Filters of a batch; None means everything."""

    levels: frozenset[int] | None = None
    problem_ids: frozenset[int] | None = None
    runs: frozenset[str] | None = None

    def problem(self, level: int | None, problem_id: int | None) -> bool:
        if self.levels is not None and level not in self.levels:
            return False
        return self.problem_ids is None or problem_id in self.problem_ids

    def run(self, name: str) -> bool:
        return self.runs is None or name in self.runs


def parse_ids(text: str) -> frozenset[int]:
    """``"1,2,5-8"`` → {1, 2, 5, 6, 7, 8}.

    Raises:
        ValueError: not a comma-separated list of ids and ranges.
    """
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"bad problem id {part!r} (expected e.g. 1,2,5-8)")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi < lo:
            raise ValueError(f"bad range {part!r}")
        out.update(range(lo, hi + 1))
    if not out:
        raise ValueError("no problem ids given")
    return frozenset(out)


@dataclass(frozen=True)
class PlannedJob:
    """One job of a batch with the records it is run from."""

    job: Job
    problem: ProblemRef
    candidate: CandidateRef
    rejection: str | None = None  #: static-vetting fault: becomes COMPILE_ERROR without running.


@dataclass(frozen=True)
class BrokenProblemFile:
    """A problem file that failed static vetting (no :class:`ProblemRef` could be made)."""

    key: str  #: :func:`kbv.batch.jobs.problem_key`-style key from the file name.
    sha256: str
    fault: str
    path: str = ""  #: the file, as found under the problems folder.
    level: int | None = None
    problem_id: int | None = None


@dataclass(frozen=True)
class BatchPlan:
    config: EvalConfig
    problems: tuple[ProblemRef, ...]  #: selected problems that passed static vetting.
    jobs: tuple[PlannedJob, ...]  #: static rejections first, then the rest in (run, level, id, sample) order.
    broken_files: tuple[BrokenProblemFile, ...]
    orphans: tuple[CandidateFile, ...]  #: selected candidates with no problem file of their (level, id).
    ignored: tuple[Path, ...]  #: ``.py`` files in run folders that fit no layout pattern.
    hidden_tests: dict[tuple[int, int], Path] = field(default_factory=dict)

    #: selected candidates whose problem file is one of ``broken_files``: skipped with it.
    broken_candidates: tuple[CandidateFile, ...] = ()

    #: files of a ``--hidden-tests`` folder whose (level, id) is no problem of the problems root, in
    #: the levels the root has, and ``.py`` files of its level folders not named ``<pid>_hidden.py``.
    stray_hidden_tests: tuple[Path, ...] = ()

    @property
    def runs(self) -> list[str]:
        return sorted({pj.job.run for pj in self.jobs})

    def candidates_of(self, broken: BrokenProblemFile) -> list[CandidateFile]:
        """The selected candidates skipped because ``broken`` failed static vetting."""
        return [f for f in self.broken_candidates if (f.level, f.problem_id) == (broken.level, broken.problem_id)]


def _broken_file(exc: ProblemError) -> BrokenProblemFile:
    import hashlib

    path = Path(exc.path)
    level, pid, name = identify(path)
    stem = f"{pid}_{name}" if pid is not None else name
    key = f"level{level}/{stem}" if level is not None else stem
    try:
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        sha = hashlib.sha256(f"unreadable:{path}".encode()).hexdigest()
    return BrokenProblemFile(key, sha, exc.fault, str(path), level, pid)


def plan_batch(problems_root: Path | str, candidate_roots: Sequence[Path | str], config: EvalConfig, *,
               layout: Layout = Layout.auto, selection: Selection = Selection(),
               hidden_tests_root: Path | str | None = None) -> BatchPlan:
    """Find and statically vet the problems and candidates of a batch; nothing is executed.

    Raises:
        kbv.intake.layout.LayoutError: a folder fits no layout, or two files claim one identity.
    """
    pscan = vet_problems(problems_root)
    problems = tuple(p for p in pscan.problems if selection.problem(p.level, p.problem_id))
    broken = []
    for exc in pscan.errors:
        level, pid, _ = identify(Path(exc.path))
        if selection.problem(level, pid):
            broken.append(_broken_file(exc))
    by_id = {(p.level, p.problem_id): p for p in problems if p.problem_id is not None}
    broken_ids = {(b.level, b.problem_id) for b in broken if b.problem_id is not None}
    stray_tests: tuple[Path, ...] = ()
    if hidden_tests_root is not None and not by_id:  # no problem to run: said as such by the caller
        hidden = {}
    elif hidden_tests_root is not None:
        known = {(p.level, p.problem_id) for p in pscan.problems} | {identify(Path(e.path))[:2] for e in pscan.errors}
        hidden, stray_tests = _named_hidden_tests(Path(hidden_tests_root), by_id, known)
    else:
        hidden_root = find_hidden_tests_root(problems_root, Path(problems_root).parent)
        hidden = discover_hidden_tests(hidden_root) if hidden_root else {}
        hidden = {k: v for k, v in hidden.items() if k in by_id}
    # each hidden test file vetted before anything runs (a broken one would leave its problem's
    # verdicts without the tests), and its bytes made part of its problem's job keys: a file added,
    # changed or removed later supersedes those verdicts (remove_superseded), as a changed problem
    # file does (newcomer helper: a fixed file left the verdicts made without it)
    tests_sha = {}
    for k, path in hidden.items():
        try:
            tests_sha[k] = vet_hidden_test(path)
        except ProblemError as exc:
            raise LayoutError(f"hidden test file {exc}") from None
    cscan = discover_candidates(candidate_roots, layout)
    rejected, accepted, orphans, broken_of = [], [], [], []
    chash = config_hash(config)
    for f in cscan.files:
        if not selection.run(f.run) or not selection.problem(f.level, f.problem_id):
            continue
        problem = by_id.get((f.level, f.problem_id))
        if problem is None:
            (broken_of if (f.level, f.problem_id) in broken_ids else orphans).append(f)
            continue
        try:
            cand = load_candidate(f.path, run=f.run, sample_id=f.sample_id)
            fault = None
        except CandidateError as exc:
            cand = rejected_candidate(f.path, run=f.run, sample_id=f.sample_id)
            fault = str(exc)
        job = Job.from_refs(problem, cand, with_hidden_tests(chash, tests_sha.get((f.level, f.problem_id))))
        pj = PlannedJob(job, problem, cand, fault)
        (rejected if fault else accepted).append(pj)
    return BatchPlan(config=config, problems=problems, jobs=tuple(rejected + accepted),
                     broken_files=tuple(broken), orphans=tuple(orphans), ignored=cscan.ignored,
                     hidden_tests=hidden, broken_candidates=tuple(broken_of), stray_hidden_tests=stray_tests)


def _named_hidden_tests(root: Path, by_id: dict,
                        known: set) -> tuple[dict[tuple[int, int], Path], tuple[Path, ...]]:
    """The hidden-test files of a folder the user named (``--hidden-tests``): ``root`` is a
    ``hidden_tests`` folder, holds one, or holds its ``level<L>/<pid>_hidden.py`` files under any
    name. Returns (the selected problems' files, the stray ones): stray are files for no problem of
    the root at all (``known``: every problem's (level, id), broken ones included; not merely
    unselected ones), and ``.py`` files not named ``<pid>_hidden.py``, both only in the levels the
    root has (a whole ``hidden_tests`` folder beside one level's problems is usual): a typo'd name
    or the wrong level's folder leaves a problem without the tests meant for it.

    Raises:
        kbv.intake.layout.LayoutError: ``root`` is not a folder, holds no ``<pid>_hidden.py`` file,
            or none for a selected problem (a batch would otherwise run without the tests it was
            given).
    """
    if not root.is_dir():
        raise LayoutError(f"{root}: --hidden-tests names no folder")
    found = discover_hidden_tests(root)
    if not found:
        raise LayoutError(f"{root}: --hidden-tests holds no level<L>/<pid>_hidden.py file "
                          "(KernelBench-Verified's hidden_tests/level1/1_hidden.py layout)")
    kept = {k: v for k, v in found.items() if k in by_id}
    if not kept:
        shown = ", ".join(f"level{lv}/{pid}" for lv, pid in sorted(found)[:3])
        raise LayoutError(f"{root}: --hidden-tests has {len(found)} hidden-test file(s) ({shown}"
                          f"{', ...' if len(found) > 3 else ''}) but none for a selected problem")
    levels = {lv for lv, _ in known}
    stray = [v for k, v in sorted(found.items()) if k not in known and k[0] in levels]
    return kept, tuple(stray + misnamed_hidden_tests(root, levels))


# Running ------------------------------------------------------------------------------------------

class ConfigMismatch(ValueError):
    """The store holds results of a different configuration."""


def check_config(store: Store, config: EvalConfig) -> None:
    """Record the batch configuration in a new store; refuse a store made with another one (fields
    added to :class:`EvalConfig` since the store was made count as their defaults).

    One store holds one configuration, so every sample of a candidate is counted once by the
    metrics (a second configuration would add a second verdict per candidate).

    Raises:
        ConfigMismatch: the store was made with a different configuration.
    """
    mine = json.loads(json.dumps(to_dict(config), sort_keys=True))
    text = store.get_meta("config")
    if text is None:
        store.set_meta("config", json.dumps(mine, sort_keys=True))
        return
    theirs = json.loads(text)
    # a field this kbv has and the store's kbv had not counts as its default: a store of an older kbv
    # resumes (its record is left as it is, so that kbv still reads its own store)
    defaults = json.loads(json.dumps(to_dict(EvalConfig()), sort_keys=True))
    theirs = {**{k: defaults[k] for k in mine if k not in theirs and k in defaults}, **theirs}
    if theirs != mine:
        diff = [f"{k} {theirs.get(k)!r} -> {mine.get(k)!r}" for k in sorted(set(theirs) | set(mine))
                if theirs.get(k) != mine.get(k)]
        raise ConfigMismatch(f"{store.path} holds results of another configuration ({'; '.join(diff)}); "
                             "use the same options or a new --store")


def _sync_exclusions(plan: BatchPlan, store: Store, retry_excluded: bool) -> dict[str, str]:
    """Write exclusions of broken files; drop stale ones. Returns ``{problem key: sha prefix}`` of
    problems whose jobs are skipped."""
    current = {problem_key(p): p.sha256 for p in plan.problems}
    current.update({b.key: b.sha256 for b in plan.broken_files})
    for key, reasons in store.exclusions().items():
        if key not in current:
            continue
        for reason in reasons:
            m = _BROKEN_RE.match(reason)
            if m and (retry_excluded or not current[key].startswith(m["sha"])):
                store.remove_exclusion(key, reason)
    for b in plan.broken_files:
        store.exclude_problem(b.key, broken_reason(b.sha256, f"static vetting: {b.fault}"))
    skip = {}
    for key, reasons in store.exclusions().items():
        for reason in reasons:
            m = _BROKEN_RE.match(reason)
            if m and key in current and current[key].startswith(m["sha"]):
                skip[key] = m["sha"]
    return skip


def _slot(job: Job) -> tuple:
    return (job.run, job.level, job.problem_id, job.problem_name, job.sample_id)


def check_hidden_tests(store: Store, plan: BatchPlan, *, allow_without: bool = False) -> None:
    """Refuse a rerun that would replace verdicts made with hidden tests by verdicts made without
    them: a stored job of one of the plan's slots whose key has a hidden test file's hash
    (:func:`kbv.batch.jobs.with_hidden_tests`) where the plan's job has none (the
    ``--hidden-tests`` of the first run left out, or its folder moved). Statically rejected jobs do
    not count (their verdict needs no test); a changed file does not either (its verdicts are
    superseded, :func:`remove_superseded`); ``allow_without``: a file removed on purpose, those
    verdicts are replaced. Reads the store's meta ``hidden_tests`` (the folder each problem's file
    was in: ``{"level/id": folder}``) for the message; :func:`record_hidden_tests` writes it.

    Raises:
        ConfigMismatch: such jobs exist; the message names their problems and their folders.
    """
    if allow_without:
        return
    wanted = {_slot(pj.job): pj.job for pj in plan.jobs if pj.rejection is None}
    lost = sorted({f"level{j.level}/{j.problem_id}" for j in store.jobs()
                   if _slot(j) in wanted and planned_tests_hash(j.config_hash)
                   and not planned_tests_hash(wanted[_slot(j)].config_hash)})
    if lost:
        folders = _hidden_folders(store)
        where = ", ".join(sorted({folders[k] for k in lost if k in folders}))
        shown = ", ".join(lost[:5]) + (", ..." if len(lost) > 5 else "")
        raise ConfigMismatch(f"{store.path} holds verdicts made with hidden tests for {len(lost)} problem(s) ({shown}) "
                             f"that this run has no hidden test file for; give the same --hidden-tests"
                             f"{f' ({where})' if where else ''}, a new --store, or "
                             "--allow-without-hidden-tests to replace those verdicts")


def _hidden_folders(store: Store) -> dict[str, str]:
    """The store's meta ``hidden_tests``: ``{"level/id": folder}`` ({} where none is recorded)."""
    try:
        folders = json.loads(store.get_meta("hidden_tests") or "{}")
    except ValueError:
        return {}
    return folders if isinstance(folders, dict) else {}


def record_hidden_tests(store: Store, plan: BatchPlan) -> None:
    """Record in the store the folder of each of the plan's hidden test files (meta
    ``hidden_tests``, merged with what earlier runs recorded), once the run is accepted."""
    if not plan.hidden_tests:
        return
    folders = _hidden_folders(store)
    folders.update({f"level{lv}/{pid}": str(Path(path).parent.parent) for (lv, pid), path in plan.hidden_tests.items()})
    store.set_meta("hidden_tests", json.dumps(folders, sort_keys=True))


def remove_superseded(plan: BatchPlan, store: Store) -> int:
    """Delete stored jobs (and verdicts) whose slot — (run, problem, sample) — the plan now fills
    with a different job: the candidate or the problem file changed, so the old verdict no longer
    describes the files on disk and must not count as a second sample. Jobs outside the plan's
    slots (other runs, filtered-out problems) are kept. Returns how many were removed."""
    wanted = {_slot(pj.job): pj.job.key for pj in plan.jobs}
    stale = [j.key for j in store.jobs() if _slot(j) in wanted and wanted[_slot(j)] != j.key]
    return store.remove_jobs(stale) if stale else 0
