"""The reference worker: trusted process that owns one device, the problems and the comparisons.

It serves JSON jobs from the orchestrator (``{"problem": ..., "candidate": ..., "config": ...}``)
and answers each with ``{"verdict": dict}`` or ``{"problem_error": "one line"}``. Reference models
are cached per (problem file hash, config precision). Candidate workers are spawned from here, so
inputs reach them by CUDA IPC without passing through the orchestrator.
"""

from __future__ import annotations

import json
import traceback
from multiprocessing.connection import Connection


def reference_main(conn: Connection, device: str) -> None:
    import torch

    from kbv import verify
    from kbv.environment import collect_environment
    from kbv.problems import ProblemError
    from kbv.records import CandidateRef, EvalConfig, ProblemRef, to_dict

    if device == "cuda":
        torch.cuda.set_device(0)
    env = collect_environment(device)
    cache: dict = {}
    while True:
        try:
            job = json.loads(conn.recv_bytes())
        except EOFError:
            return
        if job is None:
            return
        try:
            problem = ProblemRef(**job["problem"])
            candidate = CandidateRef(**job["candidate"])
            cfg = dict(job["config"])
            cfg["hidden"] = tuple(cfg["hidden"])
            cfg["baselines"] = tuple(cfg["baselines"])
            config = EvalConfig(**cfg)
            key = (problem.sha256, problem.path, config.device, config.precision, config.init_seed)
            if key not in cache:
                cache.clear()  # one reference model resident at a time
                if device == "cuda":
                    torch.cuda.empty_cache()
                cache[key] = verify.build_reference(problem, config)
            verdict = verify.verify(cache[key], candidate, config, env)
            reply = {"verdict": to_dict(verdict)}
        except ProblemError as exc:
            cache.clear()
            reply = {"problem_error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            reply = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-4000:]}"}
        conn.send_bytes(json.dumps(reply, allow_nan=False).encode())
