"""Report outputs: files exist, the HTML is self-contained and escapes hostile candidate text."""

from __future__ import annotations

import csv
import json
import re

import markupsafe
import pytest

from kbv.metrics import compute_metrics
from kbv.report import load_metrics, write_all, write_samples_csv, write_csv, write_eval_results_json, write_html, write_markdown
from kbv.store import Store, problem_key
from verdict_factory import job_for, make_batch, make_verdict, problem

HOSTILE = ('</td></tr></table><script>alert("pwned")</script><img src=x onerror=alert(1)>'
           '{{ 7*7 }} <a href="javascript:alert(2)">x</a> <style>body{display:none}</style>')


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = Store(tmp_path_factory.mktemp("report") / "batch.db")
    vs = make_batch(seed=1)
    vs.append(make_verdict("RUNTIME_ERROR", run="model-a", level=1, problem_id=1, sample_id=9, message=HOSTILE,
                           evidence={"stderr": HOSTILE, "worker": "<iframe srcdoc='x'>"}))
    vs.append(make_verdict("HACK", run="model-b", level=2, problem_id=1, sample_id=9, message="ok " + HOSTILE,
                           unverified_speedup=50.0))
    for v in vs:
        s.put_verdict(job_for(v), v)
    s.exclude_problem(problem(2, 4), "constant output (zero) <b>degenerate</b>")
    yield s
    s.close()


@pytest.fixture(scope="module")
def page(store, tmp_path_factory):
    """The report rendered once (plots take most of the time) and shared by the HTML tests."""
    return write_html(store, tmp_path_factory.mktemp("html") / "r" / "report.html",
                      title="Leaderboard <test>").read_text()


def test_html_has_every_section_and_plots(store, page):
    text = page
    for section in ("leaderboard", "decomposition", "failures", "scatter", "cdf", "excluded", "problems"):
        assert f'<section id="{section}">' in text
    assert "<title>Leaderboard &lt;test&gt;</title>" in text
    imgs = re.findall(r'<img class="plot" alt="([^"]+)" src="data:image/png;base64,', text)
    assert "decomposition bars" in imgs and "speedup CDF" in imgs and "failures per distribution" in imgs
    assert sum(a.startswith("memory-speedup scatter") for a in imgs) == 3  # one per level
    # one section per problem (excluded ones still shown, marked)
    keys = {problem_key(v.problem) for v in store.verdicts()}
    for k in keys:
        assert f"<h3>{k}</h3>" in text
    assert "<b>excluded</b>: constant output (zero) &lt;b&gt;degenerate&lt;/b&gt;" in text
    assert 'class="sortable"' in text and "addEventListener" in text
    # leaderboard rows: 3 runs × (all + 3 levels)
    body = text.split('<table class="sortable" id="leaderboard-table">')[1].split("</table>")[0]
    assert body.count("<tr") == 1 + 12


def test_html_is_self_contained(page):
    text = page
    lowered = text.lower()
    for needle in ("http://", "https://", "//cdn", "<link", "@import", "url("):
        assert needle not in lowered, needle
    assert not re.search(r"<script[^>]*\bsrc=", lowered)
    assert not re.search(r'\ssrc="(?!data:image/png;base64,)', text)  # every src is an inline PNG
    assert "default-src 'none'" in text  # the CSP forbids fetches even if something slipped in


def test_hostile_candidate_text_is_escaped(page):
    text = page
    assert "<script>alert" not in text and "<img src=x" not in text and "<iframe" not in text
    assert "<style>body{display:none}" not in text and 'href="javascript:' not in text
    assert str(markupsafe.escape(HOSTILE)) in text  # shown, as text
    assert "{{ 7*7 }}" in text and "49" not in text.split("{{ 7*7 }}")[0][-5:]  # never evaluated
    assert text.count("<script>") == 1  # the sort script only


def test_csv_markdown_and_samples(store, tmp_path):
    bm = load_metrics(store)
    rows = list(csv.DictReader(write_csv(store, tmp_path / "lb.csv").open()))
    assert len(rows) == len(bm.rows()) == 12
    a_all = next(r for r in rows if r["run"] == "model-a" and r["scope"] == "all")
    assert float(a_all["correct_frac"]) == pytest.approx(bm.run("model-a").overall.correct_frac)
    assert float(a_all["fast_1_frac"]) == pytest.approx(bm.run("model-a").overall.fast_p[1.0])
    assert {"tf32_hidden_correct_speedup", "fp32_nominal_fast_1_frac", "hidden_fail_D4"} <= set(rows[0])
    md = write_markdown(store, tmp_path / "r.md").read_text()
    for h in ("## Leaderboard", "## Decomposition", "## Failures per hidden distribution", "## Excluded problems"):
        assert h in md
    assert "<b>" not in md and "level2/4_Conv3d_GroupNorm_Mean" in md
    samples = list(csv.DictReader(write_samples_csv(store, tmp_path / "samples.csv").open()))
    assert len(samples) == len(list(store.verdicts()))
    hostile = [r for r in samples if "pwned" in r["message"]]
    assert hostile and all(not r["message"].startswith(("=", "+", "-", "@")) for r in samples)


def test_write_all(tmp_path):
    with Store(tmp_path / "s.db") as s:
        for v in make_batch(runs=("m",), levels={1: 2}, samples=2):
            s.put_verdict(job_for(v), v)
        out = write_all(s, tmp_path / "all")
    for k in ("html", "leaderboard_csv", "samples_csv", "markdown"):
        assert out[k].exists() and out[k].stat().st_size > 0
    assert {p.name for p in out["eval_results"]} == {"eval_results.json", "eval_results_hidden.json"}


def test_csv_cells_cannot_inject_formulas(tmp_path):
    with Store(tmp_path / "s.db") as s:
        v = make_verdict("CRASH", message='=HYPERLINK("x","y")')
        s.put_verdict(job_for(v), v)
        (row,) = csv.DictReader(write_samples_csv(s, tmp_path / "s.csv").open())
    assert row["message"] == "'=HYPERLINK(\"x\",\"y\")"


def test_eval_results_json_shape(store, tmp_path):
    paths = write_eval_results_json(store, tmp_path / "er")
    names = {p.relative_to(tmp_path / "er").as_posix() for p in paths}
    assert "model-a/level1/eval_results.json" in names and "model-a/level1/eval_results_hidden.json" in names
    assert len(paths) == 3 * 3 * 2
    nominal = json.loads((tmp_path / "er/model-a/level1/eval_results.json").read_text())
    hidden = json.loads((tmp_path / "er/model-a/level1/eval_results_hidden.json").read_text())
    assert list(nominal) == [str(i) for i in range(1, 7)]
    verdicts = {(v.problem.problem_id, v.candidate.sample_id): v
                for v in store.verdicts(run="model-a", level=1)}
    for pid, entries in nominal.items():
        assert [e["sample_id"] for e in entries] == sorted(e["sample_id"] for e in entries)
        for e, h in zip(entries, hidden[pid]):
            assert set(e) == {"sample_id", "kbv_status", "compiled", "correctness", "runtime", "runtime_stats",
                              "metadata", "peak_memory"}
            assert set(e["metadata"]) >= {"hardware", "device", "correctness_trials", "max_difference"}
            v = verdicts[(int(pid), e["sample_id"])]
            assert e["compiled"] == (v.status.value != "COMPILE_ERROR")
            assert e["correctness"] == (v.status.ran and v.nominal_passed and v.status.value not in ("HACK", "SHORTCUT"))
            assert e["metadata"]["protocol_correctness"] == (v.status.ran and v.nominal_passed)
            assert h["correctness"] == (v.status.value == "PASS")
            assert e["kbv_status"] == h["kbv_status"] == v.status.value
            if e["correctness"]:
                assert e["runtime"] == pytest.approx(v.timing["candidate"].mean_ms)
                assert set(e["runtime_stats"]) == {"mean", "std", "min", "max", "num_trials", "hardware", "device"}
                assert e["peak_memory"] == v.memory["candidate"].peak_bytes
                assert re.fullmatch(r"\(3 / 3\)", e["metadata"]["correctness_trials"])
            else:
                assert e["runtime"] == -1.0 and e["runtime_stats"] == {}
            if v.status.value == "COMPILE_ERROR":
                assert e["metadata"]["compilation_error"] == v.message


def test_empty_store_renders(tmp_path):
    with Store(tmp_path / "empty.db") as s:
        text = write_html(s, tmp_path / "e.html").read_text()
        assert '<section id="leaderboard">' in text
        assert write_eval_results_json(s, tmp_path / "er") == []
        write_markdown(s, tmp_path / "e.md")
        write_csv(s, tmp_path / "e.csv")
    assert compute_metrics([]).runs == ()
