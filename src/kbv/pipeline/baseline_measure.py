"""The baselines timed alone in the reference worker, for ``kbv baselines`` (cached in a batch
store by :mod:`kbv.batch.baseline_cache`). Labels and flags: :mod:`kbv.sandbox.numeric_flags`."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch

from kbv.model.records import Measurement
from kbv.pipeline.timing_rounds import (CPU_TIMING_INPUT_BYTES, MAX_TIMING_SETS, TIMING_INPUT_MEMORY_FRACTION,
                                 trials_within_budget)
from kbv.reference import inputs as inp
from kbv.sandbox import numeric_flags as bl
from kbv.sandbox.peak_memory import nbytes
from kbv.sandbox.timer import l2_flush_bytes, time_calls

#: the baselines ``kbv baselines`` measures: PyTorch eager under three flag sets, and torch.compile.
LABELS: tuple[str, ...] = ("eager-fp32", "eager-tf32", "eager-fp32-cudnn-tf32", "compile")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def measure_reference(rp: Any, config: Any, labels: Sequence[str]) -> dict[str, Any]:
    """Time the reference model of ``rp`` (a :class:`kbv.reference.build.ReferenceProblem`) under each label.

    Runs in the reference worker. Inputs are fresh ``get_inputs()`` draws (up to four, rotated per
    call as in a verification), ``config.trials`` calls per label split into
    ``config.timing_rounds`` interleaved rounds after ``config.warmup`` untimed calls (rounds after the
    first cut to ``config.time_budget_ms``, :func:`kbv.pipeline.timing_rounds.trials_within_budget`). ``compile``
    gets one extra untimed call first (the compilation itself).

    Returns:
        ``{"measurements": {label: Measurement}, "errors": {label: "one line"}}``.
    Raises:
        ValueError: an unknown label.
    """
    unknown = [lb for lb in labels if lb not in LABELS]
    if unknown:
        raise ValueError(f"unknown baseline label(s) {unknown}; known: {', '.join(LABELS)}")
    get_inputs = rp.module.get_inputs
    first = inp.to_device(inp.draw(get_inputs, inp.secret_seed()), rp.device, config.precision)
    size = max(1, nbytes(first))
    if rp.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(rp.device)
        budget = free * TIMING_INPUT_MEMORY_FRACTION / 3
    else:
        budget = CPU_TIMING_INPUT_BYTES
    count = int(max(1, min(MAX_TIMING_SETS, budget // size)))
    sets = [first] + [inp.to_device(inp.draw(get_inputs, inp.secret_seed()), rp.device, config.precision)
                      for _ in range(count - 1)]
    flush = l2_flush_bytes(rp.device)
    fns: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for label in labels:
        if label == "compile":
            bl.apply_flags(bl.flags_for("eager-tf32"))
            try:
                fn = torch.compile(rp.model)
                with torch.no_grad():
                    fn(*sets[0])  # compile now, outside any timed call
                fns[label] = fn
            except Exception as exc:  # noqa: BLE001 - a model inductor cannot compile is a finding
                errors[label] = f"torch.compile failed: {_first_line(exc)}"
        else:
            fns[label] = rp.model
    per_round = max(1, math.ceil(config.trials / config.timing_rounds))
    samples: dict[str, list[float]] = {lb: [] for lb in fns}
    clocks: dict[str, str] = {}
    subjects = list(fns)
    done = 0
    try:
        for r in range(config.timing_rounds):
            if r:  # cut to config.time_budget_ms at the slowest label's median so far, as a verification does
                cost = max((float(np.median(ts)) for ts in samples.values() if ts), default=0.0)
                per_round = trials_within_budget(per_round, cost, config.time_budget_ms)
            order = subjects[r % max(1, len(subjects)):] + subjects[: r % max(1, len(subjects))]
            for label in order:
                if label in errors:
                    continue
                bl.apply_flags(bl.flags_for("eager-tf32" if label == "compile" else label))
                try:
                    times, clocks[label] = time_calls(fns[label], sets, device=rp.device, warmup=config.warmup,
                                                      trials=per_round, flush_bytes=flush,
                                                      first_set=done % len(sets))
                except Exception as exc:  # noqa: BLE001
                    errors[label] = f"timing failed: {_first_line(exc)}"
                    continue
                samples[label].extend(times)
            done += per_round
    finally:
        bl.apply_flags(bl.flags_for("eager-fp32"))
        if "compile" in fns:
            torch._dynamo.reset()
    measurements = {lb: Measurement(lb, config.device, tuple(ts), config.warmup, flush, clocks[lb])
                    for lb, ts in samples.items() if ts and lb not in errors}
    return {"measurements": measurements, "errors": errors}
