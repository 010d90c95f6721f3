"""The job queue of ``kbv serve``: bounded, fair across clients, idempotent, kept in SQLite.

Tables (``sqlite3`` stdlib, WAL journal, ``synchronous=FULL``: an accepted job is on disk before
its id is answered):

``jobs``
    one row per accepted verification: ``id`` (hex), ``key`` (the idempotency key: SHA-256 of the
    problem's hash, the candidate's hash, the resolved config and the backend asked for; unique),
    ``client`` (who submitted it: a token's fingerprint, never the token), the problem's content
    hash, the candidate source, the resolved config as JSON, ``state`` (``queued`` → ``running`` →
    ``done`` or ``error``), the verdict JSON or the error line, ``attempts`` (times a lane took it),
    ``finishes`` (times a result was stored: 1 for every finished job, whatever was killed on the
    way), the submit / start / finish wall times (s since the epoch) and ``done_seq`` (the order of
    finishing, which the event stream pages on).
``problems``
    uploaded problems (content hash, file stem, source text), so a restart registers them again.

A server killed with ``kill -9`` restarts with :meth:`JobQueue.recover`: jobs left ``running``
(their result was never stored) go back to ``queued``. A result is stored only by
:meth:`JobQueue.finish` on a ``running`` row (one ``UPDATE ... WHERE state='running'``), so a job
finishes exactly once however often it was started.

Fair share: :meth:`JobQueue.claim` takes the oldest queued job of the client that has the fewest
jobs running, ties going to the client served longest ago; each client may also hold at most
``per_client`` unfinished jobs (:class:`QueueFull`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, client TEXT NOT NULL, problem TEXT NOT NULL,
    candidate TEXT NOT NULL, config TEXT NOT NULL, backend TEXT, state TEXT NOT NULL, status TEXT,
    verdict TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0, finishes INTEGER NOT NULL DEFAULT 0,
    submitted REAL NOT NULL, started REAL, finished REAL, done_seq INTEGER);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, client, submitted);
CREATE INDEX IF NOT EXISTS jobs_done ON jobs (done_seq);
CREATE TABLE IF NOT EXISTS problems (sha256 TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL);
"""

#: states of a job; ``done`` holds a verdict, ``error`` a one-line reason (the problem broke).
STATES = ("queued", "running", "done", "error")


class QueueFull(RuntimeError):
    """The queue (or the client's share of it) holds as many unfinished jobs as it may.
    ``retry_after_s``: a hint for the 429's ``Retry-After``."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Job:
    """One row of ``jobs`` (module docstring has the fields)."""

    id: str
    key: str
    client: str
    problem: str
    candidate: str
    config: dict
    backend: str | None
    state: str
    status: str | None  #: the verdict's status once done
    verdict: str | None
    error: str | None
    attempts: int
    finishes: int
    submitted: float
    started: float | None
    finished: float | None
    done_seq: int | None


def job_key(problem_sha: str, candidate: str, config: dict, backend: str | None) -> str:
    """The idempotency key: SHA-256 (hex) over the problem's hash, the candidate source's SHA-256,
    the resolved config (canonical JSON) and the backend asked for."""
    cand = hashlib.sha256(candidate.encode("utf-8")).hexdigest()
    blob = json.dumps([problem_sha, cand, config, backend], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JobQueue:
    """The SQLite queue (module docstring). Thread-safe: one connection behind a lock.

    Args:
        path: the SQLite file (created if missing).
        capacity: unfinished (queued or running) jobs at most, over all clients (>= 1).
        per_client: unfinished jobs at most for one client (default ``capacity``).
    Raises:
        ValueError: a bound below 1.
        sqlite3.Error: the file is not a SQLite database or cannot be written.
    """

    def __init__(self, path: str | Path, *, capacity: int = 10000, per_client: int | None = None):
        if capacity < 1 or (per_client is not None and per_client < 1):
            raise ValueError("the queue's capacity and per-client share must be >= 1")
        self.path = Path(path)
        self.capacity = capacity
        self.per_client = per_client or capacity
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._served: dict[str, float] = {}  #: client -> when a lane last took one of its jobs

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # Submitting -----------------------------------------------------------------------------------

    def submit(self, client: str, problem_sha: str, candidate: str, config: dict, backend: str | None) -> tuple[str, bool]:
        """Accept one job: ``(id, created)``; ``created`` is False when the same problem, candidate,
        config and backend were accepted before (that job's id is returned, whoever sent it).

        Raises:
            QueueFull: the queue or the client's share is full (nothing is stored).
        """
        return self.submit_many(client, [(problem_sha, candidate, config, backend)])[0]

    def submit_many(self, client: str, items: list[tuple[str, str, dict, str | None]]) -> list[tuple[str, bool]]:
        """:meth:`submit` for several jobs in one transaction: all are accepted or none.

        Raises:
            QueueFull: the new jobs do not all fit (nothing is stored).
        """
        keys = [job_key(*item) for item in items]
        now = time.time()
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                out: list[tuple[str, bool]] = []
                new: dict[str, str] = {}
                for key in keys:
                    row = db.execute("SELECT id FROM jobs WHERE key = ?", (key,)).fetchone()
                    if row is not None:
                        out.append((row["id"], False))
                    elif key in new:  # the same job twice in one batch
                        out.append((new[key], False))
                    else:
                        new[key] = uuid.uuid4().hex
                        out.append((new[key], True))
                if new:
                    self._check_room(client, len(new))
                for key, item in zip(keys, items):
                    if key in new and not db.execute("SELECT 1 FROM jobs WHERE key = ?", (key,)).fetchone():
                        problem_sha, candidate, config, backend = item
                        db.execute("INSERT INTO jobs (id, key, client, problem, candidate, config, backend, state, "
                                   "submitted) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
                                   (new[key], key, client, problem_sha, candidate,
                                    json.dumps(config, sort_keys=True), backend, now))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return out

    def _check_room(self, client: str, n: int) -> None:
        total = self._db.execute("SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')").fetchone()[0]
        mine = self._db.execute("SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running') AND client = ?",
                                (client,)).fetchone()[0]
        retry = max(1, min(60, total // 10))  # a rough hint: the queue drains in its own time
        if total + n > self.capacity:
            raise QueueFull(f"the queue is full ({total} of {self.capacity} jobs unfinished); retry later", retry)
        if mine + n > self.per_client:
            raise QueueFull(f"this client holds {mine} unfinished jobs, its share is {self.per_client}; "
                            "retry later", retry)

    # Running --------------------------------------------------------------------------------------

    def recover(self) -> int:
        """After a restart: jobs left ``running`` (never finished) are ``queued`` again. Returns how many."""
        with self._lock:
            return self._db.execute("UPDATE jobs SET state = 'queued', started = NULL "
                                    "WHERE state = 'running'").rowcount

    def claim(self) -> Job | None:
        """Take the next job for a lane (fair share, module docstring) and mark it ``running``;
        None when nothing is queued."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                heads = db.execute(
                    "SELECT q.client AS client, MIN(q.submitted) AS first, "
                    "(SELECT COUNT(*) FROM jobs r WHERE r.state = 'running' AND r.client = q.client) AS running "
                    "FROM jobs q WHERE q.state = 'queued' GROUP BY q.client").fetchall()
                if not heads:
                    db.execute("COMMIT")
                    return None
                pick = min(heads, key=lambda h: (h["running"], self._served.get(h["client"], 0.0), h["first"]))
                row = db.execute("SELECT * FROM jobs WHERE state = 'queued' AND client = ? "
                                 "ORDER BY submitted, rowid LIMIT 1", (pick["client"],)).fetchone()
                now = time.time()
                db.execute("UPDATE jobs SET state = 'running', started = ?, attempts = attempts + 1 WHERE id = ?",
                           (now, row["id"]))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self._served[pick["client"]] = time.monotonic()
        return self.get(row["id"])

    def finish(self, job_id: str, *, verdict: str | None = None, status: str | None = None,
               error: str | None = None) -> bool:
        """Store a running job's result (a verdict JSON with its status, or an error line): True
        when stored, False when the job was not running (already finished, or never started)."""
        if (verdict is None) == (error is None) or (verdict is None) != (status is None):
            raise ValueError("finish takes a verdict and its status, or an error")
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                seq = db.execute("SELECT COALESCE(MAX(done_seq), 0) + 1 FROM jobs").fetchone()[0]
                n = db.execute("UPDATE jobs SET state = ?, status = ?, verdict = ?, error = ?, finished = ?, done_seq = ?, "
                               "finishes = finishes + 1 WHERE id = ? AND state = 'running'",
                               ("done" if verdict is not None else "error", status, verdict, error, time.time(), seq,
                                job_id)).rowcount
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return n == 1

    # Reading --------------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row is not None else None

    def finished_since(self, seq: int, client: str | None = None, limit: int = 100) -> list[Job]:
        """Finished jobs with ``done_seq`` > ``seq``, in finishing order (``client``: only its own)."""
        q = "SELECT * FROM jobs WHERE done_seq > ?" + (" AND client = ?" if client is not None else "")
        args: tuple[Any, ...] = (seq, client) if client is not None else (seq,)
        with self._lock:
            rows = self._db.execute(q + " ORDER BY done_seq LIMIT ?", (*args, limit)).fetchall()
        return [_job(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Jobs per state (every state of :data:`STATES`, 0 when none)."""
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        out = {s: 0 for s in STATES}
        out.update({r[0]: r[1] for r in rows})
        return out

    def statuses(self) -> dict[str, int]:
        """Finished jobs per verdict status."""
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM jobs WHERE status IS NOT NULL GROUP BY status")
            return {r[0]: r[1] for r in rows}

    # Uploaded problems ----------------------------------------------------------------------------

    def add_problem(self, sha256: str, name: str, source: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO problems (sha256, name, source) VALUES (?, ?, ?)",
                             (sha256, name, source))

    def problems(self) -> list[tuple[str, str, str]]:
        """Uploaded problems: ``(sha256, name, source)`` in upload order."""
        with self._lock:
            return [tuple(r) for r in self._db.execute("SELECT sha256, name, source FROM problems ORDER BY rowid")]


def _job(row: sqlite3.Row) -> Job:
    d = dict(row)
    d["config"] = json.loads(d["config"])
    return Job(**d)


__all__ = ["JobQueue", "Job", "QueueFull", "job_key", "STATES"]
