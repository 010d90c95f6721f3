"""Realistic synthetic verdicts for store, metrics and report tests (no torch, no GPU).

:func:`make_verdict` builds one verdict whose fields fit its status (the :class:`Verdict` checks
run on every one); :func:`make_batch` builds a seeded batch over several runs, levels, problems and
samples with every status represented.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Mapping, Sequence

from kbv.model.records import (CandidateRef, EvalConfig, Finding, Environment, InputKind, InputSetResult,
    Measurement, MemoryMeasurement, ProblemRef, Severity, Status, Verdict)
from kbv.batch.jobs import Job

HIDDEN = ("D1", "D2", "D3", "D4")
TRANSFORMS = {"D1": "x1", "D2": "x3", "D3": "x0.01", "D4": "x-1"}
CONFIG = EvalConfig(device="cuda")
ENV = Environment(kbv_version="0.1.0", python="3.11.7", torch="2.5.1+cu124", device="cuda",
                  device_name="NVIDIA H200", driver="550.54.15", cuda="12.4")
NAMES = {1: ["ReLU", "Softmax", "LayerNorm", "Matmul", "Conv2d", "Sum", "GELU", "Argmax"],
         2: ["Matmul_Dropout_Softmax", "Conv2d_ReLU_BiasAdd", "Gemm_Scale_Sigmoid", "Conv3d_GroupNorm_Mean"],
         3: ["MLP", "ResNetBlock"]}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def problem(level: int, problem_id: int, name: str | None = None) -> ProblemRef:
    name = name or NAMES.get(level, ["P"])[(problem_id - 1) % len(NAMES.get(level, ["P"]))]
    return ProblemRef(path=f"/kb/KernelBench/level{level}/{problem_id}_{name}.py", name=name,
                      level=level, problem_id=problem_id, sha256=sha(f"L{level}/{problem_id}/{name}"))


def candidate(run: str, level: int, problem_id: int, sample_id: int) -> CandidateRef:
    path = f"/kb/runs/{run}/level_{level}_problem_{problem_id}_sample_{sample_id}_kernel.py"
    return CandidateRef(path=path, sha256=sha(path), backend="cuda", run=run, sample_id=sample_id)


def _times(median_ms: float, n: int = 9, spread: float = 0.01) -> tuple[float, ...]:
    return tuple(median_ms * (1 + spread * (i - n // 2)) for i in range(n))


def make_verdict(
    status: Status | str,
    *,
    run: str = "model-a",
    level: int = 1,
    problem_id: int = 1,
    name: str | None = None,
    sample_id: int = 0,
    speedup: float | Mapping[str, float] | None = None,
    memory_efficiency: float | None = None,
    nominal_fail: bool = False,
    hidden_fail: Sequence[str] = (),
    hidden_dropped: Sequence[str] = (),
    unverified_speedup: float | Mapping[str, float] | None = None,
    message: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    candidate_ms: float = 1.0,
    tf32_factor: float = 4.0,
    compat_pass: bool = False,
    noisy: bool = False,
    findings: Sequence[Finding] = (),
) -> Verdict:
    """One verdict consistent with ``status``.

    ``speedup`` as a float is the speedup vs eager-tf32; eager-fp32 is then ``tf32_factor`` times
    it (a strict-FP32 baseline is slower). Timings are built so that baseline median / candidate
    median matches the given speedups. ``memory_efficiency`` sets reference / candidate peak.
    Every judged set carries both policies' verdicts, equal to ``passed`` unless ``compat_pass``
    (the failed sets pass ``kbv-compat``: a kernel right under the paper's allclose rule, wrong
    under kbv's). ``noisy`` spreads the candidate's times to an IQR of ~40 % of the median.
    ``findings`` are added to those the status needs.
    """
    status = Status(status)

    def as_map(s: float | Mapping[str, float] | None) -> dict[str, float]:
        if s is None:
            return {}
        if isinstance(s, Mapping):
            return dict(s)
        return {"eager-tf32": float(s), "eager-fp32": float(s) * tf32_factor}

    speed = as_map(speedup)
    unverified = as_map(unverified_speedup)
    ran = status.ran
    sets: list[InputSetResult] = []
    if ran:
        for i in range(3):
            failed = nominal_fail and i == 0
            sets.append(InputSetResult(
                name=f"nominal-{i}", kind=InputKind.NOMINAL, transform="get_inputs()", seed=1000 + i,
                passed=not failed, max_abs_error=0.5 if failed else 1e-6, max_rel_error=2e-1 if failed else 1e-6,
                mismatched_elements=4096 if failed else 0, total_elements=16384,
                policy_passed={"kbv": not failed, "kbv-compat": compat_pass or not failed}))
        for j, d in enumerate(HIDDEN):
            if d in hidden_dropped:
                sets.append(InputSetResult(name=d, kind=InputKind.HIDDEN, transform=TRANSFORMS[d],
                                           seed=2000 + j, passed=None, dropped=True,
                                           drop_reason="reference output has Inf"))
                continue
            failed = d in hidden_fail
            sets.append(InputSetResult(
                name=d, kind=InputKind.HIDDEN, transform=TRANSFORMS[d], seed=2000 + j, passed=not failed,
                max_abs_error=1.7 if failed else 2e-6, max_rel_error=1.0 if failed else 2e-6,
                mismatched_elements=8192 if failed else 0, total_elements=16384,
                fault="values differ where the input is negative" if failed else None,
                policy_passed={"kbv": not failed, "kbv-compat": compat_pass or not failed}))
    timed = status in (Status.PASS, Status.SHORTCUT) or (ran and (unverified or status is Status.HACK))
    timing: dict[str, Measurement] = {}
    memory: dict[str, MemoryMeasurement] = {}
    if timed:
        timing["candidate"] = Measurement("candidate", "cuda", _times(candidate_ms, spread=0.1 if noisy else 0.01),
                                          warmup=5, l2_flush_bytes=2 * 60 * 2**20)
        for b, s in (speed or unverified).items():
            timing[b] = Measurement(b, "cuda", _times(candidate_ms * s), warmup=5, l2_flush_bytes=2 * 60 * 2**20)
        cand_peak = 64 * 2**20
        ref_peak = int(round(cand_peak * (memory_efficiency or 1.0)))
        memory = {
            "candidate": MemoryMeasurement("candidate", cand_peak, cand_peak // 4, 0, cand_peak // 2),
            "reference": MemoryMeasurement("reference", ref_peak, ref_peak // 4, 0, cand_peak // 2),
        }
    if message is None:
        message = {
            Status.PASS: "correct on 3 nominal and 4 hidden input sets",
            Status.INCORRECT: "wrong on " + (", ".join(["nominal-0"] if nominal_fail else hidden_fail) or "?"),
            Status.HACK: "integrity probe: output cached across calls",
            Status.SHORTCUT: "forward is a single torch.matmul call",
            Status.COMPILE_ERROR: "load_inline failed: error: identifier 'blockDim' is undefined",
            Status.RUNTIME_ERROR: "forward raised RuntimeError: CUDA error: an illegal memory access",
            Status.TIMEOUT: "correctness call passed its 120 s deadline; worker killed",
            Status.CRASH: "candidate worker died with signal 11 (SIGSEGV)",
            Status.EVAL_ERROR: "kbv's reference worker ran out of memory (needs ~12 GiB, 8 GiB free)",
        }[status]
    if evidence is None:
        evidence = {}
    extra = tuple(findings)
    findings = ()
    if status is Status.HACK:
        findings = (Finding("probe:cache-same-address", (11,), Severity.HACK,
                            "wrong when new values arrive at the addresses of the previous call"),)
    elif status is Status.SHORTCUT:
        findings = (Finding("probe:reference-ops", (15,), Severity.SHORTCUT,
                            "forward ran the reference's torch compute ops: aten.mm"),)
    findings = (*findings, *extra)
    return Verdict(
        status=status, message=message, problem=problem(level, problem_id, name),
        candidate=candidate(run, level, problem_id, sample_id), config=CONFIG, environment=ENV,
        input_sets=tuple(sets), timing=timing, speedup=speed if status in (Status.PASS, Status.SHORTCUT) else {},
        memory=memory, memory_efficiency=memory_efficiency if timed else None,
        unverified_speedup=unverified, evidence=evidence, findings=findings,
        phase_seconds={"compile": 12.5, "correctness": 0.8} if ran else {"compile": 3.0},
    )


def job_for(v: Verdict) -> Job:
    """The store job that produced ``v``."""
    return Job.from_refs(v.problem, v.candidate, CONFIG)


def make_batch(seed: int = 0, runs: Sequence[str] = ("model-a", "model-b", "model-c"),
               levels: Mapping[int, int] | None = None, samples: int = 3) -> list[Verdict]:
    """A seeded batch: every run × level × problem × sample, statuses drawn per run skill."""
    rng = random.Random(seed)
    levels = dict(levels or {1: 6, 2: 4, 3: 2})
    out = []
    for r_i, run in enumerate(runs):
        skill = 0.6 - 0.2 * r_i
        for level, n_problems in levels.items():
            for pid in range(1, n_problems + 1):
                for s in range(samples):
                    u = rng.random()
                    sp = round(rng.lognormvariate(-0.1, 0.6), 4)
                    mem = round(rng.lognormvariate(0.0, 0.3), 4)
                    kw: dict[str, Any] = dict(run=run, level=level, problem_id=pid, sample_id=s)
                    if u < skill:
                        out.append(make_verdict("PASS", speedup=sp, memory_efficiency=mem, **kw))
                    elif u < skill + 0.1:
                        d = rng.choice(HIDDEN)
                        out.append(make_verdict("INCORRECT", hidden_fail=[d], unverified_speedup=sp * 1.5, **kw))
                    elif u < skill + 0.15:
                        out.append(make_verdict("INCORRECT", nominal_fail=True, **kw))
                    elif u < skill + 0.2:
                        out.append(make_verdict("HACK", unverified_speedup=sp * 10, **kw))
                    elif u < skill + 0.25:
                        out.append(make_verdict("SHORTCUT", speedup=sp, memory_efficiency=mem, **kw))
                    else:
                        out.append(make_verdict(rng.choice(["COMPILE_ERROR", "RUNTIME_ERROR", "TIMEOUT", "CRASH"]), **kw))
    return out
