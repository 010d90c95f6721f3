"""Whose code could run when the reference worker died: the candidate's, or only kbv's.

A candidate that kills the reference worker (its parent) would turn its own verdict into an
EVAL_ERROR, kbv's failure, which is retried and never counts against a run. The orchestrator
therefore shares with the reference worker a :class:`Cell` in anonymous shared memory that no
candidate can reach (it lives in the two trusted processes only): the number of candidate
workers whose code can run now (loaded and not stopped: :class:`kbv.processes.candidate.CandidateProcess`
counts them) and the phase of the last request sent to one. When the reference worker then dies
of a signal, :func:`charged` decides who pays; a prestarted worker (:mod:`kbv.pipeline.prestart`)
has loaded no candidate code and does not count.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

#: bytes of the phase name kept (``forward``, ``timing``, ...).
PHASE_BYTES = 48

_CELL: "Cell | None" = None  #: this process's cell (the reference worker's, after :func:`install`).


@dataclass(frozen=True)
class Cell:
    """The shared state: ``running`` (a ``c_int``) and ``last_phase`` (``c_char * PHASE_BYTES``),
    both :mod:`multiprocessing.sharedctypes` objects, handed to the spawned worker as arguments."""

    running: object
    last_phase: object

    @classmethod
    def create(cls, ctx) -> "Cell":
        """A fresh cell from multiprocessing context ``ctx`` (unlocked: one writer, read after it died)."""
        return cls(ctx.RawValue(ctypes.c_int, 0), ctx.RawArray(ctypes.c_char, PHASE_BYTES))

    def read(self) -> tuple[int, str]:
        """(candidate workers whose code could run, phase of the last request sent to one)."""
        return int(self.running.value), bytes(self.last_phase.value).decode("ascii", "replace")


def install(cell: Cell | None) -> None:
    """Make ``cell`` this process's (the reference worker's entry point calls it first)."""
    global _CELL
    _CELL = cell


def running(delta: int) -> None:
    """One more (+1) or one fewer (-1) candidate worker whose code can run now (no-op without a cell)."""
    if _CELL is not None:
        _CELL.running.value = max(0, _CELL.running.value + delta)


def phase(name: str) -> None:
    """Record the phase of a request sent to a worker whose candidate code runs."""
    if _CELL is not None:
        _CELL.last_phase.value = name.encode("ascii", "replace")[:PHASE_BYTES - 1]


def entry(main, cell: Cell, conn, device: str) -> None:
    """The reference worker's entry point: install ``cell``, then run ``main(conn, device)``."""
    install(cell)
    main(conn, device)


def charged(*, candidate_running: int, oom_killed: bool, low_memory: bool, oom_adj_raised: bool = False) -> bool:
    """Whether a reference worker killed by a signal during a verification is charged to the
    candidate: some candidate code could run then (``candidate_running`` > 0, :meth:`Cell.read`)
    and memory explains nothing: neither did the kernel's OOM killer name it (``oom_killed``) nor
    was host memory nearly gone (``low_memory``, kbv's own sample): kbv's failure then, unless
    the reference worker's ``oom_score_adj`` rose during the job (``oom_adj_raised``: kbv never
    raises it; a candidate can, through ``/proc``, to make the OOM killer pick the reference
    worker).

    With a uid of its own the candidate cannot signal the reference worker
    (:mod:`kbv.sandbox.limits`), so this matters where kbv runs without root. A death whose cause
    kbv cannot see (a crash of kbv's own code while the candidate's ran, a kill by another user
    of the same uid) is then the candidate's too: it could have sent that signal, and the kernel
    does not say who sent a SIGKILL."""
    return candidate_running > 0 and (oom_adj_raised or not (oom_killed or low_memory))
