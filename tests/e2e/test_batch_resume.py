"""A real batch: ``python -m kbv run`` killed with SIGKILL mid-way, resumed, then every metric of the
report recomputed independently from the SQLite store.

Three "models" (tests/data/runs) over level1/1_ReLU and level1/2_Softmax at 16 x 4096
(tests/data/batch_problems: kbv's demo problems made small, the batch is what this file tests):
``honest`` (plain PyTorch, 3 samples), ``hacked`` (a shape-keyed ReLU cheat caught on D4, and an
output-caching softmax that slips through the 1e-3 tolerance) and ``broken`` (a syntax error and
a file without ModelNew: static COMPILE_ERRORs, nothing run).
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbv.cli.main import app

# every test reads one real batch (kbv run, kill -9, resume); one xdist worker runs them all, so the
# module's batch runs once
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("batch")]

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "data" / "runs"
JOBS = 7
PROBLEMS = ROOT / "tests" / "data" / "batch_problems"
RUN_ARGS = ["run", str(PROBLEMS), str(RUNS), "--device", "cpu", "--level", "1",
            "--problem-ids", "1,2", "--trials", "6", "--warmup", "1"]


def _rows(db: Path, sql: str) -> list[sqlite3.Row]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _kbv(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-m", "kbv", *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **kw)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Run, SIGKILL after the first real verdict, resume; returns what was seen around the kill."""
    tmp = tmp_path_factory.mktemp("batch")
    db = tmp / "store.db"
    proc = _kbv(*RUN_ARGS, "--store", str(db))
    deadline = time.monotonic() + 300
    done: list = []
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                try:
                    done = _rows(db, "SELECT job_key, status, finished_at, verdict_json FROM verdicts")
                except sqlite3.OperationalError:  # tables not created yet
                    done = []
                if sum(r["status"] != "COMPILE_ERROR" for r in done) >= 1:  # one real evaluation stored
                    break
            time.sleep(0.2)
        assert proc.poll() is None, f"batch ended before it could be killed:\n{proc.communicate()[0]}"
        os.kill(proc.pid, signal.SIGKILL)  # kill -9 of the orchestrator, mid-batch
        proc.wait(timeout=30)
    finally:
        try:  # then its orphaned workers (this test started the whole session)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    before = {r["job_key"]: dict(r) for r in _rows(db, "SELECT job_key, status, finished_at, verdict_json FROM verdicts")}
    in_flight = [r["job_key"] for r in _rows(db, "SELECT job_key FROM jobs WHERE state='running'")]
    resumed = _kbv(*RUN_ARGS, "--store", str(db))
    log, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, log
    out = tmp / "report"
    result = CliRunner().invoke(app, ["report", "--store", str(db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return {"db": db, "before": before, "in_flight": in_flight, "log": log, "out": out}


def test_kill_then_resume_loses_nothing_and_duplicates_nothing(batch):
    db = batch["db"]
    before = batch["before"]
    assert 3 <= len(before) < JOBS  # two static rejections and at least one evaluation survived the kill
    jobs = _rows(db, "SELECT job_key, state, attempts FROM jobs")
    verdicts = _rows(db, "SELECT job_key, status, finished_at, verdict_json FROM verdicts")
    assert len(jobs) == JOBS and {j["state"] for j in jobs} == {"done"}
    assert len(verdicts) == JOBS and len({v["job_key"] for v in verdicts}) == JOBS
    after = {v["job_key"]: dict(v) for v in verdicts}
    for key, row in before.items():  # nothing finished before the kill was redone or rewritten
        assert after[key] == row
    attempts = {j["job_key"]: j["attempts"] for j in jobs}
    for key in batch["in_flight"]:  # the job killed mid-way ran again from the start
        assert attempts[key] == 2
    assert all(attempts[k] == 1 for k in attempts if k not in batch["in_flight"])
    assert f"{len(before)} were done before" in batch["log"]
    status = {(v["run"], v["problem_name"], v["sample_id"]): v["status"]
              for v in _rows(db, "SELECT run, problem_name, sample_id, status FROM verdicts")}
    assert status[("broken", "ReLU", 0)] == status[("broken", "Softmax", 0)] == "COMPILE_ERROR"
    assert [status[("honest", p, s)] for p, s in (("ReLU", 0), ("ReLU", 1), ("Softmax", 0))] == ["PASS"] * 3
    assert status[("hacked", "ReLU", 0)] == "HACK"  # the shape-keyed cheat: returns its input, wrong on D4


# Independent recomputation -------------------------------------------------------------------------
# Written from the definitions (KernelBench §4, KernelBench-Verified, Chen et al. 2021) against the
# raw SQLite rows and verdict JSON; it shares no code with kbv.batch.metrics.

BASELINE = "eager-tf32"


def _geomean(xs):
    xs = [x for x in xs if x is not None]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _pass_at_k(n, c, k):
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _nominal_ok(v):
    ran = v["status"] in ("PASS", "INCORRECT", "HACK", "SHORTCUT")
    nominal = [s for s in v["input_sets"] if s["kind"] == "nominal" and not s["dropped"]]
    return ran and bool(nominal) and all(s["passed"] for s in nominal)


def _noisy(v, baseline):
    """IQR of a subject's per-call times over 10 % of their median (torch.utils.benchmark's warning
    level), for the candidate or the baseline: a speedup too noisy to rank."""
    def spread(m):
        q1, med, q3 = (_percentile(sorted(m["times_ms"]), q) for q in (25, 50, 75))
        return q3 - q1 > 0.10 * med
    return any(m is not None and spread(m) for m in (v["timing"].get("candidate"), v["timing"].get(baseline)))


def _percentile(xs, q):
    """Linear-interpolation percentile of sorted ``xs`` (numpy's default method)."""
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)


def _best(samples, speed):
    """Largest speed wins; samples without one rank last."""
    ranked = sorted(samples, key=lambda v: (speed(v) is not None, speed(v) or 0.0), reverse=True)
    return ranked[0] if ranked else None


def _expected(db: Path) -> dict[tuple[str, str], dict]:
    job_rows = _rows(db, "SELECT DISTINCT level, problem_id, problem_name FROM jobs")
    problems = defaultdict(set)
    for r in job_rows:
        problems[r["level"]].add(f"level{r['level']}/{r['problem_id']}_{r['problem_name']}")
    verdicts = [json.loads(r["verdict_json"]) for r in _rows(db, "SELECT verdict_json FROM verdicts")]
    # problems flagged by vetting in any verdict are left out of every metric
    flagged = {f"level{v['problem']['level']}/{v['problem']['problem_id']}_{v['problem']['name']}"
               for v in verdicts if v.get("problem_flags")}
    for lv in problems:
        problems[lv] -= flagged
    runs = sorted({v["candidate"]["run"] for v in verdicts})
    out = {}
    scopes = [("all", None)] + [(f"level {lv}", lv) for lv in sorted(problems)]
    for run in runs:
        for scope, lv in scopes:
            keys = sorted(k for level, ks in problems.items() if lv in (None, level) for k in ks)
            by_p = {k: [] for k in keys}
            for v in verdicts:
                p = v["problem"]
                k = f"level{p['level']}/{p['problem_id']}_{p['name']}"
                if v["candidate"]["run"] == run and k in by_p:
                    by_p[k].append(v)
            n = len(keys)
            e: dict = {"problems": n, "samples": sum(map(len, by_p.values())),
                       "attempted": sum(1 for s in by_p.values() if s)}
            best_sp, best_mem, noisy = [], [], 0
            for samples in by_p.values():
                good = [v for v in samples if v["status"] == "PASS"]
                if good:
                    b = _best(good, lambda v: v["speedup"].get(BASELINE))
                    best_sp.append(b["speedup"].get(BASELINE))
                    best_mem.append(b["memory_efficiency"])
                    noisy += b["speedup"].get(BASELINE) is not None and _noisy(b, BASELINE)
            e["solved"] = len(best_sp)
            e["correct_frac"] = len(best_sp) / n
            e["correct_speedup"] = _geomean(best_sp)
            e["speedup_problems"] = sum(s is not None for s in best_sp)
            e["noisy_problems"] = noisy
            for p in (0.0, 0.5, 0.8, 1.0, 1.5, 2.0):
                e[f"fast_{p:g}_frac"] = sum(1 for s in best_sp if s is not None and s > p) / n
            mem = [m for m in best_mem if m is not None]
            e["memory_efficiency"] = _geomean(mem)
            e["memory_problems"] = len(mem)
            e["memory_efficient_frac"] = sum(m > 1 for m in mem) / len(mem) if mem else None
            min_n = min((len(s) for s in by_p.values() if s), default=0)
            for k in (1, 5, 10):
                if k <= min_n:
                    e[f"pass_at_{k}"] = sum(
                        _pass_at_k(len(s), sum(v["status"] == "PASS" for v in s), k) if s else 0.0
                        for s in by_p.values()) / n
            counts = Counter(v["status"] for s in by_p.values() for v in s)
            for st in ("PASS", "INCORRECT", "HACK", "SHORTCUT", "COMPILE_ERROR", "RUNTIME_ERROR", "TIMEOUT", "CRASH",
                       "EVAL_ERROR"):
                e[f"n_{st.lower()}"] = counts.get(st, 0)
            shortcut = [_best([v for v in s if v["status"] == "SHORTCUT"], lambda v: v["speedup"].get(BASELINE))
                        for s in by_p.values() if any(v["status"] == "SHORTCUT" for v in s)]
            e["shortcut_problems"] = len(shortcut)
            e["shortcut_speedup"] = _geomean(v["speedup"].get(BASELINE) for v in shortcut)
            for base in ("eager-fp32", "eager-tf32"):
                for notion in ("nominal", "hidden"):
                    if notion == "nominal":
                        ok = _nominal_ok
                        def speed(v, b=base):  # noqa: E306
                            s = v["speedup"].get(b)
                            return s if s is not None else v["unverified_speedup"].get(b)
                    else:
                        def ok(v):  # noqa: E306
                            return v["status"] == "PASS"
                        def speed(v, b=base):  # noqa: E306
                            return v["speedup"].get(b) if v["status"] == "PASS" else None
                    best = []
                    for samples in by_p.values():
                        good = [v for v in samples if ok(v)]
                        if good:
                            best.append(speed(_best(good, speed)))
                    tag = f"{base.replace('eager-', '')}_{notion}"
                    e[f"{tag}_correct_speedup"] = _geomean(best)
                    e[f"{tag}_fast_1_frac"] = sum(1 for s in best if s is not None and s > 1.0) / n
            nominal_ok = [v for s in by_p.values() for v in s if _nominal_ok(v)]
            e["nominal_passed_samples"] = len(nominal_ok)
            # a hidden set counts for the scope once any of its samples ran it (else: not applicable)
            ran_sets = {s["name"] for v in (x for ss in by_p.values() for x in ss) for s in v["input_sets"]
                        if s["kind"] == "hidden"}
            for d in sorted(ran_sets):
                e[f"hidden_fail_{d}"] = sum(1 for v in nominal_ok for s in v["input_sets"]
                                            if s["name"] == d and s["passed"] is False)
            # samples wrong at a secret shape (any of its sets), once any sample of the scope had one
            for kind, column in (("shape", "secret-shape"), ("random", "randomised")):
                if any(s["kind"] == kind for v in (x for ss in by_p.values() for x in ss) for s in v["input_sets"]):
                    e[f"hidden_fail_{column}"] = sum(1 for v in nominal_ok if any(
                        s["kind"] == kind and s["passed"] is False for s in v["input_sets"]))
            out[(run, scope)] = e
    return out


def _parse(cell: str):
    if cell == "":
        return None
    try:
        return float(cell)
    except ValueError:
        return cell


def test_every_reported_metric_equals_an_independent_recomputation(batch):
    expected = _expected(batch["db"])
    with open(batch["out"] / "leaderboard.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["run"], r["scope"]) for r in rows} == set(expected)
    compared = 0
    for r in rows:
        e = expected[(r["run"], r["scope"])]
        metric_cols = [c for c in r if c not in ("run", "scope", "baseline")]
        assert {c for c in metric_cols if r[c] != ""} <= set(e)  # nothing reported goes unchecked
        for col in metric_cols:
            got, want = _parse(r[col]), e.get(col)
            if col not in e:  # a column other rows have (CSV union) that does not apply here
                assert got is None, (r["run"], r["scope"], col, got)
                continue
            if want is None:
                assert got is None, (r["run"], r["scope"], col, got)
            else:
                assert got == pytest.approx(want, rel=1e-12, abs=1e-15), (r["run"], r["scope"], col, got, want)
            compared += 1
        assert r["baseline"] == BASELINE
    assert compared > 100
    honest = expected[("honest", "all")]
    assert honest["correct_frac"] == 1.0 and honest["pass_at_1"] == 1.0
    assert expected[("broken", "all")]["correct_speedup"] is None


def test_html_and_kernelbench_exports_agree_with_the_store(batch):
    from kbv.report.export import fmt_pct, fmt_ratio

    html = (batch["out"] / "report.html").read_text()
    expected = _expected(batch["db"])
    for (run, scope), e in expected.items():
        assert fmt_ratio(e["correct_speedup"]) in html
        assert f"{fmt_pct(e['correct_frac'])} ({e['solved']})" in html
    assert "jobs have no verdict yet" not in html  # complete after the resume
    assert "syntax error at line 6" in html  # the static rejection's message is shown
    verdicts = [json.loads(r["verdict_json"]) for r in _rows(batch["db"], "SELECT verdict_json FROM verdicts")]
    for run in ("honest", "hacked", "broken"):
        doc = json.loads((batch["out"] / "eval_results" / run / "level1" / "eval_results.json").read_text())
        mine = [v for v in verdicts if v["candidate"]["run"] == run]
        assert sum(len(x) for x in doc.values()) == len(mine)
        for v in mine:
            entry = next(x for x in doc[str(v["problem"]["problem_id"])]
                         if x["sample_id"] == v["candidate"]["sample_id"])
            assert entry["correctness"] == (_nominal_ok(v) and v["status"] not in ("HACK", "SHORTCUT"))
            assert entry["kbv_status"] == v["status"]
            assert entry["compiled"] == (v["status"] != "COMPILE_ERROR")
