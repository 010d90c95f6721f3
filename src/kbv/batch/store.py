"""The result store of a batch run: one SQLite file, written the moment each result finishes.

Tables (``sqlite3`` stdlib, WAL journal, ``synchronous=FULL``):

* ``jobs``: one row per (problem, candidate, run, sample, config) with its state
  ``pending`` → ``running`` → ``done``. The primary key is :attr:`Job.key`, a hash of the identity,
  so adding the same job twice is a no-op.
* ``verdicts``: the verdict JSON of a finished job plus indexed columns (status, level, problem,
  run, sample, speedups, correctness flags). Written together with the job's ``done`` state in ONE
  transaction (:meth:`Store.put_verdict`), so a ``kill -9`` at any instant leaves either no trace of
  the result (the job is redone) or the whole result (the job is never redone). The primary key
  makes a second write of the same job replace the first instead of duplicating it.
* ``exclusions``: problems left out of aggregate metrics by vetting, with the reasons.
* ``baselines``: cached baseline timings per (problem sha, device name, driver, torch version,
  precision, baseline label).
* ``baseline_summaries``: baseline figures imported from KernelBench's JSON (mean/std/min/max
  only, no raw samples; see :mod:`kbv.batch.baselines`).

A job left ``running`` by a process that no longer exists is pending again: the owner of a claim is
recorded as host, pid and (on Linux) the process start time, so a recycled pid or a zombie does not
keep a claim alive. Claims from another host expire after ``stale_after_s`` when that is set.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from kbv.model.records import (CandidateRef, EvalConfig, Measurement, ProblemRef, Verdict, to_dict, to_json,
    verdict_from_json)

STORE_SCHEMA = 1

#: Baseline labels that get their own indexed speedup column in ``verdicts``.
SPEEDUP_COLUMNS = {"eager-fp32": "speedup_eager_fp32", "eager-tf32": "speedup_eager_tf32",
                   "eager-fp32-cudnn-tf32": "speedup_eager_fp32_cudnn_tf32", "compile": "speedup_compile"}

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_key TEXT PRIMARY KEY,
    problem_path TEXT NOT NULL,
    problem_sha256 TEXT NOT NULL,
    candidate_path TEXT NOT NULL,
    candidate_sha256 TEXT NOT NULL,
    run TEXT NOT NULL,
    sample_id INTEGER,
    config_hash TEXT NOT NULL,
    level INTEGER,
    problem_id INTEGER,
    problem_name TEXT,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done')),
    attempts INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    claimed_at REAL,
    added_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS verdicts (
    job_key TEXT PRIMARY KEY REFERENCES jobs(job_key),
    status TEXT NOT NULL,
    level INTEGER,
    problem_id INTEGER,
    problem_name TEXT NOT NULL,
    problem_sha256 TEXT NOT NULL,
    run TEXT NOT NULL,
    sample_id INTEGER,
    nominal_passed INTEGER NOT NULL,
    hidden_passed INTEGER NOT NULL,
    correct INTEGER NOT NULL,
    {", ".join(f"{c} REAL" for c in SPEEDUP_COLUMNS.values())},
    memory_efficiency REAL,
    verdict_json TEXT NOT NULL,
    finished_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS verdicts_run_level ON verdicts(run, level, problem_id);
CREATE TABLE IF NOT EXISTS exclusions (
    problem_key TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (problem_key, reason)
);
CREATE TABLE IF NOT EXISTS baselines (
    problem_sha256 TEXT NOT NULL,
    device_name TEXT NOT NULL,
    driver TEXT NOT NULL,
    torch_version TEXT NOT NULL,
    precision TEXT NOT NULL,
    label TEXT NOT NULL,
    measurement_json TEXT NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (problem_sha256, device_name, driver, torch_version, precision, label)
);
CREATE TABLE IF NOT EXISTS baseline_summaries (
    problem_sha256 TEXT NOT NULL,
    device_name TEXT NOT NULL,
    driver TEXT NOT NULL,
    torch_version TEXT NOT NULL,
    precision TEXT NOT NULL,
    label TEXT NOT NULL,
    summary_json TEXT NOT NULL,
    imported_at REAL NOT NULL,
    PRIMARY KEY (problem_sha256, device_name, driver, torch_version, precision, label)
);
"""


# Identity -------------------------------------------------------------------------------------

def problem_key(problem: ProblemRef) -> str:
    """Stable, readable key of a problem across checkouts: ``level1/19_ReLU``.

    Files outside a ``levelN`` folder give ``ReLU`` or ``19_ReLU``. Metrics group samples by this
    key and vetting exclusions are stored under it.
    """
    stem = f"{problem.problem_id}_{problem.name}" if problem.problem_id is not None else problem.name
    return f"level{problem.level}/{stem}" if problem.level is not None else stem


def config_hash(config: EvalConfig) -> str:
    """First 16 hex digits of the SHA-256 of the config's canonical JSON (sorted keys)."""
    text = json.dumps(to_dict(config), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Job:
    """One (problem, candidate) evaluation of a batch. Identity is :attr:`key`."""

    problem_path: str
    problem_sha256: str
    candidate_path: str
    candidate_sha256: str
    run: str  #: the run (model) the candidate came from.
    sample_id: int | None
    config_hash: str  #: :func:`config_hash` of the resolved :class:`EvalConfig`.
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


_JOB_COLUMNS = ("problem_path", "problem_sha256", "candidate_path", "candidate_sha256", "run",
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


# Claim ownership --------------------------------------------------------------------------------

def _start_time(pid: int) -> str | None:
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


def _current_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or ''}"


def _owner_alive(owner: str | None, claimed_at: float | None, stale_after_s: float | None) -> bool:
    """Whether the process that claimed a job may still be working on it."""
    if not owner:
        return False
    host, pid_s, start = owner.rsplit(":", 2)
    if host != socket.gethostname():
        if stale_after_s is None:
            return True
        return claimed_at is not None and time.time() - claimed_at < stale_after_s
    pid = int(pid_s)
    now_start = _start_time(pid)
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


# The store --------------------------------------------------------------------------------------

class Store:
    """SQLite store of one batch run. Safe to open from several processes (WAL, busy timeout);
    open one :class:`Store` per process (a connection must not cross a fork).

    Args:
        path: the database file (created with its parent folder when missing).
        stale_after_s: seconds after which a claim made on another host counts as abandoned;
            None (default) trusts other hosts' claims until :meth:`requeue_running` is called.
    """

    def __init__(self, path: Path | str, *, stale_after_s: float | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stale_after_s = stale_after_s
        self._owner_of: tuple[int, str] | None = None
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._transaction():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._db.execute(stmt)
            have = {r[1] for r in self._db.execute("PRAGMA table_info(verdicts)")}
            for col in SPEEDUP_COLUMNS.values():  # a store made before a baseline label existed
                if col not in have:
                    self._db.execute(f"ALTER TABLE verdicts ADD COLUMN {col} REAL")
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(STORE_SCHEMA),))
            elif int(row[0]) != STORE_SCHEMA:
                raise ValueError(f"{self.path}: store schema {row[0]}, this kbv reads {STORE_SCHEMA}")

    # plumbing
    @property
    def _owner(self) -> str:
        """``host:pid:start`` of the calling process (recomputed after a fork)."""
        if self._owner_of is None or self._owner_of[0] != os.getpid():
            self._owner_of = (os.getpid(), _current_owner())
        return self._owner_of[1]

    def _transaction(self):
        return _Tx(self._db)

    def close(self) -> None:
        """Close the connection (every write is already committed)."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # jobs
    def add_jobs(self, jobs: Iterable[Job]) -> int:
        """Register jobs; ones already present (any state) are left untouched. Returns how many were new."""
        now = time.time()
        added = 0
        with self._transaction():
            for job in jobs:
                cur = self._db.execute(
                    f"INSERT OR IGNORE INTO jobs (job_key, {', '.join(_JOB_COLUMNS)}, added_at) "
                    f"VALUES (?, {', '.join('?' for _ in _JOB_COLUMNS)}, ?)",
                    (job.key, *(getattr(job, c) for c in _JOB_COLUMNS), now),
                )
                added += cur.rowcount
        return added

    def _claimable(self, row: sqlite3.Row) -> bool:
        if row["state"] == "pending":
            return True
        return row["state"] == "running" and not _owner_alive(row["owner"], row["claimed_at"],
                                                               self.stale_after_s)

    def pending_jobs(self) -> list[Job]:
        """Jobs not done, in insertion order: never started, or left ``running`` by a dead process."""
        rows = self._db.execute("SELECT * FROM jobs WHERE state != 'done' ORDER BY rowid").fetchall()
        return [_job(r) for r in rows if self._claimable(r)]

    def mark_running(self, job: Job | str) -> None:
        """Record that this process started the job (state ``running``, attempts + 1).

        Raises:
            KeyError: the job was never added.
        """
        key = job if isinstance(job, str) else job.key
        with self._transaction():
            cur = self._db.execute(
                "UPDATE jobs SET state='running', attempts=attempts+1, owner=?, claimed_at=? "
                "WHERE job_key=? AND state != 'done'", (self._owner, time.time(), key))
            if cur.rowcount == 0 and self._db.execute(
                    "SELECT 1 FROM jobs WHERE job_key=?", (key,)).fetchone() is None:
                raise KeyError(f"no job {key}")

    def claim_pending(self, limit: int | None = None) -> list[Job]:
        """Atomically take up to ``limit`` claimable jobs (all when None) and mark them running."""
        with self._transaction():
            rows = self._db.execute("SELECT * FROM jobs WHERE state != 'done' ORDER BY rowid").fetchall()
            picked = [r for r in rows if self._claimable(r)][:limit]
            now = time.time()
            for r in picked:
                self._db.execute(
                    "UPDATE jobs SET state='running', attempts=attempts+1, owner=?, claimed_at=? "
                    "WHERE job_key=?", (self._owner, now, r["job_key"]))
        return [_job(r) for r in picked]

    def claim(self, job: Job | str) -> bool:
        """Atomically take one job if it is claimable (pending, or ``running`` under a dead owner)
        and mark it running. False when it is done or another live process holds it.

        Raises:
            KeyError: the job was never added.
        """
        key = job if isinstance(job, str) else job.key
        with self._transaction():
            row = self._db.execute("SELECT * FROM jobs WHERE job_key=?", (key,)).fetchone()
            if row is None:
                raise KeyError(f"no job {key}")
            if not self._claimable(row):
                return False
            self._db.execute(
                "UPDATE jobs SET state='running', attempts=attempts+1, owner=?, claimed_at=? "
                "WHERE job_key=?", (self._owner, time.time(), key))
        return True

    def unfinished_jobs(self) -> list[Job]:
        """Every job not ``done`` (pending, or running under any owner), in insertion order."""
        rows = self._db.execute("SELECT * FROM jobs WHERE state != 'done' ORDER BY rowid").fetchall()
        return [_job(r) for r in rows]

    def verdict_statuses(self, keys: Iterable[str] | None = None) -> dict[str, str]:
        """``{job_key: status}`` of stored verdicts (all when ``keys`` is None)."""
        rows = self._db.execute("SELECT job_key, status FROM verdicts").fetchall()
        wanted = None if keys is None else set(keys)
        return {k: st for k, st in rows if wanted is None or k in wanted}

    def get_meta(self, key: str) -> str | None:
        """A value of the store's ``meta`` table (e.g. ``config``), or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def jobs(self) -> list[Job]:
        """Every registered job, in insertion order."""
        return [_job(r) for r in self._db.execute("SELECT * FROM jobs ORDER BY rowid").fetchall()]

    def remove_jobs(self, keys: Iterable[str]) -> int:
        """Delete jobs and their verdicts (e.g. superseded by a changed file). Returns how many."""
        n = 0
        with self._transaction():
            for k in keys:
                self._db.execute("DELETE FROM verdicts WHERE job_key=?", (k,))
                n += self._db.execute("DELETE FROM jobs WHERE job_key=?", (k,)).rowcount
        return n

    def job_states(self, keys: Iterable[str] | None = None) -> dict[str, str]:
        """``{job_key: state}`` of the given jobs (all when None); unknown keys are left out."""
        rows = self._db.execute("SELECT job_key, state FROM jobs").fetchall()
        wanted = None if keys is None else set(keys)
        return {k: st for k, st in rows if wanted is None or k in wanted}

    def problems(self) -> list[ProblemRef]:
        """The problems of every registered job (one per problem file hash), from the jobs table."""
        rows = self._db.execute(
            "SELECT problem_path, problem_sha256, level, problem_id, problem_name FROM jobs "
            "GROUP BY problem_sha256 ORDER BY level, problem_id, problem_name").fetchall()
        return [ProblemRef(path=r["problem_path"], name=r["problem_name"] or Path(r["problem_path"]).stem,
                           level=r["level"], problem_id=r["problem_id"], sha256=r["problem_sha256"])
                for r in rows]

    def release(self, job: Job | str) -> None:
        """Put a running job back to pending (a graceful stop before its verdict)."""
        key = job if isinstance(job, str) else job.key
        with self._transaction():
            self._db.execute("UPDATE jobs SET state='pending', owner=NULL, claimed_at=NULL "
                             "WHERE job_key=? AND state='running'", (key,))

    def requeue_statuses(self, statuses: Iterable[str], keys: Iterable[str] | None = None) -> list[str]:
        """Put ``done`` jobs whose stored verdict has one of ``statuses`` back to pending (their
        verdict stays until a new one replaces it); only ``keys`` when given. ``kbv run`` retries
        ``EVAL_ERROR`` jobs this way: kbv's own failure is not the candidate's verdict. Returns the
        keys requeued."""
        wanted = None if keys is None else set(keys)
        statuses = list(statuses)
        marks = ", ".join("?" for _ in statuses)
        with self._transaction():
            rows = self._db.execute(
                f"SELECT j.job_key FROM jobs j JOIN verdicts v USING (job_key) "
                f"WHERE j.state='done' AND v.status IN ({marks}) ORDER BY j.rowid", statuses).fetchall()
            picked = [r[0] for r in rows if wanted is None or r[0] in wanted]
            for k in picked:
                self._db.execute("UPDATE jobs SET state='pending', owner=NULL, claimed_at=NULL WHERE job_key=?", (k,))
        return picked

    def requeue_running(self, *, only_dead: bool = True) -> int:
        """Reset ``running`` jobs to pending (all of them when ``only_dead`` is False). Returns the count."""
        with self._transaction():
            rows = self._db.execute("SELECT * FROM jobs WHERE state='running'").fetchall()
            keys = [r["job_key"] for r in rows if not only_dead or self._claimable(r)]
            for k in keys:
                self._db.execute("UPDATE jobs SET state='pending', owner=NULL, claimed_at=NULL "
                                 "WHERE job_key=?", (k,))
        return len(keys)

    def job(self, key: str) -> Job | None:
        """The job with this key, or None."""
        row = self._db.execute("SELECT * FROM jobs WHERE job_key=?", (key,)).fetchone()
        return _job(row) if row else None

    def attempts(self, job: Job | str) -> int:
        """How many times the job was started (0 if never)."""
        key = job if isinstance(job, str) else job.key
        row = self._db.execute("SELECT attempts FROM jobs WHERE job_key=?", (key,)).fetchone()
        if row is None:
            raise KeyError(f"no job {key}")
        return int(row[0])

    def progress(self) -> Progress:
        """Counts of jobs by state (``running`` counts claims by live and dead owners alike)."""
        counts = dict(self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        p, r, d = (int(counts.get(s, 0)) for s in ("pending", "running", "done"))
        return Progress(total=p + r + d, pending=p, running=r, done=d)

    # verdicts
    def put_verdict(self, job: Job | str, verdict: Verdict) -> None:
        """Store a finished job's verdict and mark the job done, in one transaction.

        A :class:`Job` not yet added is added first. Writing a job twice replaces the earlier
        verdict (one row per job key, never a duplicate).

        Raises:
            KeyError: ``job`` is a key string of a job never added.
        """
        key = job if isinstance(job, str) else job.key
        text = to_json(verdict, indent=None)
        p, c = verdict.problem, verdict.candidate
        with self._transaction():
            if isinstance(job, Job):
                self._db.execute(
                    f"INSERT OR IGNORE INTO jobs (job_key, {', '.join(_JOB_COLUMNS)}, added_at) "
                    f"VALUES (?, {', '.join('?' for _ in _JOB_COLUMNS)}, ?)",
                    (key, *(getattr(job, col) for col in _JOB_COLUMNS), time.time()))
            row = self._db.execute("SELECT run FROM jobs WHERE job_key=?", (key,)).fetchone()
            if row is None:
                raise KeyError(f"no job {key}")
            run = c.run if c.run is not None else row["run"]
            values = {
                "job_key": key, "status": verdict.status.value, "level": p.level,
                "problem_id": p.problem_id, "problem_name": p.name, "problem_sha256": p.sha256,
                "run": run, "sample_id": c.sample_id, "nominal_passed": int(verdict.nominal_passed),
                "hidden_passed": int(verdict.hidden_passed), "correct": int(verdict.correct),
                **{col: verdict.speedup.get(b) for b, col in SPEEDUP_COLUMNS.items()},
                "memory_efficiency": _finite_or_none(verdict.memory_efficiency),
                "verdict_json": text, "finished_at": time.time(),
            }
            self._db.execute(
                f"INSERT OR REPLACE INTO verdicts ({', '.join(values)}) "
                f"VALUES ({', '.join('?' for _ in values)})", tuple(values.values()))
            self._db.execute("UPDATE jobs SET state='done', owner=NULL WHERE job_key=?", (key,))

    def verdicts(self, run: str | None = None, level: int | None = None, *,
                 config_hash: str | None = None) -> Iterator[Verdict]:
        """Stored verdicts, ordered by level, problem id, problem name, run, sample id.

        Filters are ANDed; ``config_hash`` selects verdicts of one configuration.
        """
        sql = ("SELECT v.verdict_json FROM verdicts v JOIN jobs j USING (job_key) WHERE 1=1")
        args: list[object] = []
        if run is not None:
            sql += " AND v.run=?"
            args.append(run)
        if level is not None:
            sql += " AND v.level=?"
            args.append(level)
        if config_hash is not None:
            sql += " AND j.config_hash=?"
            args.append(config_hash)
        sql += " ORDER BY v.level, v.problem_id, v.problem_name, v.run, v.sample_id, v.job_key"
        for (text,) in self._db.execute(sql, args).fetchall():
            yield verdict_from_json(text)

    def verdict(self, job: Job | str) -> Verdict | None:
        """The stored verdict of one job, or None if it has none yet."""
        key = job if isinstance(job, str) else job.key
        row = self._db.execute("SELECT verdict_json FROM verdicts WHERE job_key=?", (key,)).fetchone()
        return verdict_from_json(row[0]) if row else None

    def runs(self) -> list[str]:
        """Names of the runs with at least one job, sorted."""
        return [r[0] for r in self._db.execute("SELECT DISTINCT run FROM jobs ORDER BY run")]

    def status_counts(self, run: str | None = None) -> dict[str, int]:
        """Verdict counts by status value (``{"PASS": 12, ...}``), optionally for one run."""
        sql, args = "SELECT status, COUNT(*) FROM verdicts", ()
        if run is not None:
            sql, args = sql + " WHERE run=?", (run,)
        return {s: int(n) for s, n in self._db.execute(sql + " GROUP BY status", args)}

    # vetting exclusions
    def exclude_problem(self, problem: ProblemRef | str, reason: str) -> None:
        """Leave a problem (a :class:`ProblemRef` or a :func:`problem_key`) out of aggregate metrics."""
        key = problem if isinstance(problem, str) else problem_key(problem)
        if not reason:
            raise ValueError("an exclusion needs a reason")
        with self._transaction():
            self._db.execute("INSERT OR IGNORE INTO exclusions VALUES (?, ?)", (key, reason))

    def include_problem(self, problem: ProblemRef | str) -> None:
        """Drop every exclusion of a problem."""
        key = problem if isinstance(problem, str) else problem_key(problem)
        with self._transaction():
            self._db.execute("DELETE FROM exclusions WHERE problem_key=?", (key,))

    def remove_exclusion(self, problem: ProblemRef | str, reason: str) -> None:
        """Drop one exclusion reason of a problem (others stay)."""
        key = problem if isinstance(problem, str) else problem_key(problem)
        with self._transaction():
            self._db.execute("DELETE FROM exclusions WHERE problem_key=? AND reason=?", (key, reason))

    def exclusions(self) -> dict[str, tuple[str, ...]]:
        """``{problem_key: (reason, ...)}`` of every excluded problem."""
        out: dict[str, list[str]] = {}
        for k, reason in self._db.execute("SELECT problem_key, reason FROM exclusions ORDER BY rowid"):
            out.setdefault(k, []).append(reason)
        return {k: tuple(v) for k, v in out.items()}

    # baseline cache
    def put_baseline(self, key: BaselineKey, measurement: Measurement) -> None:
        """Cache a baseline timing (replacing an earlier one with the same key)."""
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key.problem_sha256, key.device_name, key.driver, key.torch_version, key.precision,
                 key.label, to_json(measurement, indent=None), time.time()))

    def get_baseline(self, key: BaselineKey) -> Measurement | None:
        """The cached timing for exactly this key, or None."""
        row = self._baseline_row(key, "measurement_json")
        return measurement_from_json(row[0]) if row else None

    def baseline_measured_at(self, key: BaselineKey) -> float | None:
        """Unix time the cached baseline of ``key`` was stored, or None."""
        row = self._baseline_row(key, "measured_at")
        return float(row[0]) if row else None

    def _baseline_row(self, key: BaselineKey, column: str) -> tuple | None:
        """``column`` of the cached baseline row with exactly this key (a fixed column name)."""
        return self._db.execute(
            f"SELECT {column} FROM baselines WHERE problem_sha256=? AND device_name=? AND driver=? AND "
            "torch_version=? AND precision=? AND label=?",
            (key.problem_sha256, key.device_name, key.driver, key.torch_version, key.precision,
             key.label)).fetchone()

    def put_baseline_summary(self, key: BaselineKey, summary: BaselineSummary) -> None:
        """Store an imported baseline summary (replacing one with the same key)."""
        text = json.dumps(to_dict(summary), allow_nan=False)
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO baseline_summaries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key.problem_sha256, key.device_name, key.driver, key.torch_version, key.precision,
                 key.label, text, time.time()))

    def baseline_summaries(self) -> list[tuple[BaselineKey, BaselineSummary]]:
        """Every imported baseline summary, in import order."""
        rows = self._db.execute("SELECT * FROM baseline_summaries ORDER BY rowid").fetchall()
        out = []
        for r in rows:
            special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
            d = {k: special.get(v, v) if isinstance(v, str) else v
                 for k, v in json.loads(r["summary_json"]).items()}
            out.append((BaselineKey(r["problem_sha256"], r["device_name"], r["driver"], r["torch_version"],
                                    r["precision"], r["label"]), BaselineSummary(**d)))
        return out

    def baselines(self) -> list[tuple[BaselineKey, Measurement]]:
        """Every cached baseline."""
        rows = self._db.execute("SELECT * FROM baselines ORDER BY rowid").fetchall()
        return [(BaselineKey(r["problem_sha256"], r["device_name"], r["driver"], r["torch_version"],
                             r["precision"], r["label"]), measurement_from_json(r["measurement_json"]))
                for r in rows]


class _Tx:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error): takes the write lock up front so
    two processes never interleave a read-then-write."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


def _job(row: sqlite3.Row) -> Job:
    return Job(**{c: row[c] for c in _JOB_COLUMNS})


def _finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def measurement_from_json(text: str) -> Measurement:
    """Rebuild a :class:`Measurement` from :func:`kbv.model.records.to_json` output (derived stats dropped)."""
    d = dict(json.loads(text))
    d.pop("stats", None)
    d["times_ms"] = tuple(float(t) for t in d["times_ms"])
    names = set(Measurement.__dataclass_fields__)
    return Measurement(**{k: v for k, v in d.items() if k in names})


def open_store(path: Path | str, jobs: Sequence[Job] = (), **kwargs) -> Store:
    """Open (or create) a store and register ``jobs``; convenience for ``kbv run``."""
    store = Store(path, **kwargs)
    if jobs:
        store.add_jobs(jobs)
    return store


__all__ = ["Job", "BaselineKey", "BaselineSummary", "Progress", "Store", "problem_key", "config_hash",
           "measurement_from_json", "open_store", "SPEEDUP_COLUMNS"]
