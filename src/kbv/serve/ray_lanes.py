"""``kbv serve --executor ray``: the service's lanes as Ray tasks on a Ray cluster.

Each :class:`RayServeLane` holds one job at a time, as a local lane does; the service keeps
``--ray-tasks`` of them, so at most that many verifications run on the cluster at once. A lane's
job is one Ray task (:func:`serve_on_node`, one CPU, and one GPU on cuda: Ray sets the task's
``CUDA_VISIBLE_DEVICES``, which its reference worker and candidates inherit). The task verifies the
candidate's source on its node exactly as a local lane does (:func:`kbv.generate.refine.score_candidate`
through the node's evaluator, a reference worker and a sandboxed candidate worker there, kept by
the Ray worker process across tasks: :func:`kbv.batch.executors.ray_executor._evaluator`) and
returns the verdict as JSON; the server writes it to its SQLite queue. Nothing on a node writes
the queue, so a task Ray retries (its worker died: :data:`kbv.batch.executors.ray_executor.MAX_RETRIES`)
still stores one verdict, and a task past its deadline is cancelled and its job ends as kbv's error.

The problem file travels with the task (its bytes, checked against its SHA-256 on the node and
kept under the node's kbv cache when the node lacks the file), so nodes need no shared filesystem.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Any, Callable

from kbv.batch.executors.ray_executor import MAX_RETRIES, _evaluator, _local_file, task_deadline_s


def serve_on_node(problem: Any, problem_bytes: bytes, source: str, config_dict: dict) -> tuple:
    """The body of one Ray task: ``("done", verdict JSON, status)``, or ``("error", one line, None)``
    (the problem is broken, or kbv failed on the node)."""
    from kbv.api import make_config
    from kbv.generate.refine import score_candidate
    from kbv.intake.problems import ProblemError
    from kbv.intake.sources import source_file
    from kbv.model.records import to_json

    try:
        local = dataclasses.replace(problem, path=_local_file(problem.path, problem.sha256, problem_bytes))
        config = make_config(config_dict)
        _, verdict = score_candidate(local, source, config, _evaluator(config.device),
                                     path=source_file(source, "candidate"))
    except ProblemError as exc:
        return "error", f"problem {problem.name}: {exc.fault}", None
    except Exception as exc:  # noqa: BLE001 - kbv's failure on the node, stored as the job's error
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return "error", f"kbv failed on the ray node: {type(exc).__name__}: {first}", None
    verdict = dataclasses.replace(verdict, problem=problem)  # the server's path
    return "done", to_json(verdict, indent=None), verdict.status.value


class RayServeLane:
    """One job at a time on the Ray cluster, the interface of a local lane
    (:class:`kbv.batch.executors.lanes.ThreadLane`): :meth:`submit`, ``post(("done", lane, job,
    result))`` when it ends, :attr:`busy_s`, :meth:`close`.

    Args:
        index: the lane's number (its name is ``ray-<index>``).
        resolve: job → (the problem's :class:`~kbv.model.records.ProblemRef`, its bytes), or None
            when it is no longer registered.
        post: the service's result callback.
        device: ``cpu`` or ``cuda`` (a cuda task asks Ray for one GPU).
    """

    def __init__(self, index: int, resolve: Callable, post: Callable, device: str):
        import ray

        self._ray, self._resolve, self._post = ray, resolve, post
        self.name, self.capacity, self.busy, self.busy_s = f"ray-{index}", 1, 0, 0.0
        self._remote = ray.remote(serve_on_node).options(
            num_cpus=1, num_gpus=1 if device == "cuda" else 0, max_retries=MAX_RETRIES, retry_exceptions=False,
            name="kbv_serve_verify")
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name=f"kbv-lane-{self.name}", daemon=True)
        self._thread.start()

    def submit(self, job) -> None:
        self.busy += 1
        self._queue.put(job)

    def _run(self, job) -> tuple:
        from kbv.api import make_config

        found = self._resolve(job)
        if found is None:
            return "error", f"problem sha256:{job.problem} is no longer registered on this server", None
        problem, data = found
        ref = self._remote.remote(problem, data, job.candidate, job.config)
        try:
            return tuple(self._ray.get(ref, timeout=task_deadline_s(make_config(job.config))))
        except Exception as exc:  # noqa: BLE001 - retries exhausted, node lost, past the deadline
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished
                pass
            return "error", f"kbv failed: ray task: {type(exc).__name__}: {str(exc).strip()[:300]}", None

    def _serve(self) -> None:
        while (job := self._queue.get()) is not None:
            t0 = time.monotonic()
            result = self._run(job)
            self.busy_s += time.monotonic() - t0
            self.busy -= 1
            self._post(("done", self, job, result))

    def close(self, abort: bool = False) -> None:
        """End the lane after its job in flight (it stays a Ray task until it ends or is cancelled)."""
        self._queue.put(None)
        self._thread.join(timeout=1 if abort else 60)


__all__ = ["RayServeLane", "serve_on_node"]
