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
