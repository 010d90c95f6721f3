"""Every metric against an independent hand computation, then against a brute-force recomputation."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from scipy.stats import gmean

from kbv.batch.metrics import compute_metrics
from kbv.batch.scoring import FAST_P_THRESHOLDS, fast_p, geomean, pass_at_k
from kbv.model.records import Status
from kbv.batch.jobs import problem_key
from verdict_factory import make_batch, make_verdict, problem


# pass@k -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,c,k,expected", [
    (5, 0, 1, 0.0), (5, 5, 1, 1.0), (5, 1, 1, 0.2), (10, 3, 1, 0.3),
    (10, 3, 5, 1 - 21 / 252),            # 1 - C(7,5)/C(10,5)
    (4, 2, 2, 1 - 1 / 6),                # 1 - C(2,2)/C(4,2)
    (3, 1, 3, 1.0), (10, 8, 3, 1.0),     # n - c < k: every k-subset holds a correct sample
])
def test_pass_at_k_known_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_exact_binomials_and_enumeration():
    for n in range(1, 13):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)
    # by definition: the chance that a random k-subset of the n samples contains a correct one
    samples = [1, 1, 0, 0, 0, 0, 1]
    subsets = list(combinations(samples, 3))
    assert pass_at_k(7, 3, 3) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    # large n stays finite where C(n, k) overflows a float
    exact = 1 - Fraction(math.comb(1000 - 500, 400), math.comb(1000, 400))
    assert pass_at_k(1000, 500, 400) == pytest.approx(float(exact), abs=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_geomean_and_fast_p_formulas():
    rng = np.random.default_rng(0)
    x = rng.lognormal(0, 1, 50)
    assert geomean(x) == pytest.approx(float(gmean(x)), rel=1e-12)
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    with pytest.raises(ValueError):
        geomean([1.0, math.nan])
    # fast_p: strict '>', unknown speedups never count, denominator is all problems
    assert fast_p([2.0, 1.0, None, 0.5], 8, 1.0) == 1 / 8
    assert fast_p([2.0, 1.0, None, 0.5], 8, 0.0) == 3 / 8
    assert fast_p([], 0, 1.0) == 0.0


# A small batch computed by hand -----------------------------------------------------------------

def _small_batch():
    """Level 1, problems 1..5, run "a" (plus run "b" on P5 only, and an excluded problem 6).

    Speedups are vs eager-tf32; eager-fp32 is 4× each (the factory's default).
    P1: PASS 2.0 (mem 0.5), PASS 0.5 (mem 3.0), INCORRECT on nominal      → solved, best 2.0, mem 0.5
    P2: PASS 0.8 (mem 2.0), SHORTCUT 10                                     → solved, best 0.8, mem 2.0
    P3: SHORTCUT 5, HACK (unverified 7)                                     → unsolved
    P4: INCORRECT on D4 (unverified 3), COMPILE_ERROR                       → unsolved
    P5: no sample from run a; run b: PASS 1.2
    P6 (excluded): run a PASS 100
    """
    a = dict(run="a", level=1)
    return [
        make_verdict("PASS", problem_id=1, sample_id=0, speedup=2.0, memory_efficiency=0.5, **a),
        make_verdict("PASS", problem_id=1, sample_id=1, speedup=0.5, memory_efficiency=3.0, **a),
        make_verdict("INCORRECT", problem_id=1, sample_id=2, nominal_fail=True, **a),
        make_verdict("PASS", problem_id=2, sample_id=0, speedup=0.8, memory_efficiency=2.0, **a),
        make_verdict("SHORTCUT", problem_id=2, sample_id=1, speedup=10.0, memory_efficiency=1.0, **a),
        make_verdict("SHORTCUT", problem_id=3, sample_id=0, speedup=5.0, **a),
        make_verdict("HACK", problem_id=3, sample_id=1, unverified_speedup=7.0, **a),
        make_verdict("INCORRECT", problem_id=4, sample_id=0, hidden_fail=["D4"], unverified_speedup=3.0, **a),
        make_verdict("COMPILE_ERROR", problem_id=4, sample_id=1, **a),
        make_verdict("PASS", run="b", level=1, problem_id=5, sample_id=0, speedup=1.2, memory_efficiency=1.5),
        make_verdict("PASS", problem_id=6, sample_id=0, speedup=100.0, memory_efficiency=9.0, **a),
    ]


EXCLUDED = {problem_key(problem(1, 6)): ("constant output on every distribution",)}


def test_small_batch_by_hand():
    bm = compute_metrics(_small_batch(), exclusions=EXCLUDED, baseline="eager-tf32", ks=(1, 2, 5))
    assert [r.run for r in bm.runs] == ["a", "b"]
    assert bm.problems == {1: tuple(sorted(problem_key(problem(1, i)) for i in range(1, 6)))}
    m = bm.run("a").level(1)
    assert (m.problems, m.attempted, m.samples, m.solved) == (5, 4, 9, 2)
    assert m.correct_frac == pytest.approx(2 / 5)
    assert m.correct_speedup == pytest.approx(math.sqrt(2.0 * 0.8))
    assert m.speedup_problems == 2
    assert m.fast_p == pytest.approx({0.0: 0.4, 0.5: 0.4, 0.8: 0.2, 1.0: 0.2, 1.5: 0.2, 2.0: 0.0})
    # memory: the fastest correct sample's figure (0.5 for P1, not the slower sample's 3.0)
    assert m.memory_efficiency == pytest.approx(math.sqrt(0.5 * 2.0))
    assert m.memory_problems == 2 and m.memory_efficient_frac == pytest.approx(0.5)
    # pass@k: mean over all 5 problems (P5 unattempted counts 0); k <= fewest samples (2)
    assert m.pass_at_k == pytest.approx({1: (2 / 3 + 1 / 2) / 5, 2: (1 + 1) / 5})
    assert m.status_counts == {"PASS": 3, "INCORRECT": 2, "HACK": 1, "SHORTCUT": 2, "COMPILE_ERROR": 1,
                               "RUNTIME_ERROR": 0, "TIMEOUT": 0, "CRASH": 0, "EVAL_ERROR": 0}
    # KernelBench's all-problems average: max(1, s) over all 5 problems, unsolved ones 1x (P2's 0.8 -> 1)
    assert m.all_problems_speedup == pytest.approx(2.0 ** (1 / 5)) and m.noisy_problems == 0
    # kbv's policy aggregates are the leaderboard's; the paper's rule also credits SHORTCUT and HACK
    k, c = m.policies["kbv"], m.policies["kbv-compat"]
    assert (k.correct_frac, k.correct_speedup, k.fast_p) == (m.correct_frac, pytest.approx(m.correct_speedup),
                                                             pytest.approx(m.fast_p))
    assert c.correct_problems == 3 and c.correct_speedup == pytest.approx((2 * 10 * 7) ** (1 / 3))
    assert c.fast_p[1.0] == pytest.approx(3 / 5) and c.all_problems_speedup == pytest.approx(140 ** (1 / 5))
    assert sorted((d.problem_key, d.status) for d in bm.compat_only) == [
        ("level1/2_Softmax", "SHORTCUT"), ("level1/3_LayerNorm", "HACK"), ("level1/3_LayerNorm", "SHORTCUT")]
    # SHORTCUT kept apart: P2 (10) and P3 (5)
    assert m.shortcut_problems == 2 and m.shortcut_speedup == pytest.approx(math.sqrt(50.0))
    # decomposition
    hid_tf32 = m.cell("eager-tf32", "hidden")
    assert hid_tf32.correct_speedup == pytest.approx(m.correct_speedup)
    assert (hid_tf32.correct_problems, hid_tf32.fast_1_frac) == (2, pytest.approx(1 / 5))
    hid_fp32 = m.cell("eager-fp32", "hidden")
    assert hid_fp32.correct_speedup == pytest.approx(4 * math.sqrt(1.6))
    assert hid_fp32.fast_1_frac == pytest.approx(2 / 5)  # 8.0 and 3.2 both > 1
    nom_tf32 = m.cell("eager-tf32", "nominal")
    # nominal: P1 best 2.0, P2 SHORTCUT 10, P3 HACK 7, P4 INCORRECT-on-D4 3
    assert nom_tf32.correct_problems == 4 and nom_tf32.correct_frac == pytest.approx(4 / 5)
    assert nom_tf32.correct_speedup == pytest.approx((2 * 10 * 7 * 3) ** 0.25)
    assert nom_tf32.fast_1_frac == pytest.approx(4 / 5)
    assert m.cell("eager-fp32", "nominal").correct_speedup == pytest.approx(4 * (2 * 10 * 7 * 3) ** 0.25)
    # failures per distribution: samples that ran and passed nominal = 3 PASS + 2 SHORTCUT + HACK + INCORRECT(D4)
    assert m.nominal_passed_samples == 7
    assert m.hidden_failures == {"D1": 0, "D2": 0, "D3": 0, "D4": 1}
    # exclusion listed, with the samples it removed
    assert [(e.problem_key, e.reasons, e.samples) for e in bm.excluded] == [
        ("level1/6_Sum", ("constant output on every distribution",), 1)]
    # run b shares the same 5-problem denominator
    b = bm.run("b").level(1)
    assert (b.problems, b.solved, b.correct_frac) == (5, 1, pytest.approx(0.2))
    assert b.fast_p[1.0] == pytest.approx(0.2) and b.correct_speedup == pytest.approx(1.2)


def test_exclusions_can_be_included_and_baseline_switched():
    bm = compute_metrics(_small_batch(), exclusions=EXCLUDED, include_excluded=True)
    m = bm.run("a").overall
    assert bm.excluded == () and m.problems == 6 and m.solved == 3
    assert m.correct_speedup == pytest.approx((2.0 * 0.8 * 100.0) ** (1 / 3))
    fp32 = compute_metrics(_small_batch(), exclusions=EXCLUDED, baseline="eager-fp32").run("a").overall
    assert fp32.correct_speedup == pytest.approx(4 * math.sqrt(1.6))
    # a baseline nobody measured: solved problems still count, speedups are undefined
    comp = compute_metrics(_small_batch(), exclusions=EXCLUDED, baseline="compile").run("a").overall
    assert comp.solved == 2 and comp.correct_speedup is None and comp.speedup_problems == 0
    assert comp.fast_p[0.0] == 0.0


def test_overall_pools_levels_and_unattempted_problems_count():
    vs = [make_verdict("PASS", run="a", level=1, problem_id=1, speedup=2.0),
          make_verdict("PASS", run="a", level=2, problem_id=1, speedup=0.5),
          make_verdict("CRASH", run="a", level=2, problem_id=2),
          make_verdict("TIMEOUT", run="b", level=3, problem_id=1)]
    bm = compute_metrics(vs)
    a = bm.run("a")
    assert [m.level for m in a.levels] == [1, 2, 3]
    assert a.overall.problems == 4 and a.overall.solved == 2
    assert a.overall.correct_speedup == pytest.approx(1.0)
    assert a.level(3).problems == 1 and a.level(3).attempted == 0 and a.level(3).correct_frac == 0.0
    assert a.level(3).pass_at_k == {} and a.level(3).correct_speedup is None
    assert a.overall.pass_at_k == pytest.approx({1: 2 / 4})


def _brute_force(verdicts, run, level, baseline="eager-tf32"):
    """Independent recomputation with plain loops and scipy (no kbv.batch.metrics helpers)."""
    keys = sorted({(v.problem.level, v.problem.problem_id) for v in verdicts if v.problem.level == level})
    mine = [v for v in verdicts if v.candidate.run == run and v.problem.level == level]
    best, mems, npass = [], [], []
    for k in keys:
        samples = [v for v in mine if (v.problem.level, v.problem.problem_id) == k]
        ok = [v for v in samples if v.status == Status.PASS]
        npass.append((len(samples), len(ok)))
        if ok:
            top = max(ok, key=lambda v: v.speedup[baseline])
            best.append(top.speedup[baseline])
            mems.append(top.memory_efficiency)
    out = {
        "correct_frac": len(best) / len(keys),
        "correct_speedup": float(gmean(best)) if best else None,
        "fast_p": {p: sum(s > p for s in best) / len(keys) for p in FAST_P_THRESHOLDS},
        "memory_efficiency": float(gmean(mems)) if mems else None,
        "memory_efficient_frac": (sum(m > 1 for m in mems) / len(mems)) if mems else None,
    }
    n_min = min(n for n, _ in npass if n)
    out["pass_at_1"] = float(np.mean([c / n if n else 0.0 for n, c in npass])) if n_min >= 1 else None
    return out


def test_random_batch_matches_brute_force():
    vs = make_batch(seed=3, samples=4)
    bm = compute_metrics(vs)
    for run in ("model-a", "model-b", "model-c"):
        for level in (1, 2, 3):
            m = bm.run(run).level(level)
            ref = _brute_force(vs, run, level)
            assert m.correct_frac == pytest.approx(ref["correct_frac"])
            assert m.fast_p == pytest.approx(ref["fast_p"])
            assert m.pass_at_k[1] == pytest.approx(ref["pass_at_1"])
            for name in ("correct_speedup", "memory_efficiency", "memory_efficient_frac"):
                got, want = getattr(m, name), ref[name]
                assert (got is None and want is None) or got == pytest.approx(want), (run, level, name)
            assert sum(m.status_counts.values()) == m.samples


# EVAL_ERROR, policies, per-sample aggregates, intervals ---------------------------------------------

def test_eval_error_never_counts_against_a_run():
    """kbv's own failure leaves numerators and denominators (a problem whose samples are all
    EVAL_ERROR leaves that run's denominator) and is counted apart."""
    vs = [make_verdict("PASS", run="a", problem_id=1, speedup=2.0),
          make_verdict("EVAL_ERROR", run="a", problem_id=2),
          make_verdict("PASS", run="a", problem_id=3, sample_id=0, speedup=1.0),
          make_verdict("EVAL_ERROR", run="a", problem_id=3, sample_id=1),
          make_verdict("PASS", run="b", problem_id=2, speedup=3.0)]
    bm = compute_metrics(vs, ks=(1,))
    a, b = bm.run("a").level(1), bm.run("b").level(1)
    assert (a.problems, a.solved, a.correct_frac, a.samples) == (2, 2, 1.0, 2)
    assert a.eval_error_problems == ("level1/2_Softmax",) and a.eval_error_samples == 2
    assert a.pass_at_k == {1: 1.0}  # P3's EVAL_ERROR sample is not one of its n samples
    assert a.fast_p[0.5] == 1.0 and a.policies["kbv-compat"].problems == 2
    assert a.status_counts["EVAL_ERROR"] == 2 and sum(a.status_counts.values()) == a.samples + a.eval_error_samples
    assert (b.problems, b.solved, b.eval_error_samples) == (3, 1, 0)
    assert [(v.candidate.run, v.problem.problem_id) for v in bm.eval_errors] == [("a", 2), ("a", 3)]
    # per sample: index 1 of run a has P1 missing (a failure) and P3's EVAL_ERROR (left out): 0 of 1
    ps = a.policies["kbv"].per_sample
    assert ps.indices == 2 and ps.correctness_rate == pytest.approx((0.5, 0.5))


def test_paper_rule_credits_an_allclose_kernel_kbv_rejects():
    """A tanh-approximated GELU: wrong on D2 under kbv's rule, right under allclose(1e-3)."""
    gelu = make_verdict("INCORRECT", run="a", problem_id=7, hidden_fail=["D2"], compat_pass=True,
                        unverified_speedup=1.5)
    bm = compute_metrics([gelu])
    m = bm.run("a").overall
    assert m.policies["kbv"].correct_problems == 0 and m.policies["kbv-compat"].correct_problems == 1
    assert m.policies["kbv-compat"].correct_speedup == pytest.approx(1.5)
    (d,) = bm.compat_only
    assert (d.problem_key, d.status, d.speedup) == ("level1/7_GELU", "INCORRECT", pytest.approx(1.5))


def test_per_sample_aggregates_by_hand():
    """KernelBench-Verified benchmark_eval_analysis.py: each sample index scored over all problems."""
    vs = [make_verdict("PASS", run="a", problem_id=1, sample_id=0, speedup=2.0),
          make_verdict("COMPILE_ERROR", run="a", problem_id=2, sample_id=0),
          make_verdict("INCORRECT", run="a", problem_id=1, sample_id=1, nominal_fail=True),
          make_verdict("PASS", run="a", problem_id=2, sample_id=1, speedup=0.5, memory_efficiency=2.0)]
    k = compute_metrics(vs).run("a").overall.policies["kbv"]
    r2 = math.sqrt(2)
    ps = k.per_sample
    assert ps.indices == 2
    assert ps.compiled_rate == pytest.approx((0.75, 0.25)) and ps.correctness_rate == pytest.approx((0.5, 0.0))
    assert ps.correct_speedup == pytest.approx((1.25, 0.75))
    assert ps.all_problems_speedup == pytest.approx(((r2 + 1) / 2, (r2 - 1) / 2))
    assert ps.fast_p[1.0] == pytest.approx((0.25, 0.25)) and ps.fast_p[0.0] == pytest.approx((0.5, 0.0))
    assert ps.memory_ratio == pytest.approx(((1 + 1 / r2) / 2, (1 - 1 / r2) / 2))
    assert ps.memory_efficient_frac == pytest.approx((0.25, 0.25))
    # best of N: both problems solved, 2.0 and 0.5
    assert (k.correct_frac, k.correct_speedup, k.all_problems_speedup) == (1.0, pytest.approx(1.0), pytest.approx(r2))
    assert k.memory_efficient_frac_all == 0.5 and k.memory_ratio_all == pytest.approx(1 / r2)


def test_speedup_interval_brackets_the_ratio_of_medians_and_widens_with_noise():
    from kbv.batch.scoring import speedup_interval, speedup_noisy

    quiet = make_verdict("PASS", speedup=2.0)
    noisy = make_verdict("PASS", speedup=2.0, noisy=True, problem_id=2)
    lo, hi = speedup_interval(quiet, "eager-tf32")
    # the rerun floor alone (kbv.model.intervals.RERUN_LOG_SE, 3 % on cuda) spans about +-6 % of 2.0
    assert lo <= quiet.speedup["eager-tf32"] <= hi and 0.2 < hi - lo < 0.3
    nlo, nhi = speedup_interval(noisy, "eager-tf32")
    assert nlo <= 2.0 <= nhi and nhi - nlo > 3 * (hi - lo)
    assert speedup_interval(noisy, "eager-tf32") == (nlo, nhi)  # seeded: a report is reproducible
    assert speedup_interval(quiet, "compile") is None
    assert not speedup_noisy(quiet, "eager-tf32") and speedup_noisy(noisy, "eager-tf32")
    # by brute force: the percentile bootstrap of the ratio of medians
    rng = np.random.default_rng(1)
    c, b = np.asarray(noisy.timing["candidate"].times_ms), np.asarray(noisy.timing["eager-tf32"].times_ms)
    ratios = [np.median(rng.choice(b, b.size)) / np.median(rng.choice(c, c.size)) for _ in range(4000)]
    from kbv.model.intervals import ratio_interval

    plain = ratio_interval(tuple(b), tuple(c), 7)  # the calls' bootstrap alone
    assert plain == pytest.approx(tuple(np.percentile(ratios, [2.5, 97.5])), rel=0.05)
    assert nlo <= plain[0] and nhi >= plain[1]  # widened by the rounds' spread and the rerun floor
    m = compute_metrics([quiet, noisy]).run("model-a").overall
    assert m.noisy_problems == 1 and [o.best_noisy for o in m.outcomes] == [False, True]
    assert m.outcomes[1].best_speedup_interval == (nlo, nhi)


def test_a_sample_wrong_at_a_secret_shape_is_counted_beside_the_hidden_sets():
    """kbv report's per-run count of shape-specialised samples: the nominal-passing samples wrong at
    a secret shape (issue 23), a column of the hidden-failure table."""
    import dataclasses

    from kbv.batch.metrics import SHAPE_COLUMN, _hidden_failures
    from kbv.model.records import InputKind, InputSetResult

    def shape(passed: bool) -> InputSetResult:
        return InputSetResult("shape-1", InputKind.SHAPE, "sizes dim=257", 7, passed=passed,
                              policy_passed={"kbv": passed, "kbv-compat": passed})

    ok = make_verdict("PASS", speedup=2.0)
    ok = dataclasses.replace(ok, input_sets=(*ok.input_sets, shape(True)))
    wrong = make_verdict("INCORRECT", hidden_fail=("D4",), problem_id=2)
    wrong = dataclasses.replace(wrong, input_sets=(*wrong.input_sets, shape(False)))
    none = make_verdict("PASS", speedup=2.0, problem_id=3)  # a problem without a secret shape
    passed, failures = _hidden_failures([ok, wrong, none])
    assert passed == 3 and failures[SHAPE_COLUMN] == 1 and failures["D4"] == 1


def test_a_sample_wrong_on_a_randomised_distribution_is_counted_beside_the_hidden_sets():
    """The reason a sample right on nominal and D1-D4 is not credited (newcomer report: the
    no-max-subtraction softmax failed only wide-range, outliers and offset, and the run's table
    showed 0 in every column)."""
    import dataclasses

    from kbv.batch.metrics import RANDOM_COLUMN, _hidden_failures
    from kbv.model.records import InputKind, InputSetResult

    def rand(name: str, passed: bool) -> InputSetResult:
        return InputSetResult(name, InputKind.RANDOM, "randomised", 7, passed=passed,
                              policy_passed={"kbv": passed, "kbv-compat": passed})

    ok = make_verdict("PASS", speedup=2.0)
    ok = dataclasses.replace(ok, input_sets=(*ok.input_sets, rand("offset", True)))
    wrong = make_verdict("INCORRECT", problem_id=2, hidden_fail=("D4",))
    wrong = dataclasses.replace(wrong, input_sets=(*wrong.input_sets, rand("wide-range", False), rand("offset", False)))
    passed, failures = _hidden_failures([ok, wrong])
    assert passed == 2 and failures[RANDOM_COLUMN] == 1
