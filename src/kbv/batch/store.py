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
  only, no raw samples; see :mod:`kbv.batch.baseline_cache`).

A job left ``running`` by a process that no longer exists is pending again: the owner of a claim is
recorded as host, pid and (on Linux) the process start time, so a recycled pid or a zombie does not
keep a claim alive. Claims from another host expire after ``stale_after_s`` when that is set.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Sequence

from kbv.batch.jobs import JOB_COLUMNS, Job, Progress, current_owner, owner_alive
from kbv.batch.results import SPEEDUP_COLUMNS, ResultTables
from kbv.model.records import ProblemRef

STORE_SCHEMA = 1


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


# Claim ownership --------------------------------------------------------------------------------


# The store --------------------------------------------------------------------------------------

class Store(ResultTables):
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
            self._owner_of = (os.getpid(), current_owner())
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
                    f"INSERT OR IGNORE INTO jobs (job_key, {', '.join(JOB_COLUMNS)}, added_at) "
                    f"VALUES (?, {', '.join('?' for _ in JOB_COLUMNS)}, ?)",
                    (job.key, *(getattr(job, c) for c in JOB_COLUMNS), now),
                )
                added += cur.rowcount
        return added

    def _claimable(self, row: sqlite3.Row) -> bool:
        if row["state"] == "pending":
            return True
        return row["state"] == "running" and not owner_alive(row["owner"], row["claimed_at"],
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
    return Job(**{c: row[c] for c in JOB_COLUMNS})


def open_store(path: Path | str, jobs: Sequence[Job] = (), **kwargs) -> Store:
    """Open (or create) a store and register ``jobs``; convenience for ``kbv run``."""
    store = Store(path, **kwargs)
    if jobs:
        store.add_jobs(jobs)
    return store


__all__ = ["Store", "open_store", "STORE_SCHEMA"]
