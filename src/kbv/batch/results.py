"""The result tables of a batch store: verdicts (written with their job's ``done`` state in one
transaction), problem exclusions, cached baseline timings and imported baseline summaries.
:class:`ResultTables` is a part of :class:`kbv.batch.store.Store` (it uses the store's connection
and transactions)."""

from __future__ import annotations

import json
import math
import time
from typing import Iterator

from kbv.batch.jobs import JOB_COLUMNS, BaselineKey, BaselineSummary, Job, problem_key
from kbv.model.records import Measurement, ProblemRef, Verdict, to_dict, to_json, verdict_from_json


#: Baseline labels that get their own indexed speedup column in ``verdicts``.
SPEEDUP_COLUMNS = {"eager-fp32": "speedup_eager_fp32", "eager-tf32": "speedup_eager_tf32",
                   "eager-fp32-cudnn-tf32": "speedup_eager_fp32_cudnn_tf32", "compile": "speedup_compile"}


class ResultTables:
    """Verdicts, exclusions and baselines of :class:`kbv.batch.store.Store`."""

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
                    f"INSERT OR IGNORE INTO jobs (job_key, {', '.join(JOB_COLUMNS)}, added_at) "
                    f"VALUES (?, {', '.join('?' for _ in JOB_COLUMNS)}, ?)",
                    (key, *(getattr(job, col) for col in JOB_COLUMNS), time.time()))
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


def _finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def measurement_from_json(text: str) -> Measurement:
    """Rebuild a :class:`Measurement` from :func:`kbv.model.records.to_json` output (derived stats dropped)."""
    d = dict(json.loads(text))
    d.pop("stats", None)
    d["times_ms"] = tuple(float(t) for t in d["times_ms"])
    names = set(Measurement.__dataclass_fields__)
    return Measurement(**{k: v for k, v in d.items() if k in names})
