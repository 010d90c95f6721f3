"""``kbv run --executor ray``: each verification is a Ray task on some node of a Ray cluster.

The driver (``kbv run``) plans the batch, claims each job in its SQLite store and submits one task
per job; each task runs the job through an :class:`~kbv.batch.evaluator.Evaluator` on its node (a
reference worker and a sandboxed candidate worker there, exactly as a local lane does; the Ray
worker process keeps its evaluator for its next tasks, see :func:`_evaluator`) and returns
the verdict as JSON, which the driver writes to the store as it arrives
(:func:`kbv.batch.runner.run_batch`). Nothing but the driver writes to the store.

Resources: a task asks for one CPU, and on cuda for one GPU (``num_gpus=1``): Ray sets the task's
``CUDA_VISIBLE_DEVICES`` to that GPU, which the reference worker and its candidates inherit, so one
timing runs per GPU at a time.

Failures: a task whose worker process dies (killed, out of memory) or whose node is lost is
retried by Ray (``max_retries``, :data:`MAX_RETRIES`); its verdict still reaches the store once,
since the driver writes only the one result ``ray.get`` returns, keyed by the job (one row per job
key, written in one transaction with its ``done`` state). A task that fails for good, or that
exceeds its deadline (every retry's worst-case job time, :func:`task_deadline_s`, plus time waiting
for resources), is cancelled and its job released: an internal error (exit 3), retried by the next
``kbv run``. When the driver dies, Ray ends its tasks (and the reference workers die with the
tasks' workers), and the store gives the jobs it held to the next run (dead owner).

Files: a task reads the problem, candidate and hidden-test files at their paths on its node when
they hold the same bytes (a shared filesystem); otherwise the driver's copies, sent with the task,
are written under the node's kbv cache (``<cache>/ray-files/<sha256>/``) and verified there (a
candidate that reads files beside itself then needs the shared filesystem). The verdict names the
driver's paths either way.

Requires the ``ray`` extra (``pip install 'kbv[ray]'``) on the driver and on every node, with the
same kbv and torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from pathlib import Path
from typing import Any, Callable

from kbv.batch.evaluator import EvaluationError, job_timeout_s
from kbv.intake.problems import ProblemError
from kbv.model.records import EvalConfig, verdict_from_json

#: Ray retries of a task whose worker process or node died.
MAX_RETRIES = 3
#: seconds a task may wait for resources (a busy cluster) on top of its own deadline.
QUEUE_SLACK_S = 3600.0


def task_deadline_s(config: EvalConfig, problem=None) -> float:
    """Seconds after submission when the driver gives up on a task: every try's worst-case job
    time (:func:`kbv.batch.evaluator.job_timeout_s`, ``problem``'s workloads counted) plus
    :data:`QUEUE_SLACK_S`."""
    return (MAX_RETRIES + 1) * job_timeout_s(config, problem) + QUEUE_SLACK_S


def _local_file(path: str, sha256: str, data: bytes | None) -> str:
    """``path`` when it holds the bytes of ``sha256`` here, else a copy of ``data`` under the
    node's kbv cache (the same name, so the problem's level/id parsing is unchanged)."""
    p = Path(path)
    try:
        if hashlib.sha256(p.read_bytes()).hexdigest() == sha256:
            return path
    except OSError:
        pass
    if data is None or hashlib.sha256(data).hexdigest() != sha256:
        raise FileNotFoundError(f"{path} is not on this node and no matching copy was sent")
    from kbv.model.paths import cache_root

    d = cache_root() / "ray-files" / sha256[:32]
    d.mkdir(parents=True, exist_ok=True)
    target = d / p.name
    if not target.exists():
        tmp = d / f".{p.name}.{time.monotonic_ns()}"
        tmp.write_bytes(data)
        tmp.replace(target)
    return str(target)


_EVALUATOR: dict = {}  #: this Ray worker process's evaluator, keyed by (device, its GPUs)


def _evaluator(device: str):
    """The evaluator of this Ray worker process, kept across its tasks: the reference worker's
    start (torch import, CUDA initialisation) and the problem's reference model are paid once per
    worker process, not per task (secrets are drawn per verification either way). A task given
    other GPUs than the one that started it (``CUDA_VISIBLE_DEVICES``, set by Ray per task) gets a
    fresh one, so a reference worker never runs on a GPU Ray did not give its task."""
    import os

    from kbv.batch.evaluator import Evaluator

    key = (device, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if key not in _EVALUATOR:
        for ev in _EVALUATOR.values():
            ev.close()
        _EVALUATOR.clear()
        _EVALUATOR[key] = Evaluator(device)
    return _EVALUATOR[key]


def verify_on_node(problem, candidate, config: EvalConfig, hidden_tests: str | None,
                   files: dict[str, bytes]) -> dict[str, Any]:
    """The body of one Ray task: verify ``candidate`` against ``problem`` on this node.

    Returns:
        ``{"verdict": JSON text}``, ``{"problem_error": fault}`` (the problem file is broken) or
        ``{"error": text}`` (kbv failed on the node: the driver releases the job).
    """
    try:
        lp = dataclasses.replace(problem, path=_local_file(problem.path, problem.sha256, files.get("problem")))
        lc = dataclasses.replace(candidate, path=_local_file(candidate.path, candidate.sha256,
                                                             files.get("candidate")))
        ht = None
        if hidden_tests is not None:
            data = files.get("hidden_tests")
            ht = _local_file(hidden_tests, hashlib.sha256(data).hexdigest() if data else "", data)
    except (OSError, ValueError) as exc:
        return {"error": f"files on node: {exc}"}
    try:
        verdict = _evaluator(config.device).evaluate(lp, lc, config, hidden_tests=ht)
    except ProblemError as exc:
        return {"problem_error": exc.fault}
    except EvaluationError as exc:
        return {"error": str(exc)}
    from kbv.model.records import to_json

    verdict = dataclasses.replace(verdict, problem=problem, candidate=candidate)  # the driver's paths
    return {"verdict": to_json(verdict, indent=None)}


def _read(path: str | None) -> bytes | None:
    try:
        return Path(path).read_bytes() if path else None
    except OSError:
        return None


class RayLane:
    """All of a Ray cluster as one lane of the batch dispatcher, with ``capacity`` tasks in flight.

    :meth:`submit` sends a job as a task; a watcher thread posts each result
    (``("done", lane, job, verdict | exception)``) as it arrives.
    """

    def __init__(self, config: EvalConfig, post: Callable, hidden: dict, *, capacity: int):
        import ray

        self._ray, self.config, self._post, self._hidden = ray, config, post, hidden or {}
        self.name, self.capacity, self.busy = "ray", max(1, capacity), 0
        self._remote = ray.remote(verify_on_node).options(
            num_cpus=1, num_gpus=1 if config.device == "cuda" else 0, max_retries=MAX_RETRIES,
            retry_exceptions=False, name="kbv_verify")
        self._inflight: dict = {}  #: ObjectRef -> (job, deadline)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kbv-ray-watch", daemon=True)
        self._thread.start()

    def submit(self, pj) -> None:
        ht = self._hidden.get((pj.problem.level, pj.problem.problem_id))
        ht = str(ht) if ht else None
        files = {k: v for k, v in (("problem", _read(pj.problem.path)), ("candidate", _read(pj.candidate.path)),
                                   ("hidden_tests", _read(ht))) if v is not None}
        self.busy += 1
        ref = self._remote.remote(pj.problem, pj.candidate, self.config, ht, files)
        with self._lock:
            self._inflight[ref] = (pj, time.monotonic() + task_deadline_s(self.config, pj.problem))

    def _result(self, pj, ref):
        try:
            reply = self._ray.get(ref, timeout=60)
        except Exception as exc:  # noqa: BLE001 - retries exhausted, node lost, cancelled
            return EvaluationError(f"ray task failed: {type(exc).__name__}: {str(exc).strip()[:2000]}")
        if "verdict" in reply:
            return verdict_from_json(reply["verdict"])
        if "problem_error" in reply:
            return ProblemError(pj.problem.path, reply["problem_error"])
        return EvaluationError(f"on the ray node: {reply.get('error', 'no result')}")

    def _watch(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                refs = list(self._inflight)
            if not refs:
                self._stop.wait(0.2)
                continue
            done, _ = self._ray.wait(refs, num_returns=1, timeout=1.0)
            now = time.monotonic()
            with self._lock:
                late = [r for r, (_, deadline) in self._inflight.items() if deadline < now and r not in done]
            for ref in late:
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished
                    pass
            for ref in [*done, *late]:
                with self._lock:
                    pj, _ = self._inflight.pop(ref, (None, 0))
                if pj is None:
                    continue
                res = (EvaluationError(f"ray task did not finish within {task_deadline_s(self.config, pj.problem):g} s; "
                                       "cancelled") if ref in late else self._result(pj, ref))
                if not self._stop.is_set():
                    self._post(("done", self, pj, res))

    def close(self, abort: bool = False) -> None:  # noqa: ARG002 - tasks in flight are cancelled either way
        """Cancel the tasks in flight (their jobs are released by the dispatcher) and stop watching."""
        self._stop.set()
        self._thread.join(timeout=30)
        with self._lock:
            refs = list(self._inflight)
            self._inflight.clear()
        for ref in refs:
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001
                pass


class RayExecutor:
    """Connects to (or starts) a Ray cluster for one batch; :meth:`lanes` is the
    ``lane_factory`` of :func:`kbv.batch.runner.run_batch`. Use as a context manager: a cluster it started
    is shut down on exit, one it joined is left running (only this driver's tasks end).

    Args:
        config: the batch's configuration (its device decides the tasks' resources).
        hidden: the plan's hidden test files (``BatchPlan.hidden_tests``).
        address: a running cluster's address (``ray start --head`` prints it; ``auto`` finds a
            local one); None starts a local cluster on this machine.
        num_cpus: CPUs of a local cluster (None: Ray's default, every core).
        max_in_flight: tasks submitted at once (None: twice the cluster's GPUs, or CPUs on cpu).
    Raises:
        ImportError: ray is not installed (``pip install 'kbv[ray]'``).
    """

    def __init__(self, config: EvalConfig, hidden: dict | None = None, *, address: str | None = None,
                 num_cpus: int | None = None, max_in_flight: int | None = None):
        import ray

        self.config, self.hidden, self._ray = config, hidden or {}, ray
        self._started = not ray.is_initialized()
        if self._started:
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is None and num_cpus is not None:
                kw["num_cpus"] = num_cpus
            # a local cluster's workers inherit this process's environment (KBV_CACHE_DIR, PATH)
            ray.init(address=address, **kw)
        key = "GPU" if config.device == "cuda" else "CPU"
        slots = int(ray.cluster_resources().get(key, 0))
        if slots < 1:
            self.close()
            raise RuntimeError(f"the Ray cluster has no {key} resources for --device {config.device}")
        self.max_in_flight = max_in_flight or 2 * slots

    def lanes(self, work, post) -> list[RayLane]:  # noqa: ARG002 - the tasks run kbv's own work
        return [RayLane(self.config, post, self.hidden, capacity=self.max_in_flight)]

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()

    def __enter__(self) -> "RayExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["RayExecutor", "RayLane", "verify_on_node", "task_deadline_s", "MAX_RETRIES"]
