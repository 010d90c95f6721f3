"""Input sets: nominal ``get_inputs()`` draws, the hidden distributions D1–D4, and kbv's secret
randomised distributions.

Runs only in the reference worker. Seeds are drawn here from :mod:`secrets` after the candidate is
loaded, so no candidate can regenerate its test inputs (taxonomy entry 22); each set records its
distribution name and seed, and :func:`build_set` rebuilds it exactly from the two.

**Hidden distributions** (KernelBench-Verified, ``hidden_tests/``): every floating-point tensor of
a ``get_inputs()`` draw scaled by ×1 (D1), ×3 (D2), ×0.01 (D3), ×−1 (D4). Integer and boolean
tensors and Python scalars are left untouched, and integer tensors keep their dtype (KernelBench
casts them to float, which breaks loss problems with class targets).

**Randomised distributions** (kbv, one fresh secret seed each): :mod:`kbv.reference.distributions`.
"""

from __future__ import annotations

import random
import secrets
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from kbv.reference.distributions import (DISTRIBUTIONS, HIDDEN_DISTRIBUTIONS, applies, check_names, is_float_tensor,
                                         other_seed, randomised, rewritten)
from kbv.reference.structure import present
from kbv.reference.domains import Domain
from kbv.model.records import InputKind


PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class InputSet:
    """One list of forward arguments, with where it came from.

    The tensors are made on first use of :attr:`args` (``maker`` draws them again from the set's
    seed: the same name, seed and device give the same values) and dropped by :meth:`release`,
    so a verification holds one set at a time (a 6 GiB input held once per set would exceed the
    memory bound many times over). ``args`` given directly are kept as they are.
    """

    def __init__(self, name: str, kind: InputKind, transform: str, seed: int, args: list[Any] | None = None,
                 drop_reason: str | None = None, *,
                 maker: Callable[[], tuple[list[Any], str | None]] | None = None):
        if args is None and maker is None:
            raise ValueError(f"input set {name}: needs args or a maker")
        self.name = name
        self.kind = kind
        self.transform = transform
        self.seed = seed
        self._drop_reason = drop_reason
        self._reason_known = maker is None or drop_reason is not None
        self._args = list(args) if args is not None else None
        self._maker = maker
        #: the tensors can be made again from the seed after :meth:`release` (a maker was given).
        self.remakeable = maker is not None

    @property
    def args(self) -> list[Any]:
        """The forward arguments (made now if they were released or never made)."""
        if self._args is None:
            assert self._maker is not None
            self._args, why = self._maker()
            if not self._reason_known:
                self._drop_reason, self._reason_known = why, True
        return self._args

    @property
    def drop_reason(self) -> str | None:
        """Why the set must not be judged (a D-set leaving a declared domain), else None. Known
        once the tensors were made (asking makes them)."""
        if not self._reason_known:
            _ = self.args
        return self._drop_reason

    @drop_reason.setter
    def drop_reason(self, why: str | None) -> None:
        self._drop_reason, self._reason_known = why, True

    def release(self) -> None:
        """Drop the tensors: a set with a maker makes them again on the next use of :attr:`args`;
        one given its ``args`` cannot be used again."""
        self._args = None
        if self._maker is None:
            self._maker = lambda: (_ for _ in ()).throw(RuntimeError(f"input set {self.name} was released"))

    def __repr__(self) -> str:
        return f"InputSet({self.name!r}, {self.kind.value}, {self.transform!r}, seed={self.seed})"


def secret_seed() -> int:
    """A fresh 31-bit seed from the OS CSPRNG."""
    return secrets.randbits(31)


def seed_torch(seed: int) -> None:
    """``torch.manual_seed(seed)`` for the generators kbv draws on: the cpu one and every CUDA
    device's (queued for CUDA's start where it has not started, as torch does). ``torch.manual_seed``
    also seeds the XPU and MPS generators, and the XPU one, never started here, queues the seed with a
    ``traceback.format_stack()`` of the caller each time: 1.2 ms a call on the H100's host, 76 calls a
    job (docs/scale.md); kbv draws nothing there."""
    seed = int(seed)
    torch.random.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def seed_everything(seed: int) -> None:
    """Seed torch (:func:`seed_torch`), ``random`` and numpy's global generator with ``seed``."""
    seed_torch(seed)
    random.seed(seed)
    np.random.seed(seed % (1 << 32))


def draw(get_inputs: Callable[[], Sequence[Any]], seed: int, device: torch.device | str | None = None) -> list[Any]:
    """Call the problem's ``get_inputs()`` under ``seed``; returns a new list.

    With ``device`` the draw runs under ``torch.device(device)``, so the problem's factory calls
    (``torch.rand``, ``torch.randn``...) make their tensors there directly: a 6 GiB cuda input never
    passes through host memory. Tensors the problem makes elsewhere explicitly stay where it put them.
    """
    seed_everything(seed)
    if device is None or torch.device(device).type == "cpu":
        return list(get_inputs())
    with torch.device(device):
        return list(get_inputs())


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


def shared_clone(args: Sequence[Any]) -> list[Any]:
    """:func:`clone_args` for sending to another process: CPU tensors are made in shared memory
    and filled there (one copy of each; cloning first and then sharing holds two), cuda tensors
    cloned (they travel by CUDA IPC)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "cpu":
            # made in shared memory at once: ``share_memory_()`` of a new tensor would copy it there
            storage = torch.UntypedStorage._new_shared(a.numel() * a.element_size())
            t = torch.empty(0, dtype=a.dtype).set_(storage, 0, a.shape)  # contiguous strides
            t.copy_(a)
            a = t
        elif isinstance(a, torch.Tensor):
            a = a.clone()
        out.append(a)
    return out


# Building the sets -------------------------------------------------------------------------------

Device = "torch.device | str | None"


def nominal_sets(get_inputs: Callable[[], Sequence[Any]], count: int, device: Device = None) -> list[InputSet]:
    """``count`` draws of ``get_inputs()`` under fresh secret seeds, made on ``device`` (default
    the CPU) when first used (:class:`InputSet`)."""
    sets = []
    for i in range(count):
        seed = secret_seed()
        sets.append(InputSet(f"nominal-{i}", InputKind.NOMINAL, "get_inputs()", seed,
                             maker=lambda seed=seed: (draw(get_inputs, seed, device), None)))
    return sets


def _leaves_domain(args: Sequence[Any], domains: Mapping[int, Domain]) -> str | None:
    for i, d in sorted(domains.items()):
        a = args[i]
        if isinstance(a, torch.Tensor) and not d.contains(a):
            return f"input {i} leaves its declared domain {d.spec!r}"
    return None


def hidden_sets(get_inputs: Callable[[], Sequence[Any]], names: Sequence[str],
                domains: Mapping[int, Domain] | None = None, device: Device = None) -> list[InputSet]:
    """D1–D4 of one ``get_inputs()`` draw under a fresh secret seed, each made (from the draw
    again) on ``device`` when first used.

    A set whose scaling takes an input out of its declared domain gets a ``drop_reason`` once made.

    Raises:
        ValueError: an unknown distribution name.
    """
    check_names(names, ())
    seed = secret_seed()

    def make(f: float) -> tuple[list[Any], str | None]:
        args = scale(draw(get_inputs, seed, device), f)
        why = _leaves_domain(args, domains or {})
        return args, (f"x{f:g}: {why}" if why else None)

    return [InputSet(name, InputKind.HIDDEN, f"x{HIDDEN_DISTRIBUTIONS[name]:g}", seed,
                     maker=lambda f=HIDDEN_DISTRIBUTIONS[name]: make(f)) for name in names]


def build_set(get_inputs: Callable[[], Sequence[Any]], name: str, seed: int,
              domains: Mapping[int, Domain] | None = None, device: Device = None) -> InputSet:
    """The randomised set ``name`` under ``seed`` (deterministic: same name, seed and device, same
    tensors), made on ``device`` when first used.

    Raises:
        ValueError: an unknown distribution name.
    """
    check_names((), (name,))
    dist = DISTRIBUTIONS[name]

    def make() -> tuple[list[Any], str | None]:
        args = draw(get_inputs, seed, device)
        if dist.rewrite is not None:  # a few places of the draw changed (kbv.reference.structure)
            return rewritten(args, dist, seed, lambda: draw(get_inputs, other_seed(seed), device), domains)
        return randomised(args, dist, seed, domains), None

    return InputSet(name, InputKind.RANDOM, dist.transform or dist.name, seed, maker=make)


def randomised_sets(get_inputs: Callable[[], Sequence[Any]], names: Sequence[str],
                    domains: Mapping[int, Domain] | None = None, device: Device = None) -> list[InputSet]:
    """One set per randomised distribution, each under its own fresh secret seed, made on
    ``device`` when first used. A ``break-*`` distribution gets a set only when one draw of
    ``get_inputs()`` (under another fresh seed, made and dropped here) shows its structure
    (:func:`kbv.reference.distributions.applies`)."""
    check_names((), names)
    shown: set[str] = set()
    if any(DISTRIBUTIONS[n].structure for n in names):
        shown = present(draw(get_inputs, secret_seed(), device), domains)
    return [build_set(get_inputs, n, secret_seed(), domains, device) for n in names
            if applies(DISTRIBUTIONS[n], shown)]
