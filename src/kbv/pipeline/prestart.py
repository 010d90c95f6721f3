"""The next job's candidate workers, started while the current job runs (kbv run's lanes): its own,
and a second for its secret shape (:mod:`kbv.pipeline.secret_shapes`) when the lane's jobs judge one.

The reference worker asks its lane which candidate comes next (the lane holds its next job beside
the current one) and spawns that candidate's worker: a fresh sandboxed process of the next
candidate's own build directory that imports torch and kbv's harness, applies the eager-fp32 flags
once, starts CUDA and then waits; the candidate file is not read until its own job loads it. It
asks as a job starts when that job's own worker was started early (then nothing else is starting),
else once the job's candidate is loaded (so the two start-ups do not compete). A ``Ping`` sent at
spawn marks it ready (its ``Pong`` comes once the start-up is done). While the current job's timed
rounds and sync pass run, the early worker is stopped (SIGSTOP of its tree, with the build pool's
processes: :mod:`kbv.processes.quiet`), so its start-up work never runs beside a timed call; it
overlaps the current job's load, correctness, vetting, profile and memory stages instead.

When the next job arrives for that candidate, :meth:`Prestarted.take` hands the worker over once
its Pong arrives; any other job, or a worker that died or did not answer, gets a fresh spawn as
before. Nothing secret is in the early worker: seeds, inputs and reference outputs are drawn by
the job that uses it, after its load, as for a fresh worker (docs/scale.md).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from kbv.intake.candidates import backend_modules, build_dir
from kbv.model.records import CandidateRef
from kbv.processes.candidate import CandidateProcess
from kbv.processes.quiet import TimingFlag, continue_all, stop_trees
from kbv.sandbox import protocol

#: seconds a job waits for its early worker's start-up to finish (a fresh spawn would take as long).
READY_TIMEOUT_S = 300.0
#: seconds a started worker has to answer a Ping when its job takes it (kbv choice: an idle worker
#: answers in milliseconds; one that does not is replaced by a fresh spawn).
ANSWER_TIMEOUT_S = 10.0


def _key(candidate: CandidateRef, device: str) -> tuple:
    return (str(build_dir(candidate, device)), device)


class Prestarted:
    """The next job's early candidate workers (see the module doc): its own, and a second for its
    secret shape (:mod:`kbv.pipeline.secret_shapes`) when the lane's jobs judge one."""

    def __init__(self) -> None:
        self._slot: tuple[tuple, CandidateProcess, CandidateProcess | None] | None = None
        self._shape: CandidateProcess | None = None  #: the taken job's shape worker, until taken

    @staticmethod
    def _spawn(candidate: CandidateRef, device: str) -> CandidateProcess | None:
        worker = CandidateProcess(device=device, build_dir=build_dir(candidate, device),
                                  preload=backend_modules(candidate.backend))
        try:
            worker.send(protocol.Ping(), phase="start")
        except Exception:  # noqa: BLE001 - the job spawns its own
            worker.close()
            return None
        return worker

    def start(self, candidate: CandidateRef, device: str, shape: bool = False) -> None:
        """Spawn the worker ``candidate``'s job will use, and with ``shape`` the one its secret
        shape will (those already started are closed). The two start alike: nothing tells a
        worker which it will be."""
        self.close()
        main = self._spawn(candidate, device)
        if main is None:
            return
        self._slot = (_key(candidate, device), main, self._spawn(candidate, device) if shape else None)

    @staticmethod
    def _ready(worker: CandidateProcess | None, timeout: float) -> CandidateProcess | None:
        """``worker`` once its start-up Pong arrives and it answers a second Ping within
        :data:`ANSWER_TIMEOUT_S`; None (and closed) when it died or did not answer. Its tree is
        continued first: the candidate of the job before (a cuda worker keeps kbv's uid) could stop
        an idle early worker, which would have made the next job's honest load time out."""
        if worker is None:
            return None
        if not worker.proc.is_alive() or not worker.proc.pid:
            worker.close()
            return None
        try:
            worker.jail.resume(worker.jail.tree(worker.proc.pid))
            first = worker.receive(phase="start", timeout=timeout)
            worker.send(protocol.Ping(), phase="start")
            second = worker.receive(phase="start", timeout=ANSWER_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - died or hung during start-up: not the candidate's doing
            worker.close()
            return None
        if not (isinstance(first, protocol.Pong) and isinstance(second, protocol.Pong)):
            worker.close()
            return None
        return worker

    def take(self, candidate: CandidateRef, device: str, timeout: float = READY_TIMEOUT_S) -> CandidateProcess | None:
        """The early worker if it was started for ``candidate`` on ``device`` and has finished
        its start-up (waits for it), else None (any early worker is closed). Its shape worker is
        kept for :meth:`take_shape`."""
        slot, self._slot = self._slot, None
        self._close_shape()
        if slot is None:
            return None
        key, worker, shape = slot
        if key != _key(candidate, device):
            for w in (worker, shape):
                if w is not None:
                    w.close()
            return None
        self._shape = shape
        ready = self._ready(worker, timeout)
        if ready is None:
            self._close_shape()
        return ready

    def take_shape(self, timeout: float = READY_TIMEOUT_S) -> CandidateProcess | None:
        """The secret shape's early worker of the job :meth:`take` served, ready, or None."""
        shape, self._shape = self._shape, None
        return self._ready(shape, timeout)

    def pids(self) -> list[int]:
        """The early workers' pids (empty when none is running)."""
        workers = [*(self._slot[1:] if self._slot else ()), self._shape]
        return [w.proc.pid for w in workers if w is not None and w.proc.is_alive() and w.proc.pid]

    def _close_shape(self) -> None:
        if self._shape is not None:
            self._shape.close()
            self._shape = None

    def close(self) -> None:
        if self._slot is not None:
            for w in self._slot[1:]:
                if w is not None:
                    w.close()
            self._slot = None
        self._close_shape()


@contextlib.contextmanager
def quiet(flag_dir: str | None, early: Prestarted) -> Iterator[TimingFlag]:
    """The timed part of a verification: the lane's timing flag up (the build pool stops its
    builds, :class:`kbv.processes.quiet.TimingFlag`) and the early worker stopped."""
    with TimingFlag(flag_dir) as flag:
        stopped = stop_trees(early.pids())
        try:
            yield flag
        finally:
            continue_all(reversed(stopped))


__all__ = ["Prestarted", "quiet", "READY_TIMEOUT_S"]
