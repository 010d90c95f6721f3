"""The baselines' blocks of the timing rounds, timed with the candidate's tree stopped, and what
that tree still ran meanwhile (the rule: :func:`kbv.checks.timing_rules.ran_while_paused`).

A thread of the candidate's inside a long system call (``MADV_POPULATE_READ`` over gigabytes)
runs on through SIGSTOP and ``cgroup.freeze`` and slows the baselines it is compared with. The
reference worker reads the tree's CPU time (:meth:`kbv.processes.candidate.CandidateProcess.tree_cpu`)
before and after every block; a block it ran in is timed again, up to
:data:`kbv.checks.timing_rules.PAUSED_TRIES` tries, so the baselines credited are quiet ones.

Blocks of a fast baseline are short (a 64 x 512 ReLU's took 12 ms in all over a verification), so a
thread that ran through every stop could spend under the slack in each block and under the total's
bar: the red-team row ``t02-run-while-paused`` passed 1 run in 3. Where the stopped tree spent over
the slack in all but short of proof, :func:`confirm_paused` stops it for windows of its own, each
right after one untimed call, with nothing else running: the rule reads those windows too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kbv.checks.timing_rules import PAUSED_CPU_SLACK_MS, PAUSED_TRIES, candidate_processes, ran_while_paused
from kbv.model.findings import is_proof
from kbv.model.records import Finding
from kbv.processes.candidate import CandidateProcess, cpu_spent_ms


@dataclass
class PausedCpu:
    """What the stopped tree spent over a verification's baseline blocks (ms)."""

    blocks: list[list[float]] = field(default_factory=list)  #: per block it ran in, its CPU ms per try
    cpu_ms: float = 0.0  #: its CPU over every try of every block
    wall_ms: float = 0.0  #: those tries' wall
    confirm: list[tuple[float, float]] = field(default_factory=list)  #: (CPU ms, wall ms) per confirmation window
    others: set[int] = field(default_factory=set)  #: pids in the worker's tree besides the worker, over the blocks

    def evidence(self) -> dict:
        return {"candidate_cpu": self.cpu_ms, "wall": self.wall_ms, "blocks_that_ran": self.blocks,
                "confirm_windows": [list(c) for c in self.confirm], "other_processes": sorted(self.others)}

    def finding(self) -> Finding | None:
        return ran_while_paused(self.blocks, total_ms=(self.cpu_ms, self.wall_ms), confirm=self.confirm)

    def processes_finding(self) -> Finding | None:
        return candidate_processes(sorted(self.others))

    def needs_confirmation(self) -> bool:
        """The stopped tree spent over the slack over the blocks, and that is not proof yet."""
        return self.cpu_ms > PAUSED_CPU_SLACK_MS and not is_proof(self.finding())


def time_paused(worker: CandidateProcess, paused: PausedCpu, block: Callable[[], Any]) -> Any:
    """``block()`` (one baseline's timed calls) with ``worker``'s tree stopped, again while the tree
    spent over :data:`PAUSED_CPU_SLACK_MS` of CPU in it (up to :data:`PAUSED_TRIES` tries); the
    figures go to ``paused``. Returns the last try's result."""
    ran: list[float] = []
    for _ in range(PAUSED_TRIES):
        with worker.paused():  # nothing of the candidate's runs beside the baselines
            before, t0 = worker.tree_cpu(), time.perf_counter()
            result = block()
            after = worker.tree_cpu()
            spent, wall = cpu_spent_ms(before, after), (time.perf_counter() - t0) * 1e3
        paused.others |= {p for p in (*before[1], *after[1]) if isinstance(p, int) and p != worker.proc.pid}
        paused.cpu_ms += spent
        paused.wall_ms += wall
        if spent <= PAUSED_CPU_SLACK_MS:
            break
        ran.append(spent)
    if ran:
        paused.blocks.append(ran)
    return result


#: seconds of one confirmation window (kbv choice: many scheduler ticks, 4 ms; short beside a job).
CONFIRM_WINDOW_S = 0.05


def confirm_paused(worker: CandidateProcess, paused: PausedCpu, trigger: Callable[[], Any],
                   tries: int = PAUSED_TRIES, window_s: float = CONFIRM_WINDOW_S) -> None:
    """``tries`` windows: ``trigger()`` (one untimed call of the candidate's), then its tree stopped
    for ``window_s`` with nothing else running; each window's (CPU ms, wall ms) to ``paused.confirm``.
    An idle stopped tree spends nothing there."""
    for _ in range(tries):
        trigger()
        with worker.paused():
            before, t0 = worker.tree_cpu(), time.perf_counter()
            time.sleep(window_s)
            spent, wall = cpu_spent_ms(before, worker.tree_cpu()), (time.perf_counter() - t0) * 1e3
        paused.confirm.append((spent, wall))


__all__ = ["PausedCpu", "time_paused", "confirm_paused", "CONFIRM_WINDOW_S"]
