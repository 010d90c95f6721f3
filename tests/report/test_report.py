"""Report outputs: files exist, the HTML is self-contained and escapes hostile candidate text."""

from __future__ import annotations

import csv
import json
import re

import markupsafe
import numpy as np
import pytest

from kbv.batch.metrics import compute_metrics
from kbv.report.html import (load_metrics, write_all, write_samples_csv, write_csv, write_eval_results_json,
    write_html, write_markdown)
from kbv.batch.store import Store
from kbv.batch.jobs import problem_key
from verdict_factory import job_for, make_batch, make_verdict, problem

pytestmark = pytest.mark.xdist_group("report")  # one xdist worker renders the module's pages once

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
    from kbv.pipeline.verdict import combine_workloads

    vs.append(combine_workloads([  # a problem with declared workloads (issue 23)
        ("nominal", {"dim": 512}, make_verdict("PASS", run="model-a", level=1, problem_id=3, sample_id=7, speedup=1.0)),
        ("wide<b>", {"dim": 1536}, make_verdict("PASS", run="model-a", level=1, problem_id=3, sample_id=7, speedup=4.0))]))
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
    for section in ("leaderboard", "policies", "paper", "matrix", "runs", "eval-errors", "decomposition", "failures",
                    "scatter", "cdf", "excluded", "problems"):
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
    assert 'class="sortable compact"' in text and "addEventListener" in text
    # leaderboard: two header rows (column groups, then columns), 3 runs × (all + 3 levels)
    body = text.split('<table class="sortable compact" id="leaderboard-table">')[1].split("</table>")[0]
    assert body.count("<tr") == 2 + 12
    groups = re.findall(r'<th class="group[^"]*" colspan="(\d+)">([^<]*)</th>', body)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", body.split("</tr>")[1])
    assert [g for _, g in groups][1:] == ["Correctness", "Speed vs eager-tf32", "Memory", "pass@k", "Verdicts"]
    assert sum(int(n) for n, _ in groups) == len(heads) <= 22  # statuses in one cell: the table fits a page
    assert "All-problems max(1, s), clipped at 1×" in heads and "EVAL_ERROR" in heads


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
    for k in ("html", "leaderboard_csv", "policies_csv", "samples_csv", "markdown"):
        assert out[k].exists() and out[k].stat().st_size > 0
    rows = list(csv.DictReader(out["policies_csv"].open()))
    assert [(r["scope"], r["policy"]) for r in rows] == [("all", "kbv"), ("all", "kbv-compat"),
                                                          ("level 1", "kbv"), ("level 1", "kbv-compat")]
    assert {"correct_frac", "all_problems_speedup", "fast_1_frac", "per_sample_correctness_rate_mean",
            "per_sample_fast_1_std", "memory_ratio_all"} <= set(rows[0])
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


@pytest.fixture(scope="module")
def rich_page(tmp_path_factory):
    """A small store with a noisy PASS, a paper-only kernel, an EVAL_ERROR and a candidate file with a
    static finding on a line, rendered once."""
    from kbv.model.records import Finding, Severity

    root = tmp_path_factory.mktemp("rich")
    src = root / "cand.py"
    src.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                   "        return torch.relu(x)  # <script>x</script>\n")
    import hashlib

    quiet = make_verdict("PASS", run="m", problem_id=1, speedup=2.0)
    noisy = make_verdict("PASS", run="m", problem_id=2, speedup=3.0, noisy=True)
    gelu = make_verdict("INCORRECT", run="m", problem_id=7, hidden_fail=["D2"], compat_pass=True,
                        unverified_speedup=1.5, message="wrong on D2 (tanh approximation)")
    oom = make_verdict("EVAL_ERROR", run="m", problem_id=3)
    flagged = make_verdict("PASS", run="m", problem_id=4, speedup=1.1,
                           findings=[Finding("scan:torch-op", (15,), Severity.WARNING, "torch.relu in forward", 4)])
    import dataclasses

    flagged = dataclasses.replace(flagged, candidate=dataclasses.replace(
        flagged.candidate, path=str(src), sha256=hashlib.sha256(src.read_bytes()).hexdigest()))
    moved = make_verdict("PASS", run="m", problem_id=5, speedup=1.2)
    with Store(root / "s.db") as s:
        for v in (quiet, noisy, gelu, oom, flagged, moved):
            s.put_verdict(job_for(v), v)
        text = write_html(s, root / "r.html").read_text()
        bm = load_metrics(s)
    return text, bm


def test_ranked_speedups_carry_intervals_noise_marks_and_their_n(rich_page):
    text, bm = rich_page
    m = bm.run("m").overall
    matrix = text.split('<section id="matrix">')[1].split("</section>")[0]
    assert re.search(r'class="noisy" title="too noisy to rank">~3\.00×</span> <span class="ci">\[\d\.\d\d–\d\.\d\d\]', matrix)
    assert re.search(r'>2\.00×</span> <span class="ci">\[1\.\d\d–2\.\d\d\]', matrix)
    assert "level1/3_LayerNorm" in matrix and 'class="s-EVAL_ERROR"' in matrix
    board = text.split('id="leaderboard-table">')[1].split("</table>")[0]
    # the geomean says what it averages over: 4 solved of 5 judged problems (P3 is EVAL_ERROR only), 1 noisy
    assert m.problems == 5 and m.speedup_problems == 4
    assert f"~{m.correct_speedup:.2f}× (4 of 5, 1 noisy)" in board and "5 (+1 unjudged)" in board
    assert f"{m.all_problems_speedup:.2f}×" in board


def test_policies_side_by_side_and_the_paper_only_kernels(rich_page):
    text, bm = rich_page
    pol = text.split('<section id="policies">')[1].split("</section>")[0]
    k, c = bm.run("m").overall.policies["kbv"], bm.run("m").overall.policies["kbv-compat"]
    assert (k.correct_problems, c.correct_problems) == (4, 5)
    assert f"{k.correct_frac * 100:.1f}% (4 of 5)" in pol and f"{c.correct_frac * 100:.1f}% (5 of 5)" in pol
    paper_only = pol.split("credits and kbv")[1]
    assert "level1/7_GELU" in paper_only and "tanh approximation" in paper_only and "1.50×" in paper_only
    assert "level1/1_ReLU" not in paper_only
    paper = text.split('<section id="paper">')[1].split("</section>")[0]
    assert paper.count("<tr") == 2 + 2 * 2  # (all + level 1) × 2 policies
    errs = text.split('<section id="eval-errors">')[1].split("</section>")[0]
    assert "m: 1" in errs and "ran out of memory" in errs and "level1/3_LayerNorm" in errs


def test_sample_page_shows_source_with_finding_lines_marked(rich_page):
    text, _ = rich_page
    (src,) = re.findall(r'<pre class="src">(.*?)</pre>', text, flags=re.S)
    assert '<span class="ln hit" data-n="4">        return torch.relu(x)  # &lt;script&gt;x&lt;/script&gt;</span>' in src
    assert '<span class="why">↑ WARNING scan:torch-op: torch.relu in forward</span>' in src
    assert src.count('class="ln hit"') == 1 and src.count('class="ln"') == 3
    assert "finding lines marked: 4" in text
    # a candidate file not on disk any more: named, not shown
    assert "source not shown: /kb/runs/m/level_1_problem_5_sample_0_kernel.py is missing" in text


def test_every_ranked_speedup_has_an_interval_in_the_matrix(rich_page):
    text, _ = rich_page
    matrix = text.split('<section id="matrix">')[1].split("</section>")[0]
    speeds = re.findall(r"\d+\.\d\d×</span>( <span class=\"ci\">\[[^\]]+\]</span>)?", matrix)
    assert speeds and all(speeds)


def test_audit_labels_show_per_sample_and_filter_the_problem_pages(tmp_path):
    """kbv audit's labels: a column on every sample (the judges' shared label, or review: a / b)
    and ``kbv report --audit LABEL|review`` keeping only those samples on the problem pages."""
    from kbv.generate.audit_store import Judgement, connect, put_judgements, verdict_key
    from kbv.report.html import render_html

    with Store(tmp_path / "s.db") as s:
        verdicts = make_batch(runs=("m",), levels={1: 2}, samples=1)
        for v in verdicts:
            s.put_verdict(job_for(v), v)
        a, b = verdicts[0], verdicts[1]

        def judge(v, who, label):
            run, psha, csha, sid = verdict_key(v)
            return Judgement(job_key=job_for(v).key, judge=who, label=label, rationale="r", raw="", prompt_hash="h",
                             run=run, problem_key=f"p{v.problem.problem_id}", problem_sha256=psha,
                             candidate_sha256=csha, sample_id=sid, speedup=2.0)

        db = connect(s.path)
        put_judgements(db, [judge(a, "j1", "genuine"), judge(a, "j2", "genuine"),
                            judge(b, "j1", "exploit"), judge(b, "j2", "genuine")])
        db.close()
        full = render_html(s)
        assert ">genuine<" in full and "review: exploit / genuine" in full
        only_review = render_html(s, audit="review")
        assert "review: exploit / genuine" in only_review and ">genuine<" not in only_review
        only_genuine = render_html(s, audit="genuine")
        assert ">genuine<" in only_genuine and "review: exploit" not in only_genuine


def test_markdown_and_csvs_mark_noise_and_a_partial_batch(tmp_path):
    """The plain-file exports carry what the HTML page says: a noisy geomean is marked ``~`` with its
    count, each sample's speedup says whether it is noisy, and a store with jobs still pending says
    its figures are partial (a fresh user read a stopped batch's report.md as final)."""
    quiet = make_verdict("PASS", run="m", problem_id=1, speedup=2.0)
    noisy = make_verdict("PASS", run="m", problem_id=2, speedup=3.0, noisy=True)
    pending = make_verdict("PASS", run="m", problem_id=3, speedup=1.0)
    with Store(tmp_path / "s.db") as s:
        for v in (quiet, noisy):
            s.put_verdict(job_for(v), v)
        full = write_all(s, tmp_path / "full")
        text = full["markdown"].read_text()
        assert "Partial results" not in text
        m = load_metrics(s).run("m").overall
        # as the HTML page: what the geomean averages over (n of N), and the clipped all-problems column
        assert f"~{m.correct_speedup:.2f}× (2 of 2, 1 noisy)" in text and "All-problems max(1, s)" in text
        board = list(csv.DictReader(full["leaderboard_csv"].open()))
        assert {r["noisy_problems"] for r in board if r["scope"] == "all"} == {"1"}
        samples = {r["problem_id"]: r for r in csv.DictReader(full["samples_csv"].open())}
        noisy_cols = [c for c in samples["2"] if c.endswith("_noisy") and samples["2"][c]]
        assert noisy_cols and all(samples["2"][c] == "True" for c in noisy_cols)
        assert all(samples["1"][c] == "False" for c in noisy_cols)
        s.add_jobs([job_for(pending)])
        text = write_all(s, tmp_path / "partial")["markdown"].read_text()
        assert "Partial results: 1 job(s) have no verdict yet" in text


def test_a_baseline_no_verdict_has_is_said_not_shown_as_zero(store):
    """``kbv report --baseline compile`` before ``kbv baselines``: every speedup was "–" and fast_0
    0 % with no word why (newcomer report). The report and the CLI now say so."""
    from kbv.report.export import missing_baseline

    assert missing_baseline(load_metrics(store, baseline="eager-tf32")) == ""
    warning = missing_baseline(load_metrics(store, baseline="compile"))
    assert "No compile baseline timing" in warning and "kbv baselines" in warning


def test_write_all_carries_the_missing_baseline_warning(store, tmp_path):
    """The warning reaches report.md, report.html and the caller (the CLI prints it) from one metrics pass."""
    out = write_all(store, tmp_path / "c", baseline="compile")
    assert out["missing_baseline"].startswith("No compile baseline timing")
    assert out["missing_baseline"] in out["markdown"].read_text() and "No compile baseline timing" in out["html"].read_text()
    assert write_all(store, tmp_path / "t")["missing_baseline"] == ""


# Issue 25: the clipped aggregate named, zeros drawn, runs compared, report.md complete ------------

def _two_slow_runs(tmp_path):
    """Runs ``a`` and ``b``, every kernel slower than eager (a: 0.8×, 0.6×; b: 0.4×, 0.3×) on
    problems 1 and 2; only ``a`` solved problem 3 (0.9×)."""
    def slow(run, pid, x):  # as slow against either baseline
        return make_verdict("PASS", run=run, problem_id=pid, speedup={"eager-tf32": x, "eager-fp32": x})

    s = Store(tmp_path / "s.db")
    vs = [slow("a", 1, 0.8), slow("a", 2, 0.6), slow("a", 3, 0.9), slow("b", 1, 0.4), slow("b", 2, 0.3),
          make_verdict("INCORRECT", run="b", problem_id=3, hidden_fail=["D1"],
                       unverified_speedup={"eager-tf32": 0.5, "eager-fp32": 0.5})]
    for v in vs:
        s.put_verdict(job_for(v), v)
    return s


def test_the_clipped_aggregate_is_never_shown_as_a_speedup(tmp_path):
    """Two runs slower than eager everywhere read "all-problems speedup 1.00×", as if at parity
    (each speedup is clipped at 1): the column says it is clipped, and a value of exactly 1 that
    came from clipping says so."""
    with _two_slow_runs(tmp_path) as s:
        text = write_html(s, tmp_path / "r.html").read_text()
    assert "All-problems speedup" not in text
    board = text.split('id="leaderboard-table">')[1].split("</table>")[0]
    assert "All-problems max(1, s), clipped at 1×" in board and "1.00× (none above 1×)" in board
    pol = text.split('<section id="policies">')[1].split("</section>")[0]
    assert "clipped at 1×" in pol and "1.00× (none above 1×)" in pol
    paper = text.split('<section id="paper">')[1].split("</section>")[0]
    assert "Avg max(1, s), clipped at 1×" in paper


def test_paired_comparison_of_two_runs_over_their_common_problems(tmp_path):
    """Geomean of per-problem speedup ratios over the problems both solved, with its bootstrap
    interval; a problem only one run solved is counted apart."""
    from kbv.batch.paired import paired_comparisons
    from kbv.model.intervals import geomean_interval

    with _two_slow_runs(tmp_path) as s:
        bm = load_metrics(s)
        (c,) = paired_comparisons(bm)
        text = write_html(s, tmp_path / "r.html").read_text()
        md = write_all(s, tmp_path / "all")["markdown"].read_text()
    assert (c.run_a, c.run_b, c.common, c.paired, c.only_a, c.only_b) == ("a", "b", 3, 2, 1, 0)
    assert c.geomean_ratio == pytest.approx((2.0 * 2.0) ** 0.5)  # 0.8 / 0.4 and 0.6 / 0.3
    # two paired problems: no interval and no winner (a newcomer's report called one on one problem)
    assert c.interval is None and c.reading == "too few problems to tell (2 solved by both, fewer than 3)"
    runs = text.split('<section id="runs">')[1].split("</section>")[0]
    assert "<td>2.00×</td>" in runs and "too few problems to tell" in runs and "a faster" not in runs
    assert "## Run vs run" in md and "| a | b | 3 | 2 | 1 | 0 | 2.00× | – | too few problems to tell" in md
    # from three paired problems on, the bootstrap reads a winner
    from kbv.batch.paired import RunComparison
    three = RunComparison("a", "b", "eager-tf32", 3, 3, 0, 0, 2.0, (1.5, 2.5))
    assert three.reading == "a faster"
    assert RunComparison("a", "b", "eager-tf32", 3, 3, 0, 0, 1.1, (0.8, 1.4)).reading == "no clear difference"
    # the interval: seeded, holds the point, narrows with agreement, and refuses bad ratios
    spread = [1.5, 2.0, 3.0, 0.9, 2.5, 1.1]
    lo, hi = geomean_interval(spread, seed=1)
    assert (lo, hi) == geomean_interval(spread, seed=1) and lo < float(np.exp(np.mean(np.log(spread)))) < hi
    with pytest.raises(ValueError):
        geomean_interval([1.0, 0.0], seed=1)
    with pytest.raises(ValueError):
        geomean_interval([], seed=1)


def test_report_md_has_the_problem_by_run_matrix_and_the_audit_labels(tmp_path):
    from kbv.generate.audit_store import Judgement, connect, put_judgements, verdict_key

    with _two_slow_runs(tmp_path) as s:
        v = next(v for v in s.verdicts() if v.candidate.run == "a" and v.problem.problem_id == 1)
        run, psha, csha, sid = verdict_key(v)
        db = connect(s.path)
        put_judgements(db, [Judgement(job_key=job_for(v).key, judge=j, label=lb, rationale="r", raw="", prompt_hash="h",
                                      run=run, problem_key=problem_key(v.problem), problem_sha256=psha,
                                      candidate_sha256=csha, sample_id=sid, speedup=0.8)
                            for j, lb in (("openai:j1", "genuine"), ("openai:j2", "unparseable"))])
        db.close()
        md = write_markdown(s, tmp_path / "r.md").read_text()
    matrix = md.split("## Problem × run")[1].split("\n## ")[0]
    assert "| problem | a | b |" in matrix
    row3 = next(line for line in matrix.splitlines() if "level1/3_" in line)
    assert "PASS 0.90× [" in row3 and "| INCORRECT |" in row3
    audit = md.split("## Audit labels (kbv audit)")[1].split("\n## ")[0]
    assert "| problem | run | sample | speedup | openai:j1 | openai:j2 | result |" in audit
    assert "| genuine | unparseable | needs review |" in audit and "1 flagged for review" in audit


def test_fast_1_all_zero_is_drawn_on_a_sane_axis(tmp_path):
    """Every fast_1 at 0 gave an empty box with a -0.04..0.04 axis: the zeros are drawn and written
    on a 0-100 % axis."""
    from kbv.report.plots import decomposition_figure

    with _two_slow_runs(tmp_path) as s:
        fig = decomposition_figure(load_metrics(s))
    ax_s, ax_f = fig.axes
    assert ax_f.get_ylim() == (0.0, 105.0) and list(ax_f.get_yticks()) == [0, 25, 50, 75, 100]
    labels = [t.get_text() for t in ax_f.texts]
    assert labels and set(labels) == {"0%"}
    assert ax_s.get_ylim()[0] == 0.0


def test_a_sample_over_declared_workloads_shows_each_and_the_geometric_mean(page):
    assert "geometric mean (credited)" in page
    assert "<td class=\"t\">wide&lt;b&gt;</td><td class=\"t\">dim=1536</td>" in page
    assert "wide<b>" not in page


def test_verdicts_whose_hidden_test_file_failed_are_listed(tmp_path):
    """A verdict made without all of its hidden test file's sets (the user's file failed) is named in
    report.md, the HTML page and the samples CSV, not only in ``kbv run``'s exit (red-team helper)."""
    with Store(tmp_path / "s.db") as s:
        for v in make_batch(runs=("m",), levels={1: 2}, samples=1):
            s.put_verdict(job_for(v), v)
        bad = make_verdict("PASS", run="m", level=1, problem_id=7, sample_id=0,
                           evidence={"hidden_tests_error": "/h/level1/7_hidden.py: set HT2: reference raised <b>TypeError</b>"})
        s.put_verdict(job_for(bad), bad)
        md = write_markdown(s, tmp_path / "r.md").read_text()
        html = write_html(s, tmp_path / "r.html").read_text()
        samples = list(csv.DictReader(write_samples_csv(s, tmp_path / "samples.csv").open()))
    assert "## Verdicts without all of their hidden test file's sets" in md
    assert "m level1/7" in md and "set HT2: reference raised" in md and "<b>" not in md
    assert "1 verdict(s) without all of their hidden test file" in html and "&lt;b&gt;TypeError" in html
    assert [r["hidden_tests_error"] for r in samples if r["hidden_tests_error"]] == [bad.evidence["hidden_tests_error"]]
