"""Input sets: nominal ``get_inputs()`` draws and the hidden distributions D1–D4.

Runs only in the reference worker. Seeds are drawn here from :mod:`secrets` after the candidate is
loaded, so no candidate can regenerate its test inputs (taxonomy entry 22).

Hidden distributions (KernelBench-Verified, ``hidden_tests/``): every floating-point tensor of a
``get_inputs()`` draw scaled by ×1 (D1), ×3 (D2), ×0.01 (D3), ×−1 (D4). Integer and boolean
tensors and Python scalars are left untouched, and integer tensors keep their dtype (KernelBench
casts them to float, which breaks loss problems with class targets).
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from kbv.records import InputKind

#: D1–D4 of KernelBench-Verified: name → factor applied to floating-point inputs.
HIDDEN_DISTRIBUTIONS: dict[str, float] = {"D1": 1.0, "D2": 3.0, "D3": 0.01, "D4": -1.0}

PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class InputSet:
    """One list of forward arguments, with where it came from."""

    name: str
    kind: InputKind
    transform: str
    seed: int
    args: list[Any]


def secret_seed() -> int:
    """A fresh 31-bit seed from the OS CSPRNG."""
    return secrets.randbits(31)


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % (1 << 32))


def draw(get_inputs: Callable[[], Sequence[Any]], seed: int) -> list[Any]:
    """Call the problem's ``get_inputs()`` under ``seed``; returns a new list."""
    seed_everything(seed)
    return list(get_inputs())


def is_float_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def scale(args: Sequence[Any], factor: float) -> list[Any]:
    """Multiply every floating-point tensor by ``factor``; everything else unchanged."""
    return [a * factor if is_float_tensor(a) else a for a in args]


def to_device(args: Sequence[Any], device: torch.device | str, precision: str = "fp32") -> list[Any]:
    """Move tensors to ``device``; cast floating-point ones to the precision's dtype (never integers)."""
    dtype = PRECISION_DTYPES[precision]
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = a.to(device=device, dtype=dtype if a.is_floating_point() else a.dtype)
        out.append(a)
    return out


def clone_args(args: Sequence[Any]) -> list[Any]:
    """Deep-enough copy: every tensor cloned (fresh storage), other values shared."""
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def nominal_sets(get_inputs: Callable[[], Sequence[Any]], count: int) -> list[InputSet]:
    """``count`` draws of ``get_inputs()`` under fresh secret seeds (CPU tensors)."""
    sets = []
    for i in range(count):
        seed = secret_seed()
        sets.append(InputSet(f"nominal-{i}", InputKind.NOMINAL, "get_inputs()", seed, draw(get_inputs, seed)))
    return sets


def hidden_sets(get_inputs: Callable[[], Sequence[Any]], names: Sequence[str]) -> list[InputSet]:
    """D1–D4 built from one ``get_inputs()`` draw under a fresh secret seed (CPU tensors).

    Raises:
        ValueError: an unknown distribution name.
    """
    unknown = [n for n in names if n not in HIDDEN_DISTRIBUTIONS]
    if unknown:
        raise ValueError(f"unknown hidden distribution(s) {unknown}; known: {list(HIDDEN_DISTRIBUTIONS)}")
    seed = secret_seed()
    base = draw(get_inputs, seed)
    out = []
    for name in names:
        f = HIDDEN_DISTRIBUTIONS[name]
        out.append(InputSet(name, InputKind.HIDDEN, f"x{f:g}", seed, scale(base, f)))
    return out


def nbytes(args: Sequence[Any]) -> int:
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
