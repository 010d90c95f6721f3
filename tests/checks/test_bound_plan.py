"""kbv.checks.bound_plan: how a bound pass is planned and what its CPU figures add up to."""

from __future__ import annotations

from kbv.checks import bound_plan


def test_a_tick_rounded_process_figure_does_not_outweigh_the_live_threads():
    """Regression (red-team helper, 2026-12-06): /proc/<pid>/stat counts in 10 ms ticks, and a
    difference of two readings that rounded up put 20 ms against 10.5 ms of the live threads' own
    CPU time; less two ticks a process it no longer counts."""
    assert bound_plan.tree_cpu_ms(10.5, 20.0, None, 1, 10.0) == 10.5


def test_ended_work_beyond_the_tick_slack_still_counts():
    """Threads that ended inside the request leave no live figure: the process figure over its
    slack, or the cgroup's, holds their time."""
    assert bound_plan.tree_cpu_ms(2.0, 60.0, None, 1, 10.0) == 40.0
    assert bound_plan.tree_cpu_ms(2.0, 60.0, 57.5, 1, 10.0) == 57.5


def test_the_cgroup_figure_counts_at_its_own_resolution():
    assert bound_plan.tree_cpu_ms(10.0, 10.0, 12.25, 2, 10.0) == 12.25


def test_fresh_draws_fit_the_memory_bound():
    """Always up to FRESH_DRAW_MAX_BYTES of inputs; above it only where the timing sets, the pass's
    set, the re-check's values and the draw's copy hold at most 4·B."""
    from kbv.checks.bound_plan import FRESH_DRAW_MAX_BYTES, fresh_draws_fit

    gib = 1 << 30
    assert fresh_draws_fit(FRESH_DRAW_MAX_BYTES, 0, 4)
    assert fresh_draws_fit(2 * gib, 2 * gib, 2)  # an element-wise op: (2 + 3) x 2 <= 4 x 4
    assert not fresh_draws_fit(2 * gib, 1 << 20, 2)  # a reduction: 10 GiB against ~8 GiB
    assert not fresh_draws_fit(2 * gib, 2 * gib, 6)


def test_fresh_draw_calls_keep_a_writes_draws_within_budget():
    from kbv.checks.bound_plan import FRESH_DRAW_BUDGET_MS, MIN_BOUND_CALLS, fresh_draw_calls

    assert fresh_draw_calls(64, 1.0) == 64
    assert fresh_draw_calls(64, FRESH_DRAW_BUDGET_MS / 10) == 10
    assert fresh_draw_calls(64, 10 * FRESH_DRAW_BUDGET_MS) == MIN_BOUND_CALLS
    assert fresh_draw_calls(2, 10 * FRESH_DRAW_BUDGET_MS) == 2 and fresh_draw_calls(5, float("nan")) == 5


def test_same_layout():
    import torch

    from kbv.checks.bound_plan import same_layout

    a = [torch.zeros(2, 3), 4, "x"]
    assert same_layout([torch.ones(2, 3), 4, "x"], a)
    assert not same_layout([torch.ones(3, 2), 4, "x"], a)
    assert not same_layout([torch.ones(2, 3, dtype=torch.float64), 4, "x"], a)
    assert not same_layout([torch.ones(2, 3), 5, "x"], a)
    assert not same_layout([torch.ones(2, 3), 4], a)
    assert not same_layout([4, torch.ones(2, 3), "x"], a)
