"""The ``audits`` table: LLM judges' labels of PASS verdicts, in the batch store's SQLite file.

Kept apart from :mod:`kbv.batch.store` (whose tables it only reads): this module opens the same file
with its own connection and creates its own table. A judgement never touches ``verdicts``: a
label is advice for a person, never a verdict.

``audits``: one row per (job, judge) — the judge's label (a :data:`kbv.generate.audit.LABELS`
value, or ``unparseable``), its rationale, the raw answer, the prompt hash and when it was made,
plus the verdict's identity (run, problem sha, candidate sha, sample) so a report can join on a
:class:`~kbv.model.records.Verdict` without the job key (:func:`verdict_key`).

For the report: :func:`audit_rows` returns one :class:`AuditRow` per audited job (labels by judge,
agreement, consensus, ``needs_review``); :func:`labels_by_verdict` maps :func:`verdict_key` to it.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from kbv.model.records import Verdict

#: the label of an answer without a rubric label (:func:`kbv.generate.audit.parse_judgement`).
UNPARSEABLE = "unparseable"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audits (
    job_key TEXT NOT NULL,
    judge TEXT NOT NULL,
    label TEXT NOT NULL,
    rationale TEXT NOT NULL,
    raw TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    run TEXT NOT NULL,
    problem_key TEXT NOT NULL,
    problem_sha256 TEXT NOT NULL,
    candidate_sha256 TEXT NOT NULL,
    sample_id INTEGER,
    speedup REAL,
    created_at REAL NOT NULL,
    PRIMARY KEY (job_key, judge)
)
"""


@dataclass(frozen=True)
class Judgement:
    job_key: str
    judge: str  #: ``provider:model``.
    label: str
    rationale: str
    raw: str
    prompt_hash: str
    run: str
    problem_key: str
    problem_sha256: str
    candidate_sha256: str
    sample_id: int | None
    speedup: float | None


@dataclass(frozen=True)
class AuditRow:
    """Every judge's label of one job and whether they agree."""

    job_key: str
    run: str
    problem_key: str
    sample_id: int | None
    candidate_sha256: str
    problem_sha256: str
    speedup: float | None
    labels: dict[str, str]  #: judge → label.
    rationales: dict[str, str]

    @property
    def agreed(self) -> bool:
        """All judges gave the same parseable label (and there are at least two)."""
        values = set(self.labels.values())
        return len(self.labels) >= 2 and len(values) == 1 and UNPARSEABLE not in values

    @property
    def consensus(self) -> str | None:
        """The shared label when :attr:`agreed`, else None."""
        return next(iter(self.labels.values())) if self.agreed else None

    @property
    def needs_review(self) -> bool:
        """Judges disagree, one could not be parsed, or a single judge: a person must look."""
        return not self.agreed

    @property
    def display(self) -> str:
        """Short text for a report column: the consensus, or ``review: a / b``."""
        return self.consensus or "review: " + " / ".join(self.labels[j] for j in sorted(self.labels))


def verdict_key(v: Verdict) -> tuple[str, str, str, int | None]:
    """(run, problem sha256, candidate sha256, sample id): how a report finds a verdict's audit."""
    return (v.candidate.run or "", v.problem.sha256, v.candidate.sha256, v.candidate.sample_id)


def connect(path: Path | str) -> sqlite3.Connection:
    """Open the store file (which must exist) and create the ``audits`` table if missing.

    Raises:
        FileNotFoundError: no store at ``path``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such store")
    db = sqlite3.connect(path, timeout=60.0, isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout=60000")
    db.execute(_SCHEMA)
    return db


def put_judgements(db: sqlite3.Connection, items: Iterable[Judgement]) -> None:
    """Insert or replace judgements (one transaction)."""
    rows = [(j.job_key, j.judge, j.label, j.rationale, j.raw, j.prompt_hash, j.run, j.problem_key,
             j.problem_sha256, j.candidate_sha256, j.sample_id, j.speedup, time.time()) for j in items]
    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany("INSERT OR REPLACE INTO audits VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def audit_rows(path: Path | str) -> list[AuditRow]:
    """One row per audited job, ordered by problem, run, sample. Empty when nothing was audited
    (also for a store without the table).

    Raises:
        FileNotFoundError: no store at ``path``.
    """
    db = connect(path)
    try:
        rows = db.execute("SELECT * FROM audits ORDER BY problem_key, run, sample_id, job_key, judge").fetchall()
    finally:
        db.close()
    out: dict[str, AuditRow] = {}
    for r in rows:
        row = out.get(r["job_key"])
        if row is None:
            row = out[r["job_key"]] = AuditRow(r["job_key"], r["run"], r["problem_key"], r["sample_id"],
                                               r["candidate_sha256"], r["problem_sha256"], r["speedup"], {}, {})
        row.labels[r["judge"]] = r["label"]
        row.rationales[r["judge"]] = r["rationale"]
    return list(out.values())


def labels_by_verdict(path: Path | str) -> dict[tuple[str, str, str, int | None], AuditRow]:
    """:func:`verdict_key` → its :class:`AuditRow`, for a report column and filter."""
    return {(r.run, r.problem_sha256, r.candidate_sha256, r.sample_id): r for r in audit_rows(path)}


@dataclass(frozen=True)
class Agreement:
    """Agreement of two judges over the jobs both labelled with a parseable label; jobs where
    either answer could not be parsed are counted apart (two unparseable answers are no
    agreement: they say nothing about the kernel)."""

    judges: tuple[str, str]
    jobs: int  #: jobs both judges labelled with a rubric label.
    agreed: int
    kappa: float | None  #: Cohen's kappa; None when undefined (no jobs, or chance agreement is 1).
    unparseable: int = 0  #: jobs both judges answered where at least one answer had no rubric label.

    @property
    def rate(self) -> float | None:
        return self.agreed / self.jobs if self.jobs else None


def agreement(rows: list[AuditRow], judges: tuple[str, str]) -> Agreement:
    """Raw agreement and Cohen's kappa, ``kappa = (p_o - p_e) / (1 - p_e)``, of two judges, over
    the jobs where both gave a rubric label (:attr:`Agreement.unparseable` counts the others)."""
    a, b = judges
    both = [(r.labels[a], r.labels[b]) for r in rows if a in r.labels and b in r.labels]
    pairs = [(x, y) for x, y in both if UNPARSEABLE not in (x, y)]
    n = len(pairs)
    agreed = sum(1 for x, y in pairs if x == y)
    if not n:
        return Agreement(judges, 0, 0, None, len(both))
    ca, cb = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    p_o = agreed / n
    p_e = sum(ca[k] * cb[k] for k in ca) / (n * n)
    kappa = None if p_e >= 1.0 else (p_o - p_e) / (1.0 - p_e)
    return Agreement(judges, n, agreed, kappa, len(both) - n)
