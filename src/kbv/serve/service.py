"""The verification side of ``kbv serve``: the problems it knows, the lanes that verify, and the
dispatcher between the queue (:mod:`kbv.serve.queue`) and the lanes. No HTTP here
(:mod:`kbv.serve.app` is the web side).

Each lane is a :class:`kbv.batch.executors.lanes.ThreadLane`: one job at a time, with a reference
worker of its own (one per GPU with ``--gpus``, or CPU lanes). A job is verified as ``kbv refine``
verifies a turn (:func:`kbv.generate.refine.score_candidate`): the candidate text is written to a
content-addressed file (:func:`kbv.intake.sources.source_file`), statically vetted (a refusal is
``COMPILE_ERROR`` without running) and run only in kbv's sandboxed candidate worker; this process
never imports it. The reward is :func:`kbv.generate.feedback.reward` of the stored verdict,
computed when read.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kbv.batch.executors.lanes import LaneSpec, ThreadLane
from kbv.intake.layout import vet_problems
from kbv.intake.problems import ProblemError, load_problem
from kbv.intake.sources import source_file
from kbv.model.records import ProblemRef
from kbv.serve.queue import Job, JobQueue
from kbv.serve.requests import BadRequest


def problem_address(ref: ProblemRef) -> str:
    """A registered problem's name: ``level<L>/<file stem>`` (``level1/19_ReLU``), or the stem
    when its folder names no level."""
    stem = Path(ref.path).stem
    return f"level{ref.level}/{stem}" if ref.level is not None else stem


class Registry:
    """The problems a server verifies against, by name and by content hash (``sha256:<hex>`` or the
    bare 64 hex digits). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_name: dict[str, ProblemRef] = {}
        self.by_sha: dict[str, ProblemRef] = {}

    def add_folder(self, root: str | Path) -> tuple[int, tuple[ProblemError, ...]]:
        """Register every problem under ``root`` (a KernelBench checkout, a ``levelN`` folder or a
        file), as ``kbv run`` finds them (:func:`kbv.intake.layout.vet_problems`: ``hidden_tests``
        folders left out). Returns how many, and the files named like problems that failed static
        vetting, skipped as ``kbv run`` skips them.

        Raises:
            LayoutError: ``root`` does not exist, or two files share a (level, id).
            ProblemError: two files share a name.
        """
        scan = vet_problems(root)
        refs = scan.problems
        with self._lock:
            for ref in refs:
                name = problem_address(ref)
                if name in self.by_name and self.by_name[name].sha256 != ref.sha256:
                    raise ProblemError(ref.path, f"a second problem named {name!r} ({self.by_name[name].path})")
                self.by_name[name] = ref
                self.by_sha.setdefault(ref.sha256, ref)
        return len(refs), scan.errors

    def add_source(self, text: str, name: str | None) -> ProblemRef:
        """Register an uploaded problem (statically vetted; its code runs only in the reference
        worker, as a problem file's does).

        Raises:
            ValueError: ``name`` is not a plain file stem.
            ProblemError: not a KernelBench problem.
        """
        ref = load_problem(source_file(text, "problem", name))
        with self._lock:
            self.by_sha.setdefault(ref.sha256, ref)
        return ref

    def resolve(self, address: str) -> ProblemRef | None:
        with self._lock:
            if address in self.by_name:
                return self.by_name[address]
            sha = address.removeprefix("sha256:").lower()
            return self.by_sha.get(sha)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self.by_name)


@dataclass
class LaneState:
    lane: ThreadLane
    job: Job | None = None
    started: float = 0.0


class Service:
    """The queue, the registry and the lanes of one server.

    Args:
        queue: the job queue (its SQLite file is the server's state).
        registry: the problems known.
        lanes: the lanes to run (none: jobs are accepted and wait, as in the HTTP tests).
        device: the device of every lane (``cpu`` or ``cuda``): the config's ``device``.
        on_finish: called (from a lane's thread) after each result is stored.
    """

    def __init__(self, queue: JobQueue, registry: Registry, lanes: list[LaneSpec], device: str, *,
                 input_blind: bool = False, on_finish: Callable[[], None] | None = None,
                 allow_uploads: bool = False, ray_tasks: int = 0):
        from kbv.serve.requests import config_ranges

        self.queue, self.registry, self.device = queue, registry, device
        self.specs = list(lanes)
        #: lanes on a Ray cluster instead of ``lanes`` (``kbv serve --executor ray``; ray initialised by
        #: the caller): at most this many verifications on the cluster at once (:mod:`kbv.serve.ray_lanes`)
        self.ray_tasks = ray_tasks
        self.input_blind = input_blind
        self.on_finish = on_finish
        #: uploaded problems accepted (``kbv serve --allow-uploads``): a problem's code runs in the
        #: reference worker, beside the secret seeds and the judging of every client's jobs, so an
        #: upload is trusted code; off by default
        self.allow_uploads = allow_uploads
        self.ranges = config_ranges()
        self.started_at = time.monotonic()
        self.latencies_s: list[float] = []  #: submit-to-verdict seconds of the jobs finished since start
        self._lanes: list[LaneState] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._dispatcher: threading.Thread | None = None
        self._mutex = threading.Lock()
        for sha, name, text in (queue.problems() if allow_uploads else ()):  # uploads of earlier runs
            try:
                registry.add_source(text, name)
            except (ProblemError, ValueError, OSError):
                pass  # a job of it ends as an error naming the problem

    # Lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Requeue the jobs a killed server left running, start the lanes and the dispatcher."""
        self.queue.recover()
        if self.ray_tasks:
            from kbv.serve.ray_lanes import RayServeLane

            self._lanes = [LaneState(RayServeLane(i, self._problem_of, self._post, self.device))
                           for i in range(self.ray_tasks)]
        else:
            self._lanes = [LaneState(ThreadLane(spec, self._work, self._post)) for spec in self.specs]
        self._dispatcher = threading.Thread(target=self._dispatch, name="kbv-serve-dispatch", daemon=True)
        self._dispatcher.start()

    def stop(self) -> None:
        """Stop taking jobs; the lanes end after their job in flight (its result is stored). Says on
        stderr how many jobs it waits for, so a stop that waits is not taken for a hang."""
        self._stop.set()
        self._wake.set()
        with self._mutex:
            running = [st.job for st in self._lanes if st.job is not None]
        print(f"kbv serve: stopping after the {len(running)} job(s) in flight (each within its deadline; "
              "their verdicts are stored, and accepted jobs not started run at the next start)"
              if running else "kbv serve: stopping (no job in flight)", file=sys.stderr, flush=True)
        if self._dispatcher is not None:
            self._dispatcher.join(timeout=10)
        for st in self._lanes:
            st.lane.close()

    def wake(self) -> None:
        self._wake.set()

    def _dispatch(self) -> None:
        while not self._stop.is_set():
            for st in self._lanes:
                with self._mutex:
                    if st.job is not None:
                        continue
                    job = self.queue.claim()
                    if job is None:
                        break
                    st.job, st.started = job, time.monotonic()
                st.lane.submit(job)
            self._wake.wait(0.5)
            self._wake.clear()

    def _work(self, evaluator: Any, job: Job, _peek: Any = None) -> tuple[str, str, str | None]:
        """Verify one job in a lane's thread: ``("done", verdict JSON, status)`` or ``("error", line, None)``."""
        from kbv.api import make_config
        from kbv.generate.refine import score_candidate
        from kbv.model.records import to_json

        ref = self.registry.resolve(job.problem)
        if ref is None:
            return "error", f"problem sha256:{job.problem} is no longer registered on this server", None
        try:
            config = make_config(job.config)
            path = source_file(job.candidate, "candidate")
            _, verdict = score_candidate(ref, job.candidate, config, evaluator, path=path)
        except ProblemError as exc:
            return "error", f"problem {problem_address(ref)}: {exc.fault}", None
        except Exception as exc:  # noqa: BLE001 - kbv's failure, stored as the job's error
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            return "error", f"kbv failed: {type(exc).__name__}: {first}", None
        return "done", to_json(verdict, indent=None), verdict.status.value

    def _problem_of(self, job: Job) -> tuple[ProblemRef, bytes] | None:
        """A Ray lane's job's problem and its file's bytes (sent with the task), or None."""
        ref = self.registry.resolve(job.problem)
        if ref is None:
            return None
        try:
            return ref, Path(ref.path).read_bytes()
        except OSError:
            return None

    def _post(self, message: tuple) -> None:
        _, lane, job, result = message
        kind, payload, status = result
        if kind == "done":
            self.queue.finish(job.id, verdict=payload, status=status)
        else:
            self.queue.finish(job.id, error=payload)
        with self._mutex:
            for st in self._lanes:
                if st.lane is lane:
                    st.job = None
            self.latencies_s.append(time.time() - job.submitted)
        self._wake.set()
        if self.on_finish is not None:
            self.on_finish()

    # Requests -------------------------------------------------------------------------------------

    def resolve_job(self, problem: str, overrides: dict) -> tuple[ProblemRef, dict]:
        """The problem and the resolved config (its ``to_dict``) of a request.

        Raises:
            BadRequest: 404 an unknown problem; 422 a config EvalConfig refuses.
        """
        from kbv.api import make_config
        from kbv.model.records import to_dict

        ref = self.registry.resolve(problem)
        if ref is None:
            names = self.registry.names()
            known = (f"registered: {', '.join(names[:5])}{', ...' if len(names) > 5 else ''} "
                     f"({len(names)}, GET /v1/problems lists them)" if names else "no problem is registered by name")
            raise BadRequest(404, f"unknown problem {problem!r}: give a registered name or an uploaded "
                                  f"problem's 'sha256:<hex>'; {known}")
        try:
            config = make_config({**overrides, "device": self.device})
        except (TypeError, ValueError) as exc:
            raise BadRequest(422, f"config: {exc}") from None
        return ref, to_dict(config)

    def result(self, job: Job) -> dict:
        """The JSON of ``GET /v1/verifications/{id}``: id, state, verdict, reward, error."""
        import json

        from kbv.generate.feedback import reward
        from kbv.model.verdicts import verdict_from_json

        out: dict[str, Any] = {"id": job.id, "state": job.state, "verdict": None, "reward": None,
                               "error": job.error}
        if job.state == "done" and job.verdict is not None:
            out["verdict"] = json.loads(job.verdict)
            r = reward(verdict_from_json(job.verdict), input_blind=self.input_blind, backend=job.backend)
            out["reward"] = dataclasses.asdict(r)
        return out

    def lane_busy(self) -> dict[str, float]:
        """Each lane's busy fraction since the server started (0..1)."""
        up = max(time.monotonic() - self.started_at, 1e-9)
        return {st.lane.name: min(1.0, st.lane.busy_s / up) for st in self._lanes}


__all__ = ["Registry", "Service", "problem_address"]
