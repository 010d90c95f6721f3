"""The batch store: JSON round trip, idempotent jobs, kill/resume semantics, exclusions, baselines."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kbv.model.records import Measurement, Status, to_dict, to_json, verdict_from_json
from kbv.batch.jobs import BaselineKey, Job, config_hash, problem_key
from kbv.batch.store import Store
from verdict_factory import CONFIG, job_for, make_batch, make_verdict, problem

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _other_process_marks_running(db: Path, key: str) -> None:
    """A separate process claims ``key`` and is then killed with SIGKILL (never reaped by itself)."""
    code = textwrap.dedent(f"""
        import os, signal
        from kbv.batch.store import Store
        Store({str(db)!r}).mark_running({key!r})
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC})
    assert proc.returncode == -signal.SIGKILL


def test_verdict_json_round_trip_with_non_finite_values(tmp_path):
    v = make_verdict("INCORRECT", hidden_fail=["D2"], unverified_speedup=2.5,
                     evidence={"max_err": math.nan, "ratio": math.inf, "low": -math.inf, "ok": [1.5, math.nan]})
    sets = list(v.input_sets)
    sets[3] = dataclasses.replace(sets[3], max_abs_error=math.inf)  # D1: an Inf error
    sets[4] = dataclasses.replace(sets[4], max_rel_error=math.nan)
    v = dataclasses.replace(v, input_sets=tuple(sets))
    text = to_json(v)
    json.loads(text)  # strict JSON: no bare NaN / Infinity tokens
    assert "NaN" in text and "Infinity" in text and "-Infinity" in text
    back = verdict_from_json(text)
    assert to_dict(back) == to_dict(v)
    assert math.isnan(back.evidence["max_err"]) and back.evidence["ratio"] == math.inf
    assert back.evidence["low"] == -math.inf and math.isnan(back.evidence["ok"][1])
    assert back.input_sets[3].max_abs_error == math.inf and math.isnan(back.input_sets[4].max_rel_error)
    assert back.unverified_speedup == v.unverified_speedup
    # the same through the store
    with Store(tmp_path / "s.db") as store:
        store.put_verdict(job_for(v), v)
        (stored,) = list(store.verdicts())
    assert to_dict(stored) == to_dict(v)


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_every_status_round_trips_through_the_store(tmp_path, status):
    kw = {"INCORRECT": dict(hidden_fail=["D4"]), "PASS": dict(speedup=1.3, memory_efficiency=0.8),
          "SHORTCUT": dict(speedup=9.0)}.get(status, {})
    v = make_verdict(status, **kw)
    with Store(tmp_path / "s.db") as store:
        store.put_verdict(job_for(v), v)
        assert to_dict(store.verdict(job_for(v))) == to_dict(v)


def test_add_jobs_is_idempotent_and_keys_ignore_paths(tmp_path):
    vs = make_batch(runs=("m",), levels={1: 3}, samples=2)
    jobs = [job_for(v) for v in vs]
    with Store(tmp_path / "s.db") as store:
        assert store.add_jobs(jobs) == 6
        assert store.add_jobs(jobs) == 0
        assert store.add_jobs(jobs[:2] + jobs) == 0
        assert store.progress().total == 6 and len(store.pending_jobs()) == 6
    moved = Job(**{**jobs[0].__dict__, "problem_path": "/elsewhere/x.py", "candidate_path": "/b.py"})
    assert moved.key == jobs[0].key
    other_cfg = Job.from_refs(vs[0].problem, vs[0].candidate, config_hash(CONFIG.__class__(device="cpu")))
    assert other_cfg.key != jobs[0].key


def test_killed_after_mark_running_the_job_is_pending_again(tmp_path):
    db = tmp_path / "s.db"
    vs = make_batch(runs=("m",), levels={1: 2}, samples=1)
    jobs = [job_for(v) for v in vs]
    with Store(db) as store:
        store.add_jobs(jobs)
    _other_process_marks_running(db, jobs[0].key)
    with Store(db) as store:
        assert store.progress().running == 1
        assert [j.key for j in store.pending_jobs()] == [j.key for j in jobs]
        assert store.attempts(jobs[0]) == 1
        claimed = store.claim_pending()
        assert [j.key for j in claimed] == [j.key for j in jobs]
        assert store.attempts(jobs[0]) == 2
        # claimed by this live process: not pending for anyone else
        assert store.pending_jobs() == []
        store.release(jobs[1])
        assert [j.key for j in store.pending_jobs()] == [jobs[1].key]


def test_finished_job_is_never_redone_nor_duplicated(tmp_path):
    vs = make_batch(runs=("m",), levels={1: 3}, samples=1)
    jobs = [job_for(v) for v in vs]
    with Store(tmp_path / "s.db") as store:
        store.add_jobs(jobs)
        store.mark_running(jobs[0])
        store.put_verdict(jobs[0], vs[0])
        assert jobs[0].key not in {j.key for j in store.pending_jobs()}
        store.add_jobs(jobs)  # re-adding does not reset a done job
        assert jobs[0].key not in {j.key for j in store.claim_pending()}
        store.put_verdict(jobs[0].key, vs[0])  # a second write replaces, never duplicates
        assert len(list(store.verdicts())) == 1
        n_rows = store._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
        assert n_rows == 1
        with pytest.raises(KeyError):
            store.put_verdict("no-such-key", vs[0])
        with pytest.raises(KeyError):
            store.mark_running("no-such-key")


def test_verdict_and_done_state_are_one_transaction(tmp_path, monkeypatch):
    """A failure inside put_verdict leaves neither the verdict row nor the done state."""
    v = make_verdict("PASS", speedup=1.1)
    job = job_for(v)
    with Store(tmp_path / "s.db") as store:
        store.add_jobs([job])
        store.mark_running(job)
        real = store._db

        class Failing:
            def execute(self, sql, *a):
                if sql.startswith("UPDATE jobs SET state='done'"):
                    raise sqlite3.OperationalError("disk I/O error (simulated)")
                return real.execute(sql, *a)

        store._db = Failing()
        with pytest.raises(sqlite3.OperationalError):
            store.put_verdict(job, v)
        store._db = real
        assert list(store.verdicts()) == []
        assert store.progress().running == 1


def test_verdict_filters_and_indexed_columns(tmp_path):
    vs = make_batch()
    with Store(tmp_path / "s.db") as store:
        for v in vs:
            store.put_verdict(job_for(v), v)
        assert len(list(store.verdicts())) == len(vs)
        a1 = list(store.verdicts(run="model-a", level=1))
        assert a1 and all(v.candidate.run == "model-a" and v.problem.level == 1 for v in a1)
        assert len(a1) == sum(v.candidate.run == "model-a" and v.problem.level == 1 for v in vs)
        assert len(list(store.verdicts(config_hash=config_hash(CONFIG)))) == len(vs)
        assert list(store.verdicts(config_hash="0" * 16)) == []
        assert store.runs() == ["model-a", "model-b", "model-c"]
        counts = store.status_counts()
        assert sum(counts.values()) == len(vs)
        assert counts["PASS"] == sum(v.status is Status.PASS for v in vs)
        row = store._db.execute(
            "SELECT speedup_eager_tf32, speedup_eager_fp32, correct FROM verdicts WHERE status='PASS' LIMIT 1"
        ).fetchone()
        assert row[1] == pytest.approx(4 * row[0]) and row[2] == 1


def test_exclusions_and_baseline_cache_persist(tmp_path):
    db = tmp_path / "s.db"
    p = problem(2, 23, "Conv3d_GroupNorm_Mean")
    assert problem_key(p) == "level2/23_Conv3d_GroupNorm_Mean"
    key = BaselineKey(p.sha256, "NVIDIA H200", "550.54.15", "2.5.1", "fp32", "eager-tf32")
    m = Measurement("eager-tf32", "cuda", (1.0, 1.1, 0.9), warmup=5, l2_flush_bytes=1 << 27)
    with Store(db) as store:
        store.exclude_problem(p, "constant output (zero) on every distribution")
        store.exclude_problem(p, "constant output (zero) on every distribution")
        store.exclude_problem("level1/99_X", "reference non-deterministic")
        with pytest.raises(ValueError):
            store.exclude_problem("level1/1_ReLU", "")
        store.put_baseline(key, m)
    with Store(db) as store:
        assert store.exclusions() == {"level2/23_Conv3d_GroupNorm_Mean": ("constant output (zero) on every distribution",),
                                      "level1/99_X": ("reference non-deterministic",)}
        store.include_problem("level1/99_X")
        assert list(store.exclusions()) == ["level2/23_Conv3d_GroupNorm_Mean"]
        assert store.get_baseline(key) == m
        assert store.get_baseline(BaselineKey(p.sha256, "NVIDIA H200", "550.54.15", "2.5.1", "bf16",
                                              "eager-tf32")) is None
        store.put_baseline(key, Measurement("eager-tf32", "cuda", (2.0,), warmup=1))
        assert store.get_baseline(key).times_ms == (2.0,) and len(store.baselines()) == 1
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_WORKER = """
import json, sys, time
from kbv.model.records import verdict_from_dict
from kbv.batch.store import Store
store = Store(sys.argv[1])
expected = json.loads(open(sys.argv[2]).read())
while True:
    jobs = store.claim_pending(1)
    if not jobs:
        break
    time.sleep(0.01)  # the "evaluation"
    store.put_verdict(jobs[0], verdict_from_dict(expected[jobs[0].key]))
"""


def test_sigkill_mid_batch_loses_nothing_and_duplicates_nothing(tmp_path):
    """A real worker process is SIGKILLed at random moments until the batch completes."""
    db = tmp_path / "batch.db"
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    vs = make_batch(runs=("a", "b"), levels={1: 5, 2: 3}, samples=1)  # 16 jobs
    jobs = [job_for(v) for v in vs]
    expected = {j.key: to_dict(v) for j, v in zip(jobs, vs)}
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    with Store(db) as store:
        store.add_jobs(jobs)
    rng = random.Random(7)
    finished: dict[str, float] = {}
    kills = 0
    env = {**os.environ, "PYTHONPATH": SRC}
    for _ in range(40):
        with Store(db) as store:
            if store.progress().done == len(jobs):
                break
            before = store.progress().done
        proc = subprocess.Popen([sys.executable, str(script), str(db), str(tmp_path / "expected.json")], env=env)
        target = before + rng.randint(1, 5)
        deadline = time.monotonic() + 30
        with Store(db) as watch:
            while proc.poll() is None and watch.progress().done < target and time.monotonic() < deadline:
                time.sleep(0.002)
        time.sleep(rng.random() * 0.015)  # land anywhere: mid-claim, mid-sleep, mid-commit
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        with Store(db) as store:
            rows = store._db.execute("SELECT job_key, finished_at FROM verdicts").fetchall()
        now = {k: t for k, t in rows}
        for k, t in finished.items():  # a finished job is never redone
            assert now[k] == t
        finished = now
    assert kills >= 2
    with Store(db) as store:
        p = store.progress()
        assert (p.done, p.pending, p.running) == (len(jobs), 0, 0)
        assert store.pending_jobs() == []
        n_rows = store._db.execute("SELECT COUNT(*), COUNT(DISTINCT job_key) FROM verdicts").fetchone()
        assert tuple(n_rows) == (len(jobs), len(jobs))
        for j in jobs:
            assert to_dict(store.verdict(j)) == expected[j.key]
            assert store.attempts(j) >= 1
        # resuming runs nothing more
        assert store.claim_pending() == []


def test_a_store_without_a_newer_speedup_column_gains_it(tmp_path):
    """A store written before the ``eager-fp32-cudnn-tf32`` label existed opens, and stores that speedup."""
    db = tmp_path / "old.db"
    with Store(db):
        pass
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE verdicts DROP COLUMN speedup_eager_fp32_cudnn_tf32")
    con.commit()
    con.close()
    v = make_verdict("PASS", speedup={"eager-fp32": 3.0, "eager-tf32": 1.0, "eager-fp32-cudnn-tf32": 2.5})
    with Store(db) as store:
        store.put_verdict(job_for(v), v)
        (row,) = store._db.execute("SELECT speedup_eager_fp32, speedup_eager_fp32_cudnn_tf32 FROM verdicts")
        assert tuple(row) == (3.0, 2.5)


def test_baseline_labels_name_their_flags_and_kernelbench_files():
    """KernelBench's ``baseline_time_torch.json`` ran under PyTorch's default flags (cuDNN TF32 on):
    it is the eager-fp32-cudnn-tf32 baseline's file, never kbv's strict eager-fp32."""
    from kbv.sandbox import numeric_flags as bl
    from kbv.batch.baseline_cache import KERNELBENCH_FILES, LABELS

    paper = bl.flags_for("eager-fp32-cudnn-tf32")
    strict = bl.flags_for("eager-fp32")
    assert (paper["cuda.matmul.allow_tf32"], paper["cudnn.allow_tf32"], paper["float32_matmul_precision"]) == \
        (False, True, "highest")
    assert (strict["cuda.matmul.allow_tf32"], strict["cudnn.allow_tf32"]) == (False, False)
    assert {k for k in paper if paper[k] != strict[k]} == {"cudnn.allow_tf32"}
    assert KERNELBENCH_FILES["eager-fp32-cudnn-tf32"] == "baseline_time_torch.json"
    assert KERNELBENCH_FILES["eager-fp32"] != "baseline_time_torch.json"
    assert set(KERNELBENCH_FILES) == set(LABELS) and len(set(KERNELBENCH_FILES.values())) == len(LABELS)
    described = bl.baseline_flags(["eager-fp32-cudnn-tf32", "compile"])
    assert described["eager-fp32-cudnn-tf32"]["flags"]["cudnn.allow_tf32"] is True
    assert "KernelBench" in described["eager-fp32-cudnn-tf32"]["description"] and "flags" not in described["compile"]


class _StubEvaluator:
    """Answers ``evaluate`` from a queue of verdicts per candidate path (no worker is spawned)."""

    def __init__(self, answers):
        self.answers = {k: list(v) for k, v in answers.items()}
        self.calls = []

    def evaluate(self, problem, candidate, config, hidden_tests=None):
        self.calls.append(candidate.path)
        return self.answers[candidate.path].pop(0)

    def close(self):
        pass


def test_eval_error_is_stored_the_batch_goes_on_and_a_rerun_retries_it(tmp_path):
    from kbv.batch.runner import BatchPlan, PlannedJob, run_batch

    oom = make_verdict("EVAL_ERROR", problem_id=1)
    ok = make_verdict("PASS", problem_id=2, speedup=1.5)
    later = make_verdict("PASS", problem_id=1, speedup=2.0)
    plan = BatchPlan(config=CONFIG, problems=(oom.problem, ok.problem),
                     jobs=tuple(PlannedJob(job_for(v), v.problem, v.candidate) for v in (oom, ok)),
                     broken_files=(), orphans=(), ignored=())
    ev = _StubEvaluator({oom.candidate.path: [oom, later], ok.candidate.path: [ok]})
    with Store(tmp_path / "s.db") as store:
        first = run_batch(plan, store, evaluator=ev)
        assert first.eval_errors == [(oom.candidate.path, oom.message)] and not first.internal_errors
        assert first.statuses == {"EVAL_ERROR": 1, "PASS": 1} and first.finished == 2
        assert store.verdict(job_for(oom)).status is Status.EVAL_ERROR
        # the timed verdict names the flags of each of its baselines
        named = store.verdict(job_for(ok)).evidence["baselines"]
        assert named["eager-fp32"]["flags"]["cudnn.allow_tf32"] is False and "eager-tf32" in named
        second = run_batch(plan, store, evaluator=ev)
        assert ev.calls == [oom.candidate.path, ok.candidate.path, oom.candidate.path]
        assert (second.retried_eval_errors, second.already_done, second.finished) == (1, 1, 1)
        assert second.statuses == {"PASS": 2} and store.verdict(job_for(oom)).status is Status.PASS
        third = run_batch(plan, store, evaluator=ev)
        assert (third.retried_eval_errors, third.finished, len(ev.calls)) == (0, 0, 3)
        assert len(list(store.verdicts())) == 2


def test_policy_is_part_of_the_config_hash_and_one_store_holds_one_policy(tmp_path):
    """``kbv run --policy kbv-compat`` gives other job keys, and a store made under kbv refuses it."""
    from kbv.batch.runner import ConfigMismatch, check_config

    compat = dataclasses.replace(CONFIG, policy="kbv-compat", distributions=())
    paper = dataclasses.replace(CONFIG, baselines=(*CONFIG.baselines, "eager-fp32-cudnn-tf32"))
    assert len({config_hash(CONFIG), config_hash(compat), config_hash(paper)}) == 3
    v = make_verdict("PASS", speedup=1.0)
    assert Job.from_refs(v.problem, v.candidate, CONFIG).key != Job.from_refs(v.problem, v.candidate, compat).key
    with Store(tmp_path / "s.db") as store:
        check_config(store, CONFIG)
        with pytest.raises(ConfigMismatch, match="policy 'kbv' -> 'kbv-compat'"):
            check_config(store, compat)
    with Store(tmp_path / "c.db") as store:
        check_config(store, compat)
        check_config(store, compat)


def test_a_store_of_an_older_kbv_resumes_where_the_new_config_fields_are_at_their_defaults(tmp_path):
    """A store whose recorded config lacks fields added since (``ncu_profile``, ``sanitize``,
    ``user_set``) resumes when this run leaves them at their defaults, and refuses one that sets
    them (a newcomer's store of an earlier session was refused with the same options)."""
    import json

    from kbv.batch.runner import ConfigMismatch, check_config
    from kbv.model.records import to_dict

    old = {k: v for k, v in to_dict(CONFIG).items() if k not in ("ncu_profile", "sanitize", "user_set")}
    with Store(tmp_path / "s.db") as store:
        store.set_meta("config", json.dumps(old, sort_keys=True))
        check_config(store, CONFIG)  # resumes
        assert json.loads(store.get_meta("config")) == old  # left as the older kbv wrote it
        check_config(store, CONFIG)
    with Store(tmp_path / "t.db") as store:
        store.set_meta("config", json.dumps(old, sort_keys=True))
        with pytest.raises(ConfigMismatch, match="ncu_profile"):
            check_config(store, dataclasses.replace(CONFIG, ncu_profile=True))
