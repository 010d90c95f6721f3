"""The reference worker: trusted process that owns one device, the problems and the comparisons.

It serves the orchestrator's typed jobs (:mod:`kbv.processes.reference_jobs`, one handler each in
:data:`_HANDLERS`): :class:`VerifyJob` (the whole pipeline, answered ``{"verdict": dict}``),
:class:`VetJob` (``{"vetting": dict}``, :func:`kbv.reference.vetting.vet_problem`),
:class:`BaselinesJob` (the reference model alone under each baseline,
:func:`kbv.pipeline.baseline_measure.measure_reference`: ``{"baselines": {...}}``),
:class:`EnvironmentJob` (what a baseline cache key needs, nothing run) and :class:`BuildJob` (every
candidate loaded at once, each in its own sandboxed worker, so that their extensions build in
parallel into the content-hash build cache: ``{"built": {candidate path: "ok" or the failure}}``;
with ``verify_failures`` and one pair whose load failed, also ``"verdict"``: the verdict the
pipeline gives a candidate that does not build, so that :mod:`kbv.batch.executors.builds` decides it
without a lane). A broken problem answers ``{"problem_error": ...}``, anything else that fails
``{"error": ...}`` (:class:`kbv.processes.reference.ReferenceReply`, decoded strictly by its handle).
Reference models are cached per (problem file hash, config precision). A verification job may ask
for the lane's next candidate (``ask_next``: its worker is started once this job's candidate is
loaded, :mod:`kbv.pipeline.prestart`) and name a timing-flag directory (``quiet_dir``: the build pool
stops its builds while this job times, :mod:`kbv.processes.quiet`); every verdict names the kbv
source this worker runs (``evidence["kbv_source"]``, :mod:`kbv.model.source`). Candidate workers are
spawned from here, so inputs reach them by CUDA IPC without passing through the orchestrator. The
worker dies with the orchestrator (``PR_SET_PDEATHSIG``) and a forked sentinel kills its candidate
workers' processes when it dies (:func:`kbv.processes.handles.start_sentinel`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from kbv.processes.reference_jobs import (AskNext, BaselinesJob, BuildJob, BuildPair, EnvironmentJob, JobError,
                                          NextCandidate, VerifyJob, VetJob, decode_job, encode_job)


def reference_main(conn: Connection, device: str) -> None:
    import signal

    # Ctrl-C reaches every process of the terminal's foreground group, this one included; the
    # orchestrator alone answers it (one line, then it kills this worker with what it started), so
    # neither this worker nor the sentinel and candidate workers it starts (they inherit SIG_IGN)
    # print a KeyboardInterrupt traceback or stop half-way on their own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # first, before torch starts threads: die with the orchestrator, and have what this worker
    # starts die with this worker (a `kill -9` of the orchestrator must leave no worker running)
    from kbv.sandbox.confinement import die_with_parent
    from kbv.processes.handles import start_sentinel
    from kbv.processes.procfs import undumpable

    die_with_parent()
    undumpable()  # no candidate of the same user reads this process's memory (the sentinel inherits it)
    start_sentinel()
    from kbv.processes.footprint import reuse_small_blocks

    reuse_small_blocks()  # kbv's chunk temporaries reused, not page-faulted anew each time

    import torch

    from kbv.processes.host_environment import collect_environment
    from kbv.intake.problems import ProblemError
    from kbv.model.source import source_hash
    from kbv.processes.reference import RAISED, ProblemFailure, ReferenceReply, WorkerError

    if device == "cuda":
        torch.cuda.set_device(0)
    server = _Server(conn, device, collect_environment(device), source_hash())
    while True:
        try:
            raw = conn.recv_bytes()
        except EOFError:
            server.early.close()
            return
        if raw == b"null":
            server.early.close()
            return
        try:
            job = decode_job(raw)
            handler = _HANDLERS.get(type(job))
            if handler is None:
                raise JobError(f"{type(job).__name__} is not a job")
            reply = handler(server, job)
        except ProblemError as exc:
            server.cache.clear()
            reply = ReferenceReply(problem_error=ProblemFailure(exc.path, exc.fault)).to_json()
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            reply = ReferenceReply(error=WorkerError(RAISED, f"{type(exc).__name__}: {exc}",
                                                     traceback.format_exc()[-4000:])).to_json()
        conn.send_bytes(json.dumps(reply, allow_nan=False).encode())


class _Server:
    """The reference worker's state between jobs: the environment, the kbv source it runs, one
    reference model kept per (problem, device, precision, init seed), the lane's next candidate's
    worker started early (:class:`kbv.pipeline.prestart.Prestarted`)."""

    def __init__(self, conn: Connection, device: str, env, source: str):
        from kbv.pipeline.prestart import Prestarted

        self.conn, self.device, self.env, self.source = conn, device, env, source
        self.cache: dict = {}
        self.early = Prestarted()

    def reference(self, problem, config):
        """The built reference of ``problem`` under ``config``, built once and kept until another is needed."""
        import torch

        from kbv.reference.build import build_reference

        key = (problem.sha256, problem.path, config.device, config.precision, config.init_seed)
        if key not in self.cache:
            self.cache.clear()  # one reference model resident at a time
            if self.device == "cuda":
                torch.cuda.empty_cache()
            self.cache[key] = build_reference(problem, config)
        return self.cache[key]

    def environment(self, job: EnvironmentJob) -> dict:
        from kbv.model.records import to_dict

        return {"baselines": {"environment": to_dict(self.env), "measurements": {}, "errors": {}}}

    def vet(self, job: VetJob) -> dict:
        from kbv.model.records import to_dict
        from kbv.reference import vetting

        report = vetting.vet_problem(self.reference(job.problem, job.config), job.config, self.env, seeds=job.vet_seeds)
        return {"vetting": to_dict(report)}

    def build(self, job: BuildJob) -> dict:
        from kbv.pipeline.warm_call import compiles_at_first_call

        reply: dict = {"built": _build(job.pairs, job.config)}
        if any(compiles_at_first_call(p.candidate.backend, job.config.device) for p in job.pairs) and \
                _left_over_after_calls(job.pairs[0].problem, job.config):
            reply["restart"] = True  # device memory of a killed worker's calls: a fresh pool worker next
        if job.verify_failures and len(job.pairs) == 1:
            reply["verdict"] = _failed_build_verdict(job.pairs[0], reply["built"], job.config, self.env)
            if reply["verdict"] is not None:
                reply["verdict"].setdefault("evidence", {})["kbv_source"] = self.source
        return reply

    def baselines(self, job: BaselinesJob) -> dict:
        from kbv.model.records import to_dict
        from kbv.pipeline.baseline_measure import measure_reference
        from kbv.reference.build import build_reference

        self.cache.clear()
        measured = measure_reference(build_reference(job.problem, job.config), job.config, job.labels)
        return {"baselines": {"environment": to_dict(self.env), "errors": measured["errors"],
                              "measurements": {k: to_dict(m) for k, m in measured["measurements"].items()}}}

    def verify(self, job: VerifyJob) -> dict:
        import torch

        from kbv.model.records import to_dict
        from kbv.pipeline import run as verify
        from kbv.pipeline.prestart import quiet

        from kbv.processes import request_trace as trace
        from kbv.processes.candidate import start_zygote

        trace.record("lane", what="job")
        start_zygote(job.config.device)  # its imports run beside the reference's build
        rp = self.reference(job.problem, job.config)
        trace.record("lane", what="reference")
        worker = self.early.take(job.candidate, job.config.device)
        trace.record("lane", what="worker taken", early=worker is not None)
        shape_worker = self.early.take_shape() if worker is not None else None
        trace.record("lane", what="shape worker taken", early=shape_worker is not None)

        def start_next(device=job.config.device) -> None:  # the lane's next candidate's worker
            if not job.ask_next:
                return
            self.conn.send_bytes(encode_job(AskNext()))
            answer = decode_job(self.conn.recv_bytes())
            if isinstance(answer, NextCandidate) and answer.candidate is not None:
                try:
                    self.early.start(answer.candidate, device, shape=job.config.secret_shapes > 0)
                except Exception:  # noqa: BLE001 - the next job spawns its own worker
                    pass

        if worker is not None:  # this one was started early and is ready: the next starts now
            start_next()
        verdict = verify.verify(rp, job.candidate, job.config, self.env, hidden_tests=job.hidden_tests,
                                worker=worker, shape_worker=shape_worker, quiet=lambda: quiet(job.quiet_dir, self.early),
                                on_loaded=start_next if worker is None else None)
        from kbv.processes import footprint as fp
        from kbv.processes.reference import ReferenceReply

        evidence = {**verdict.evidence, "kbv_source": self.source}
        restart = None
        if job.config.device == "cuda":  # the candidate's workers are closed: what this job left here
            try:
                left = fp.device_left_over(rp.device, rp.model)
                evidence["reference_device_left_over_bytes"] = left
                # the device's free memory once the job's workers are gone: memory of theirs that this
                # process still maps (an IPC handle it did not close) shows here, not in its allocator
                evidence["device_free_after_bytes"] = int(torch.cuda.mem_get_info(rp.device)[0])
                restart = left > fp.LEFT_OVER_BYTES or None
            except Exception as exc:  # noqa: BLE001 - the verdict stands; this worker is not reused
                evidence["reference_device_left_over_error"] = f"{type(exc).__name__}: {exc}"[:300]
                restart = True
        verdict = dataclasses.replace(verdict, evidence=evidence)
        trace.record("lane", what="reply")
        return ReferenceReply(verdict=to_dict(verdict), restart=restart).to_json()


#: the worker as a table: each job's handler.
_HANDLERS = {EnvironmentJob: _Server.environment, VetJob: _Server.vet, BuildJob: _Server.build,
             BaselinesJob: _Server.baselines, VerifyJob: _Server.verify}


_BUILD_REFERENCE: dict = {}  #: the last problem's reference of a build worker: (key, ReferenceProblem)


def _build_reference(problem, config):
    """``build_reference`` for build jobs, the last problem's kept: a build pool gets the samples
    of one problem one after another, and each build needs only the reference's init args."""
    from kbv.reference.build import build_reference

    key = (problem.sha256, problem.path, config.device, config.precision, config.init_seed)
    if key not in _BUILD_REFERENCE:
        _BUILD_REFERENCE.clear()  # one reference resident at a time
        _BUILD_REFERENCE[key] = build_reference(problem, config)
    return _BUILD_REFERENCE[key]


def _left_over_after_calls(problem, config) -> bool:
    """Whether this build worker holds device memory past its reference model's once a build's
    candidate workers, called ahead (:mod:`kbv.pipeline.warm_call`), are closed: CUDA IPC blocks of
    inputs a worker held when it was killed stay for the sender's life (docs/scale.md, "Device
    memory across jobs"), over :data:`kbv.processes.footprint.LEFT_OVER_BYTES`; True when it cannot
    be read."""
    from kbv.processes import footprint as fp

    try:
        rp = _build_reference(problem, config)
        return fp.device_left_over(rp.device, rp.model) > fp.LEFT_OVER_BYTES
    except Exception:  # noqa: BLE001 - not known: a fresh worker next
        return True


def _build(pairs: tuple[BuildPair, ...], config) -> dict[str, str]:
    """Load every candidate of ``pairs`` in its own candidate worker at the same time (their
    ``load_inline`` builds run in parallel); close them. Candidate path -> "ok" or the failure."""
    from kbv.sandbox import protocol
    from kbv.sandbox.numeric_flags import flags_for
    from kbv.intake.candidates import build_dir
    from kbv.intake.problems import ProblemError
    from kbv.processes.buildlock import BuildLockTimeout, Hold, build_lock
    from kbv.processes.candidate import CandidateProcess
    from kbv.pipeline.warm_call import autotune_files, compiles_at_first_call, drop_new_autotune, first_call_ahead

    out: dict[str, str] = {}
    started: list[tuple[str, CandidateProcess, Hold]] = []
    #: candidate path -> (its problem's reference, its build directory, its autotuning files before), for the calls ahead
    warm: dict[str, tuple] = {}
    with contextlib.ExitStack() as locks:  # each build dir this process's alone until its load answered
        try:
            for pair in pairs:
                cand = pair.candidate
                try:
                    rp = _build_reference(pair.problem, config)
                except ProblemError as exc:
                    out[cand.path] = str(exc)
                    continue
                bd = build_dir(cand, config.device)
                try:
                    hold = locks.enter_context(build_lock(bd, timeout_s=config.compile_timeout_s,
                                                          what=Path(cand.path).name))
                except BuildLockTimeout as exc:
                    out[cand.path] = f"BuildLockTimeout: {exc}"
                    continue
                w = CandidateProcess(device=config.device, build_dir=bd)
                started.append((cand.path, w, hold))
                if compiles_at_first_call(cand.backend, config.device):
                    warm[cand.path] = (rp, bd, autotune_files(bd))
                w.send(protocol.Load(cand.path, f"kbv_build_{cand.sha256[:16]}", tuple(rp.init_args), config.init_seed,
                                     config.device, config.precision, flags_for("eager-fp32")), phase="load")
            for path, w, hold in started:
                try:
                    reply = w.receive(phase="load", timeout=config.compile_timeout_s)
                except Exception as exc:  # noqa: BLE001 - a failed build is the verification's to report
                    out[path] = f"{type(exc).__name__}: {exc}"
                    continue
                finally:
                    hold.answered = w.proc.is_alive()
                out[path] = "ok" if isinstance(reply, protocol.Loaded) else f"{reply.error_type}: {reply.message[:300]}"
                if out[path] == "ok" and path in warm:
                    first_call_ahead(w, warm[path][0], config)
        finally:
            for _, w, _ in reversed(started):  # last first: each jail kills what started after it
                w.close()
            for _, bd, before in warm.values():  # the pool's autotuning is not the job's (warm_call)
                drop_new_autotune(bd, before)
    return out


def _failed_build_verdict(pair: BuildPair, built: dict, config, env) -> dict | None:
    """The verdict of a candidate whose build-only load failed (``built`` says not ``"ok"``): its
    whole verification run here, where it stops at the same load. None when the load succeeded or
    the problem is broken (a lane then reports it). The caller accepts the verdict only when it
    stopped before timing (:mod:`kbv.batch.executors.builds`)."""
    from kbv.pipeline import run as verify
    from kbv.intake.problems import ProblemError
    from kbv.model.records import to_dict

    cand = pair.candidate
    if built.get(cand.path, "ok") == "ok":
        return None
    try:
        rp = _build_reference(pair.problem, config)
    except ProblemError:
        return None
    return to_dict(verify.verify(rp, cand, config, env, hidden_tests=pair.hidden_tests))
