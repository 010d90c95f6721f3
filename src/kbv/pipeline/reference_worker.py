"""The reference worker: trusted process that owns one device, the problems and the comparisons.

It serves JSON jobs from the orchestrator (``{"problem": ..., "candidate": ..., "config": ...}``)
and answers each with ``{"verdict": dict}``, ``{"problem_error": {"path", "fault"}}`` or
``{"error": {"kind", "message", "traceback"}}`` (:class:`kbv.processes.reference.ReferenceReply`,
decoded strictly by its handle). A job with
``"kind": "vet"`` (problem, config, ``vet_seeds``; no candidate) vets the problem
(:func:`kbv.reference.vetting.vet_problem`) and answers ``{"vetting": dict}``. A job with
``"kind": "baselines"`` and ``"labels"`` times the reference model alone under each baseline
(:func:`kbv.pipeline.baseline_measure.measure_reference`) and answers ``{"baselines": {...}}``. A job with
``"kind": "build"`` and ``"pairs"`` (``[{"problem", "candidate"}, ...]``) loads every candidate at
once, each in its own sandboxed worker, so that their extensions build in parallel into the
content-hash build cache, and answers ``{"built": {candidate path: "ok" or the failure}}``; with
``"verify_failures": true`` and one pair whose load failed, it also runs that pair's verification
(which fails at the same load, before any timing) and adds ``"verdict"``: the verdict the
verification pipeline gives a candidate that does not build (COMPILE_ERROR, or HACK when the static
scan caught a cheat), so that :mod:`kbv.batch.executors.builds` decides it without a lane. Reference models
are cached per (problem file hash, config precision). A verification job may name the lane's next
candidate (``"next"``: its worker is started once this job's candidate is loaded,
:mod:`kbv.pipeline.prestart`) and a timing-flag directory (``"quiet_dir"``: the build pool stops
its builds while this job times, :mod:`kbv.processes.quiet`); every verdict names the kbv source
this worker runs (``evidence["kbv_source"]``, :mod:`kbv.model.source`). Candidate workers are spawned from here, so
inputs reach them by CUDA IPC without passing through the orchestrator. The worker dies with the
orchestrator (``PR_SET_PDEATHSIG``) and a forked sentinel kills its candidate workers' processes
when it dies (:func:`kbv.processes.handles.start_sentinel`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import traceback
from multiprocessing.connection import Connection
from pathlib import Path


def reference_main(conn: Connection, device: str) -> None:
    import signal

    # Ctrl-C reaches every process of the terminal's foreground group, this one included; the
    # orchestrator alone answers it (one line, then it kills this worker with what it started), so
    # neither this worker nor the sentinel and candidate workers it starts (they inherit SIG_IGN)
    # print a KeyboardInterrupt traceback or stop half-way on their own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # first, before torch starts threads: die with the orchestrator, and have what this worker
    # starts die with this worker (a kill -9 of `kbv run` left both workers running for minutes)
    from kbv.sandbox.confinement import die_with_parent
    from kbv.processes.handles import start_sentinel
    from kbv.processes.procfs import undumpable

    die_with_parent()
    undumpable()  # no candidate of the same user reads this process's memory (the sentinel inherits it)
    start_sentinel()
    from kbv.processes.footprint import reuse_small_blocks

    reuse_small_blocks()  # kbv's chunk temporaries reused, not page-faulted anew each time

    import torch

    from kbv.pipeline import run as verify
    from kbv.reference import vetting
    from kbv.reference.build import build_reference
    from kbv.sandbox.environment import collect_environment
    from kbv.intake.problems import ProblemError
    from kbv.model.records import CandidateRef, EvalConfig, ProblemRef, to_dict

    from kbv.model.source import source_hash
    from kbv.pipeline.prestart import Prestarted, quiet
    from kbv.processes.reference import RAISED, ProblemFailure, ReferenceReply, WorkerError

    if device == "cuda":
        torch.cuda.set_device(0)
    env = collect_environment(device)
    source = source_hash()  #: the kbv this worker runs, named in every verdict (evidence kbv_source)
    cache: dict = {}
    early = Prestarted()
    while True:
        try:
            job = json.loads(conn.recv_bytes())
        except EOFError:
            early.close()
            return
        if job is None:
            early.close()
            return
        if job.get("kind") == "environment":  # what a baseline cache key needs, nothing run
            reply = {"baselines": {"environment": to_dict(env), "measurements": {}, "errors": {}}}
            conn.send_bytes(json.dumps(reply, allow_nan=False).encode())
            continue
        try:
            problem = ProblemRef(**job["problem"])
            cfg = dict(job["config"])
            cfg["hidden"] = tuple(cfg["hidden"])
            cfg["baselines"] = tuple(cfg["baselines"])
            cfg["distributions"] = tuple(cfg.get("distributions", ()))
            config = EvalConfig(**cfg)
            if job.get("kind") == "vet":  # kbv vet: the reference alone over many distributions
                key = (problem.sha256, problem.path, config.device, config.precision, config.init_seed)
                if key not in cache:
                    cache.clear()
                    cache[key] = build_reference(problem, config)
                report = vetting.vet_problem(cache[key], config, env, seeds=int(job["vet_seeds"]))
                reply = {"vetting": to_dict(report)}
            elif job.get("kind") == "build":  # kbv demo / kbv run's build pool: fill the build cache
                reply = {"built": _build(job["pairs"], config)}
                if job.get("verify_failures") and len(job["pairs"]) == 1:
                    reply["verdict"] = _failed_build_verdict(job["pairs"][0], reply["built"], config, env)
                    if reply["verdict"] is not None:
                        reply["verdict"].setdefault("evidence", {})["kbv_source"] = source
            elif job.get("kind") == "baselines":  # kbv baselines: time the reference model only
                from kbv.pipeline.baseline_measure import measure_reference

                cache.clear()
                measured = measure_reference(build_reference(problem, config), config,
                                             tuple(job["labels"]))
                reply = {"baselines": {"environment": to_dict(env), "errors": measured["errors"],
                                       "measurements": {k: to_dict(m)
                                                        for k, m in measured["measurements"].items()}}}
            else:
                candidate = CandidateRef(**job["candidate"])
                key = (problem.sha256, problem.path, config.device, config.precision, config.init_seed)
                if key not in cache:
                    cache.clear()  # one reference model resident at a time
                    if device == "cuda":
                        torch.cuda.empty_cache()
                    cache[key] = build_reference(problem, config)
                worker = early.take(candidate, config.device)

                def start_next(device=config.device) -> None:  # the lane's next candidate's worker
                    if not job.get("ask_next"):
                        return
                    conn.send_bytes(json.dumps({"ask": "next"}).encode())
                    nxt = json.loads(conn.recv_bytes()).get("next")
                    if nxt:
                        try:
                            early.start(CandidateRef(**nxt), device)
                        except Exception:  # noqa: BLE001 - the next job spawns its own worker
                            pass

                if worker is not None:  # this one was started early and is ready: the next starts now
                    start_next()
                verdict = verify.verify(cache[key], candidate, config, env, hidden_tests=job.get("hidden_tests"),
                                        worker=worker, quiet=lambda: quiet(job.get("quiet_dir"), early),
                                        on_loaded=start_next if worker is None else None)
                verdict = dataclasses.replace(verdict, evidence={**verdict.evidence, "kbv_source": source})
                reply = {"verdict": to_dict(verdict)}
        except ProblemError as exc:
            cache.clear()
            reply = ReferenceReply(problem_error=ProblemFailure(exc.path, exc.fault)).to_json()
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            reply = ReferenceReply(error=WorkerError(RAISED, f"{type(exc).__name__}: {exc}",
                                                     traceback.format_exc()[-4000:])).to_json()
        conn.send_bytes(json.dumps(reply, allow_nan=False).encode())


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


def _build(pairs: list[dict], config) -> dict[str, str]:
    """Load every candidate of ``pairs`` in its own candidate worker at the same time (their
    ``load_inline`` builds run in parallel); close them. Candidate path -> "ok" or the failure."""
    from kbv.sandbox import protocol
    from kbv.sandbox.numeric_flags import flags_for
    from kbv.intake.candidates import build_dir
    from kbv.intake.problems import ProblemError
    from kbv.model.records import CandidateRef, ProblemRef
    from kbv.processes.buildlock import BuildLockTimeout, Hold, build_lock
    from kbv.processes.candidate import CandidateProcess

    out: dict[str, str] = {}
    started: list[tuple[str, CandidateProcess, Hold]] = []
    with contextlib.ExitStack() as locks:  # each build dir this process's alone until its load answered
        try:
            for pair in pairs:
                cand = CandidateRef(**pair["candidate"])
                try:
                    rp = _build_reference(ProblemRef(**pair["problem"]), config)
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
        finally:
            for _, w, _ in reversed(started):  # last first: each jail kills what started after it
                w.close()
    return out


def _failed_build_verdict(pair: dict, built: dict, config, env) -> dict | None:
    """The verdict of a candidate whose build-only load failed (``built`` says not ``"ok"``): its
    whole verification run here, where it stops at the same load. None when the load succeeded or
    the problem is broken (a lane then reports it). The caller accepts the verdict only when it
    stopped before timing (:mod:`kbv.batch.executors.builds`)."""
    from kbv.pipeline import run as verify
    from kbv.intake.problems import ProblemError
    from kbv.model.records import CandidateRef, ProblemRef, to_dict

    cand = CandidateRef(**pair["candidate"])
    if built.get(cand.path, "ok") == "ok":
        return None
    try:
        rp = _build_reference(ProblemRef(**pair["problem"]), config)
    except ProblemError:
        return None
    return to_dict(verify.verify(rp, cand, config, env, hidden_tests=pair.get("hidden_tests")))
