"""Comparison of candidate outputs with reference outputs. Runs only in the reference worker.

This is the ``kbv-compat`` policy and the structural checks both policies share; the default
``kbv`` policy (normalised error against a float64 oracle, budget from the baselines' own
errors) lives in :mod:`kbv.reference.oracle`.

Rule (KernelBench-Verified protocol): same number of outputs, same shape and dtype; NaN only
where the reference has NaN and ±Inf only where the reference has the same infinity; every
finite element within ``atol + rtol * |ref|`` (``torch.allclose`` semantics) with
atol = rtol = 1e-3 for float32 and 1e-2 for bf16/fp16.

Errors are computed in float64 in chunks (bounded extra memory on large outputs):
``max_abs_error = max |out - ref|`` over elements where both are finite, and
``max_rel_error = max |out - ref| / |ref|`` over those where also ``|ref| > atol`` (a relative
error against a reference at or below the absolute tolerance says nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

CHUNK_ELEMENTS = 1 << 22  #: elements compared at a time (32 MiB of float64 per operand).


@dataclass(frozen=True)
class Comparison:
    passed: bool
    max_abs_error: float | None
    max_rel_error: float | None
    mismatched_elements: int | None
    total_elements: int | None
    fault: str | None  #: one line when the outputs cannot be compared or fail.
    nonfinite_mismatches: int = 0  #: elements where the NaN/Inf pattern differs from the reference.


def reference_is_finite(outputs: Sequence[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(o).all()) if o.is_floating_point() else True for o in outputs)


def compare(
    outputs: Sequence[torch.Tensor],
    reference: Sequence[torch.Tensor],
    *,
    atol: float,
    rtol: float,
) -> Comparison:
    """Compare candidate ``outputs`` with ``reference`` (both flattened lists of tensors)."""
    if len(outputs) != len(reference):
        return Comparison(False, None, None, None, None,
                          f"forward returned {len(outputs)} output(s), reference returns {len(reference)}")
    max_abs = 0.0
    max_rel = 0.0
    bad = 0
    nonfinite = 0
    total = 0
    faults = []
    for k, (o, r) in enumerate(zip(outputs, reference)):
        tag = f"output {k}" if len(reference) > 1 else "output"
        if tuple(o.shape) != tuple(r.shape):
            return Comparison(False, None, None, None, None,
                              f"{tag} shape {tuple(o.shape)} != reference shape {tuple(r.shape)}")
        if o.dtype != r.dtype:
            return Comparison(False, None, None, None, None,
                              f"{tag} dtype {o.dtype} != reference dtype {r.dtype}")
        if o.device != r.device:
            o = o.to(r.device)
        n = r.numel()
        total += n
        of = o.reshape(-1)
        rf = r.reshape(-1)
        for s in range(0, n, CHUNK_ELEMENTS):
            oc = of[s:s + CHUNK_ELEMENTS].to(torch.float64)
            rc = rf[s:s + CHUNK_ELEMENTS].to(torch.float64)
            r_nan = torch.isnan(rc)
            r_inf = torch.isinf(rc)
            o_nan = torch.isnan(oc)
            o_inf = torch.isinf(oc)
            nan_bad = int((o_nan != r_nan).sum())
            inf_bad = int((r_inf & (oc != rc)).sum()) + int((o_inf & ~r_inf).sum())
            if nan_bad or inf_bad:
                faults.append(f"{tag}: {nan_bad} NaN and {inf_bad} Inf element(s) where the reference differs")
            fin = torch.isfinite(rc) & torch.isfinite(oc)
            diff = (oc - rc).abs()
            diff = torch.where(fin, diff, torch.zeros_like(diff))
            tol = atol + rtol * rc.abs()
            chunk_bad = int((diff > torch.where(fin, tol, torch.full_like(tol, math.inf))).sum())
            bad += chunk_bad + nan_bad + inf_bad
            nonfinite += nan_bad + inf_bad
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
                big = fin & (rc.abs() > atol)
                rel = torch.where(big, diff / rc.abs().clamp_min(atol), torch.zeros_like(diff))
                max_rel = max(max_rel, float(rel.max()))
    passed = bad == 0
    fault = None
    if faults:
        fault = faults[0]
    elif not passed:
        fault = f"{bad} of {total} element(s) outside atol={atol:g} + rtol={rtol:g}*|ref| (max abs error {max_abs:.3g})"
    return Comparison(passed, max_abs, max_rel, bad, total, fault, nonfinite)
