"""Lanes of ``kbv run``: each verifies one job at a time with a reference worker of its own.

``--gpus all|0,1`` gives one lane per GPU: the lane's reference worker is spawned with
``CUDA_VISIBLE_DEVICES`` set to that GPU alone, and the candidate workers it spawns inherit it
(:func:`kbv.sandbox.worker_env.worker_environment` keeps it), so a lane's candidates see only their GPU and a
GPU never has two timings at once. ``--device cpu --lanes N`` gives N CPU lanes (which share the
cores: their timings disturb each other, their verdicts do not depend on it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kbv.batch.evaluator import Evaluator


@dataclass(frozen=True)
class LaneSpec:
    """One lane: its name, device and the environment its reference worker is spawned with."""

    name: str
    device: str
    env: dict = field(default_factory=dict)  #: variables set over ``os.environ`` for its workers.


class LaneEvaluator(Evaluator):
    """An :class:`~kbv.batch.evaluator.Evaluator` whose reference worker is spawned with the lane's
    environment (``CUDA_VISIBLE_DEVICES``). Make and use it from one thread that lives as long as
    it (the worker dies with the thread that spawned it, ``PR_SET_PDEATHSIG``)."""

    def __init__(self, spec: LaneSpec):
        super().__init__(spec.device)
        self.spec = spec

    def _worker(self):
        from kbv.pipeline.reference_worker import reference_main
        from kbv.processes.reference import ReferenceProcess
        from kbv.processes.handles import environ_set

        if self._ref is None or not self._ref.proc.is_alive():
            if self._ref is not None:
                self._ref.close()
            with environ_set({**os.environ, **self.spec.env}):  # inherited at spawn, then restored
                self._ref = ReferenceProcess(self.device, reference_main)
        return self._ref


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries: that variable's entries
    when set, else ``0 .. torch.cuda.device_count() - 1``."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def parse_gpus(text: str, available: list[str] | None = None) -> list[str]:
    """``--gpus`` → the ``CUDA_VISIBLE_DEVICES`` entry of each lane. ``all`` is every visible GPU;
    ``0,1`` picks by index among the visible ones (so ``--gpus 0`` under
    ``CUDA_VISIBLE_DEVICES=3,5`` is GPU 3).

    Raises:
        ValueError: not ``all`` or a list of distinct indices of visible GPUs, or no GPU visible.
    """
    available = visible_gpus() if available is None else available
    if not available:
        raise ValueError("--gpus: no CUDA GPU is visible")
    if text.strip() == "all":
        return list(available)
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if not part.isdigit() or int(part) >= len(available):
            raise ValueError(f"--gpus: {part!r} is not a visible GPU index (0..{len(available) - 1}) or 'all'")
        if available[int(part)] in out:
            raise ValueError(f"--gpus: GPU {part} given twice")
        out.append(available[int(part)])
    if not out:
        raise ValueError("--gpus: no GPU given")
    return out


def gpu_lanes(gpus: list[str]) -> list[LaneSpec]:
    """One cuda lane per ``CUDA_VISIBLE_DEVICES`` entry. Indices are in PCI bus order
    (``CUDA_DEVICE_ORDER=PCI_BUS_ID`` unless set already), which is NVML's order, so the lane's
    throttle watch (:mod:`kbv.batch.executors.throttle`) reads the lane's own GPU."""
    order = {"CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")}
    return [LaneSpec(f"gpu{g}", "cuda", {"CUDA_VISIBLE_DEVICES": g, **order}) for g in gpus]


def cpu_lanes(n: int) -> list[LaneSpec]:
    """``n`` CPU lanes.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError("--lanes must be at least 1")
    return [LaneSpec(f"cpu{i}", "cpu") for i in range(n)]


__all__ = ["LaneSpec", "LaneEvaluator", "visible_gpus", "parse_gpus", "gpu_lanes", "cpu_lanes"]


# Lane runners: what the batch dispatcher (:func:`kbv.batch.runner.run_batch`) hands jobs to ---------------

class InlineLane:
    """Runs each job in the calling thread (the single-lane ``kbv run``, and a given evaluator)."""

    capacity = 1

    def __init__(self, evaluator, work, post, *, own: bool = False):
        self.name, self.evaluator, self._work, self._post, self._own = "main", evaluator, work, post, own
        self.busy = 0
        self.busy_s = 0.0  #: seconds spent on jobs.

    def submit(self, pj) -> None:
        import time

        self.busy += 1
        t0 = time.monotonic()
        res = self._work(self.evaluator, pj)
        self.busy_s += time.monotonic() - t0
        self._post(("done", self, pj, res))

    def close(self, abort: bool = False) -> None:
        if self._own or abort:
            self.evaluator.close(abort=abort)


class ThreadLane:
    """Runs jobs one at a time in a thread of its own, with a :class:`LaneEvaluator` made in that
    thread (its reference worker lives as long as the thread).

    With ``prestart`` the lane holds one job beside the one in flight (``capacity`` 2) and, asked
    once the current candidate is loaded, names that next job's candidate, whose worker the
    reference worker starts early (:mod:`kbv.pipeline.prestart`); ``work(evaluator, job, peek)``
    gets ``peek``, the function that answers. The answer is the dispatcher's: ``peek`` waits until
    the dispatcher has seen every job this lane finished before the one in flight and has handed
    the lane what it had after them (:meth:`offered`), so how fast the dispatcher runs (a loaded
    machine) does not decide whether the next job is named.
    """

    def __init__(self, spec: LaneSpec, work, post, *, evaluator_factory=None, prestart: bool = False):
        import queue
        import threading

        self.name, self.spec, self._work, self._post = spec.name, spec, work, post
        self._factory = evaluator_factory or LaneEvaluator  #: spec -> evaluator, called in the lane's thread
        self.capacity = 2 if prestart else 1
        self.busy_s = 0.0  #: seconds spent on jobs.
        self.busy = 0
        self.evaluator: LaneEvaluator | None = None
        self._queue: queue.Queue = queue.Queue()
        self._aborted = False  #: close(abort=True): no job starts any more (the one held behind included)
        self._turn = threading.Condition()
        self._submitted = 0  #: jobs handed to the lane (dispatcher's thread).
        self._started = 0  #: jobs the lane's thread started.
        #: jobs the dispatcher had seen finish when it last handed the lane what it had (``offered``);
        #: -1 before its first round
        self._answered = -1
        self._thread = threading.Thread(target=self._serve, name=f"kbv-lane-{spec.name}", daemon=True)
        self._thread.start()

    def submit(self, pj) -> None:
        self.busy += 1
        self._submitted += 1
        self._queue.put(pj)

    def offered(self) -> None:
        """Called by the dispatcher after each round in which it handed the lanes the jobs it had:
        the jobs this lane finished that the dispatcher has seen (handed minus ``busy``) are
        answered, and a ``peek`` waiting for them may read the queue."""
        with self._turn:
            self._answered = self._submitted - self.busy
            self._turn.notify_all()

    def _serve(self) -> None:
        import dataclasses
        import time

        from kbv.batch.executors.throttle import ThrottleWatch
        from kbv.model.records import Verdict

        self.evaluator = self._factory(self.spec)
        gpu = self.spec.env.get("CUDA_VISIBLE_DEVICES") if self.spec.device == "cuda" else None
        watch = ThrottleWatch(gpu) if gpu is not None else None
        try:
            while (pj := self._queue.get()) is not None and not self._aborted:
                if watch is not None:
                    watch.start()
                self._started += 1
                t0 = time.monotonic()
                res = self._work(self.evaluator, pj, self._peek if self.capacity > 1 else None)
                self.busy_s += time.monotonic() - t0
                seen = watch.stop() if watch is not None else None
                if seen is not None and isinstance(res, Verdict):
                    res = dataclasses.replace(res, evidence={**res.evidence, "gpu_throttle": seen})
                self._post(("done", self, pj, res))
        finally:
            self.evaluator.close()

    def _peek(self, wait_s: float = 10.0):
        """The candidate of the job queued behind the one in flight, or None (the dispatcher had
        none for this lane). Waits, up to ``wait_s``, until the dispatcher has answered the jobs
        the lane finished before this one (:meth:`offered`): asked as a job starts, the dispatcher
        may still be storing the verdict before it and handing over the next job; past ``wait_s``
        the answer is what the queue holds then (only the early start is lost)."""
        with self._turn:
            self._turn.wait_for(lambda: self._answered >= self._started - 1, timeout=wait_s)
        with self._queue.mutex:
            nxt = self._queue.queue[0] if self._queue.queue else None
        return None if nxt is None else nxt.candidate

    def close(self, abort: bool = False) -> None:
        """End the lane after its job in flight (``abort``: kill its reference worker now, so the
        job in flight ends as a failure the dispatcher no longer waits for, and the job held behind
        it is dropped: it would start a fresh reference worker and run to its end)."""
        self._aborted = self._aborted or abort
        with self._turn:  # the dispatcher hands nothing more: a waiting peek reads the queue now
            self._answered = float("inf")
            self._turn.notify_all()
        ref = getattr(self.evaluator, "_ref", None)
        if abort and ref is not None:
            try:
                ref.proc.kill()
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._queue.put(None)
        self._thread.join(timeout=60)


__all__ += ["InlineLane", "ThreadLane"]
