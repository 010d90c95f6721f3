"""What a batch store holds rows of: the identity of a job (:class:`Job`, its key), of a cached
baseline (:class:`BaselineKey`), progress counts, and who owns a claim on a job (host, pid and
process start time, so a recycled pid or a zombie keeps no claim alive)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from kbv.model.records import CandidateRef, EvalConfig, ProblemRef, to_dict


def problem_key(problem: ProblemRef) -> str:
    """Stable, readable key of a problem across checkouts: ``level1/19_ReLU``.

    Files outside a ``levelN`` folder give ``ReLU`` or ``19_ReLU``. Metrics group samples by this
    key and vetting exclusions are stored under it.
    """
    stem = f"{problem.problem_id}_{problem.name}" if problem.problem_id is not None else problem.name
    return f"level{problem.level}/{stem}" if problem.level is not None else stem


def config_hash(config: EvalConfig) -> str:
    """First 16 hex digits of the SHA-256 of the config's canonical JSON (sorted keys); an empty
    ``user_set`` or ``sanitize`` and an unset ``ncu_profile`` are left out, so a config without them
    hashes as it did before those fields existed (a store of an older kbv resumes)."""
    data = to_dict(config)
    for name in ("user_set", "sanitize", "ncu_profile"):
        if not data.get(name):
            data.pop(name, None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_hidden_tests(config_hash_: str, tests_sha256: str | None) -> str:
    """The ``config_hash`` of a job whose problem has a hidden test file (``tests_sha256``, its
    bytes' sha256): the configuration's hash and the file's, so the job's key changes with the file.
    Without one (None) the configuration's hash alone (a store of an older kbv resumes)."""
    return f"{config_hash_}+ht{tests_sha256[:16]}" if tests_sha256 else config_hash_


def planned_tests_hash(config_hash_: str) -> str:
    """The hidden test file's hash prefix :func:`with_hidden_tests` put in a job's ``config_hash``
    ("" for a job planned without one)."""
    return config_hash_.partition("+ht")[2]


def hidden_tests_changed(config_hash_: str, made_from: str | None) -> bool:
    """Whether a job planned with a hidden test file's hash (:func:`with_hidden_tests`) had its
    hidden sets made from other bytes (``made_from``: the sha256 the verdict's evidence records as
    ``hidden_tests_sha256``; None where no set was made). The file was edited during the run: the
    verdict's key names bytes its sets did not come from."""
    planned = planned_tests_hash(config_hash_)
    return bool(planned) and made_from is not None and not made_from.startswith(planned)


def hidden_tests_drift(config_hash_: str, made_from: str | None, path: object) -> str | None:
    """The ``hidden_tests_error`` of a verdict whose sets came from other bytes than its job was
    planned with (:func:`hidden_tests_changed`; ``path``: the file), None where they did not: the
    run says it (exit 2), and the next run supersedes the verdict, its key having the new bytes."""
    if not hidden_tests_changed(config_hash_, made_from):
        return None
    return (f"{path}: the file changed after the run was planned (sets made from {str(made_from)[:12]}, "
            f"planned {planned_tests_hash(config_hash_)[:12]})")


@dataclass(frozen=True)
class Job:
    """One (problem, candidate) evaluation of a batch. Identity is :attr:`key`."""

    problem_path: str
    problem_sha256: str
    candidate_path: str
    candidate_sha256: str
    run: str  #: the run (model) the candidate came from.
    sample_id: int | None
    #: :func:`config_hash` of the resolved :class:`EvalConfig` (:func:`with_hidden_tests` where the
    #: problem has a hidden test file).
    config_hash: str
    level: int | None = None
    problem_id: int | None = None
    problem_name: str | None = None

    @property
    def key(self) -> str:
        """SHA-256 (hex) of problem sha, candidate sha, run, sample id and config hash.

        Paths are not part of the key: a moved checkout resumes where it stopped.
        """
        ident = [self.problem_sha256, self.candidate_sha256, self.run, self.sample_id, self.config_hash]
        return hashlib.sha256(json.dumps(ident).encode()).hexdigest()

    @classmethod
    def from_refs(cls, problem: ProblemRef, candidate: CandidateRef, config: EvalConfig | str,
                  run: str | None = None) -> Job:
        """Build a job from the records; ``run`` defaults to ``candidate.run`` (``""`` if unset)."""
        return cls(
            problem_path=problem.path, problem_sha256=problem.sha256,
            candidate_path=candidate.path, candidate_sha256=candidate.sha256,
            run=run if run is not None else (candidate.run or ""), sample_id=candidate.sample_id,
            config_hash=config if isinstance(config, str) else config_hash(config),
            level=problem.level, problem_id=problem.problem_id, problem_name=problem.name,
        )


JOB_COLUMNS = ("problem_path", "problem_sha256", "candidate_path", "candidate_sha256", "run",
                "sample_id", "config_hash", "level", "problem_id", "problem_name")


@dataclass(frozen=True)
class BaselineKey:
    """What a cached baseline timing is valid for. ``driver`` is ``""`` where there is none (cpu)."""

    problem_sha256: str
    device_name: str
    driver: str
    torch_version: str
    precision: str
    label: str  #: ``eager-fp32`` | ``eager-tf32`` | ``compile``.


@dataclass(frozen=True)
class BaselineSummary:
    """A baseline timing known only by its statistics (KernelBench's JSON keeps no raw samples)."""

    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    num_trials: int
    device: str  #: e.g. ``cuda:0``.
    source: str  #: the file it was imported from.


@dataclass(frozen=True)
class Progress:
    """Job counts by state, for progress bars and ETAs."""

    total: int
    pending: int
    running: int
    done: int


def start_time(pid: int) -> str | None:
    """Process start time (clock ticks since boot) from ``/proc``; None off Linux or if gone.

    Returns ``"Z"`` for a zombie (killed but not yet reaped): it will never finish its job.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
    if fields[0] in ("Z", "X"):
        return "Z"
    return fields[19]  # field 22 of proc(5), starttime


def current_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{start_time(pid) or ''}"


def owner_alive(owner: str | None, claimed_at: float | None, stale_after_s: float | None) -> bool:
    """Whether the process that claimed a job may still be working on it."""
    if not owner:
        return False
    host, pid_s, start = owner.rsplit(":", 2)
    if host != socket.gethostname():
        if stale_after_s is None:
            return True
        return claimed_at is not None and time.time() - claimed_at < stale_after_s
    pid = int(pid_s)
    now_start = start_time(pid)
    if now_start is not None:
        return now_start != "Z" and (not start or now_start == start)
    if Path("/proc/self/stat").exists():
        return False  # /proc works and the pid is gone
    try:  # no /proc (macOS): signal 0 tests existence only
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
