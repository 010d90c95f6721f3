"""Baselines and the global numeric flags that define them.

* **eager-fp32**: PyTorch eager with TF32 off for matmul and cuDNN
  (``torch.backends.cuda.matmul.allow_tf32 = False``, ``torch.backends.cudnn.allow_tf32 = False``,
  ``torch.set_float32_matmul_precision("highest")``): kbv's strict fp32 baseline, fp32 arithmetic
  everywhere (what KernelBench's protocol means by fp32; stricter than the flags its scripts ran
  with, see eager-fp32-cudnn-tf32).
* **eager-tf32**: the same with both TF32 switches on (``"high"`` matmul precision): what a
  PyTorch user on an Ampere-or-later GPU realistically gets, and KernelBench-Verified's TF32
  baseline (``torch.set_float32_matmul_precision("high")``, cuDNN TF32 left at its default, on).
  On an H200 a 4096² float32 matmul takes 2.72 ms strict vs 0.37 ms TF32 (measured, see
  docs/gpu-runs.md), so any kernel that merely uses TF32 "wins" ~7× against eager-fp32
  (KernelBench-Verified, §3).
* **eager-fp32-cudnn-tf32**: PyTorch's default flags: TF32 off for matmul, on for cuDNN
  (``torch.backends.cuda.matmul.allow_tf32 = False``, ``torch.backends.cudnn.allow_tf32 = True``,
  ``"highest"`` matmul precision). The fp32 baseline KernelBench and KernelBench-Verified
  actually measured (``results/timing/<hw>/baseline_time_torch.json``): their
  ``scripts/generate_baseline_time.py`` sets no flag, so convolutions and RNNs may run in TF32
  while matmuls do not. It differs from eager-fp32 only on cuda and only for cuDNN ops; select it
  (``EvalConfig.baselines``) to reproduce the papers' fp32 numbers.

Every phase sets its flags explicitly with :func:`apply_flags`; candidates always run under the
eager-fp32 flags, and :func:`flag_changes` lists whatever a candidate changed.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

import torch

BASELINES = ("eager-fp32", "eager-tf32", "eager-fp32-cudnn-tf32")

#: baseline → (matmul TF32, cuDNN TF32, float32 matmul precision): the switches that tell them apart.
_TF32_SWITCHES: dict[str, tuple[bool, bool, str]] = {
    "eager-fp32": (False, False, "highest"),
    "eager-tf32": (True, True, "high"),
    "eager-fp32-cudnn-tf32": (False, True, "highest"),
}

#: one line per baseline naming its flags and whose baseline it is (reports, verdict evidence).
DESCRIPTIONS: dict[str, str] = {
    "eager-fp32": "PyTorch eager, TF32 off for matmul and cuDNN (kbv's strict fp32)",
    "eager-tf32": "PyTorch eager, TF32 on for matmul and cuDNN (KernelBench-Verified's TF32 baseline)",
    "eager-fp32-cudnn-tf32": "PyTorch eager with PyTorch's default flags: matmul TF32 off, cuDNN TF32 on "
                             "(KernelBench's and KernelBench-Verified's fp32 baseline)",
    "compile": "torch.compile (inductor, default mode) under the eager-tf32 flags",
}


#: the per-backend ``fp32_precision`` switches of PyTorch's newer TF32 API (under ``torch.backends``).
#: Once a candidate sets one, PyTorch refuses to read the legacy switches ("mix of the legacy and
#: new APIs"), so both are snapshotted and :func:`apply_flags` resets the new ones first.
NEW_API = ("fp32_precision", "cuda.matmul.fp32_precision", "cudnn.fp32_precision", "cudnn.conv.fp32_precision",
           "cudnn.rnn.fp32_precision", "mkldnn.fp32_precision", "mkldnn.matmul.fp32_precision",
           "mkldnn.conv.fp32_precision", "mkldnn.rnn.fp32_precision")
UNREADABLE = "<unreadable: legacy and new TF32 APIs mixed>"


def _new_api(name: str) -> tuple[Any, str] | None:
    obj = torch.backends
    *path, last = name.split(".")
    for part in path:
        obj = getattr(obj, part, None)
    if obj is None or not hasattr(obj, last):
        return None
    return obj, last


def _read(fn: Any) -> Any:
    try:
        return fn()
    except RuntimeError:
        return UNREADABLE


def numeric_flags() -> dict[str, Any]:
    """Snapshot of every global switch that changes float results or kernel choice (legacy
    switches that cannot be read any more read as :data:`UNREADABLE`)."""
    m = torch.backends.cuda.matmul
    flags = {
        "cuda.matmul.allow_tf32": _read(lambda: m.allow_tf32),
        "cuda.matmul.allow_fp16_reduced_precision_reduction": _read(lambda: m.allow_fp16_reduced_precision_reduction),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": _read(lambda: m.allow_bf16_reduced_precision_reduction),
        "cudnn.allow_tf32": _read(lambda: torch.backends.cudnn.allow_tf32),
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "autocast.cpu": torch.is_autocast_enabled("cpu"),
        "autocast.cuda": torch.is_autocast_enabled("cuda"),
        "grad_enabled": torch.is_grad_enabled(),
    }
    for name in NEW_API:
        where = _new_api(name)
        if where is not None:
            flags[f"backends.{name}"] = _read(lambda: getattr(*where))
    return flags


def flags_for(baseline: str) -> dict[str, Any]:
    """The complete flag set of an eager baseline (one of :data:`BASELINES`).

    Raises:
        ValueError: unknown baseline name.
    """
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; known: {', '.join(BASELINES)}")
    matmul_tf32, cudnn_tf32, precision = _TF32_SWITCHES[baseline]
    return {
        "cuda.matmul.allow_tf32": matmul_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": True,  # PyTorch defaults
        "cuda.matmul.allow_bf16_reduced_precision_reduction": True,
        "cudnn.allow_tf32": cudnn_tf32,
        "cudnn.enabled": True,
        "cudnn.benchmark": False,
        "cudnn.deterministic": False,
        "float32_matmul_precision": precision,
        "default_dtype": "torch.float32",
        "deterministic_algorithms": False,
        "autocast.cpu": False,
        "autocast.cuda": False,
        "grad_enabled": False,  # inference: no autograd graph in any timed or checked call
    }


def baseline_flags(labels: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{label: {"flags": ..., "description": ...}}`` for the eager baselines among ``labels``
    (the record a verdict keeps of which switches each of its baselines ran under); other labels
    (``compile``) get their description only."""
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        entry: dict[str, Any] = {"description": DESCRIPTIONS.get(label, label)}
        if label in BASELINES:
            entry["flags"] = {k: flags_for(label)[k] for k in
                              ("cuda.matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision")}
        out[label] = entry
    return out


def apply_flags(flags: dict[str, Any]) -> None:
    """Set every switch in ``flags`` (a dict as returned by :func:`flags_for`): the new-API
    ``fp32_precision`` switches are first reset to ``none`` (defer to the legacy ones), then the
    legacy switches are set."""
    for name in NEW_API:
        where = _new_api(name)
        if where is not None:
            try:
                setattr(*where, "none")
            except (RuntimeError, ValueError, AttributeError):
                pass
    # set_float32_matmul_precision also drives cuda.matmul.allow_tf32: set it first.
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    torch.backends.cuda.matmul.allow_tf32 = flags["cuda.matmul.allow_tf32"]
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = \
        flags["cuda.matmul.allow_fp16_reduced_precision_reduction"]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = \
        flags["cuda.matmul.allow_bf16_reduced_precision_reduction"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
    torch.backends.cudnn.enabled = flags["cudnn.enabled"]
    torch.backends.cudnn.benchmark = flags["cudnn.benchmark"]
    torch.backends.cudnn.deterministic = flags["cudnn.deterministic"]
    torch.set_default_dtype(getattr(torch, flags["default_dtype"].split(".")[-1]))
    _set_deterministic(flags["deterministic_algorithms"])
    torch.set_autocast_enabled("cpu", flags["autocast.cpu"])
    torch.set_autocast_enabled("cuda", flags["autocast.cuda"])
    torch.set_grad_enabled(flags["grad_enabled"])


def _set_deterministic(mode: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)`` where anything differs from it: the global flag,
    its warn-only switch, or Inductor's ``deterministic`` (which the call also sets) once Inductor's
    config is loaded. The call imports ``torch._inductor`` and with it ``torch._dynamo`` (about
    2 CPU-seconds, half of a CPU candidate worker's start), so a process that never compiles never
    pays for it; one that compiles later loads that config with its default, off, the eager-fp32
    value."""
    inductor = sys.modules.get("torch._inductor.config")
    if (torch.are_deterministic_algorithms_enabled() != mode
            or torch.is_deterministic_algorithms_warn_only_enabled()
            or (inductor is not None and getattr(inductor, "deterministic", mode) != mode)):
        torch.use_deterministic_algorithms(mode)


def flag_changes(expected: dict[str, Any]) -> list[str]:
    """Human-readable ``name: expected -> now`` for each switch in ``expected`` that differs now
    (pass a :func:`numeric_flags` snapshot taken after :func:`apply_flags` to cover every switch)."""
    now = numeric_flags()
    return [f"{k}: {expected[k]!r} -> {now[k]!r}" for k in expected if now.get(k) != expected[k]]
