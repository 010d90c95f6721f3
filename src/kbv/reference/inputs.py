"""Input sets: nominal ``get_inputs()`` draws, the hidden distributions D1–D4, and kbv's secret
randomised distributions.

Runs only in the reference worker. Seeds are drawn here from :mod:`secrets` after the candidate is
loaded, so no candidate can regenerate its test inputs (taxonomy entry 22); each set records its
distribution name and seed, and :func:`build_set` rebuilds it exactly from the two.

**Hidden distributions** (KernelBench-Verified, ``hidden_tests/``): every floating-point tensor of
a ``get_inputs()`` draw scaled by ×1 (D1), ×3 (D2), ×0.01 (D3), ×−1 (D4). Integer and boolean
tensors and Python scalars are left untouched, and integer tensors keep their dtype (KernelBench
casts them to float, which breaks loss problems with class targets).

**Randomised distributions** (kbv, :data:`DISTRIBUTIONS`), one fresh secret seed each. The seed
drives ``get_inputs()`` (shapes, dtypes, integer inputs, scalars) and a private
:class:`torch.Generator` that draws new values for every floating-point tensor:

============== =========================================================================
``fresh``       the problem's own generator under the secret seed (values untouched)
``normal``      standard normal N(0, 1)
``sign-flip``   the problem's own values with independent random signs (mixed sign, same magnitudes)
``heavy-tail``  Student-t with 2 degrees of freedom (infinite variance: a few values ~100–1000)
``wide-range``  random sign × 10^U(−3, 3): magnitudes spread evenly over six decades
``outliers``    N(0, 1) with 0.1 % of the elements (at least one) set to ±1000
``near-zero``   N(0, 1) × 1e-6
``offset``      1000 + N(0, 1): a large common offset with unit spread (cancellation: one-pass
                variance, ``x - mean``, softmax without max-subtraction)
============== =========================================================================

Values are drawn in float64 and cast to the tensor's dtype. A problem may declare input domains
(:mod:`kbv.reference.domains`); the randomised values are then projected into them (``fresh`` excepted: the
problem's own generator is trusted to respect its own domain), integer inputs declared
``index:LOW:HIGH`` are redrawn in that range, and ``fixed`` inputs are never changed.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from kbv.reference.domains import Domain
from kbv.model import records
from kbv.model.records import InputKind

#: D1–D4 of KernelBench-Verified: name → factor applied to floating-point inputs.
HIDDEN_DISTRIBUTIONS: dict[str, float] = {"D1": 1.0, "D2": 3.0, "D3": 0.01, "D4": -1.0}

PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class InputSet:
    """One list of forward arguments, with where it came from.

    The tensors are made on first use of :attr:`args` (``maker`` draws them again from the set's
    seed: the same name, seed and device give the same values) and dropped by :meth:`release`,
    so a verification holds one set at a time (issue 9: a 6 GiB input held fifteen times over
    killed the reference worker). ``args`` given directly are kept as they are.
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


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
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


def shared_clone(args: Sequence[Any]) -> list[Any]:
    """:func:`clone_args` for sending to another process: CPU tensors are made in shared memory
    and filled there (one copy of each; cloning first and then sharing holds two), cuda tensors
    cloned (they travel by CUDA IPC)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "cpu":
            t = torch.empty(a.shape, dtype=a.dtype).share_memory_()
            t.copy_(a)
            a = t
        elif isinstance(a, torch.Tensor):
            a = a.clone()
        out.append(a)
    return out


# Randomised value generators -------------------------------------------------------------------
# Each takes the problem's own values of one float tensor (float64, CPU) and a generator, and
# returns new float64 values of the same shape.

def _f64(g: torch.Generator) -> dict:
    return {"generator": g, "dtype": torch.float64, "device": g.device}


def _normal(base: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return torch.randn(base.shape, **_f64(g))


def _signs(shape: torch.Size, g: torch.Generator) -> torch.Tensor:
    return torch.where(torch.rand(shape, **_f64(g)) < 0.5, -1.0, 1.0).to(torch.float64)


def _sign_flip(base: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return base * _signs(base.shape, g)


def _heavy_tail(base: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # Student-t, nu = 2: z / sqrt(chi2_2 / 2) and chi2_2 / 2 ~ Exp(1) = -log U
    z = torch.randn(base.shape, **_f64(g))
    u = torch.rand(base.shape, **_f64(g))
    e = (-torch.log1p(-u)).clamp_min(1e-12)  # Exp(1); the clamp bounds |t| below ~1e6
    return z / torch.sqrt(e)


WIDE_RANGE_DECADES = 3.0  #: magnitudes 10^-3 .. 10^3
OUTLIER_FRACTION = 1e-3
OUTLIER_MAGNITUDE = 1e3
NEAR_ZERO_SCALE = 1e-6


def _wide_range(base: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    e = (torch.rand(base.shape, **_f64(g)) * 2 - 1) * WIDE_RANGE_DECADES
    return _signs(base.shape, g) * torch.pow(10.0, e)


def _outliers(base: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    v = torch.randn(base.shape, **_f64(g))
    n = v.numel()
    if n:
        m = max(1, int(round(OUTLIER_FRACTION * n)))
        idx = torch.randperm(n, generator=g, device=g.device)[:m]
        flat = v.view(-1)
        flat[idx] = _signs(torch.Size([m]), g) * OUTLIER_MAGNITUDE
    return v


def _near_zero(base: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return torch.randn(base.shape, **_f64(g)) * NEAR_ZERO_SCALE


OFFSET = 1e3


def _offset(base: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    # a large common offset and a unit spread: cancellation (x - mean, E[x^2] - E[x]^2, exp(x))
    return OFFSET + torch.randn(base.shape, **_f64(g))


@dataclass(frozen=True)
class Distribution:
    """A named randomised distribution (see the module docstring).

    ``values`` is None for ``fresh`` (the problem's own values are kept as drawn).
    """

    name: str
    description: str
    values: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None
    transform: str = ""  #: short form stored as the set's ``transform``.


DISTRIBUTIONS: dict[str, Distribution] = {}


def register_distribution(d: Distribution) -> Distribution:
    """Add a randomised distribution to the registry.

    Raises:
        ValueError: the name is taken (by another randomised distribution or by D1–D4).
    """
    if d.name in DISTRIBUTIONS or d.name in HIDDEN_DISTRIBUTIONS:
        raise ValueError(f"distribution {d.name!r} is already registered")
    DISTRIBUTIONS[d.name] = d
    return d


for _d in (
    Distribution("fresh", "the problem's own get_inputs() under a secret seed", None, "get_inputs()"),
    Distribution("normal", "standard normal N(0, 1)", _normal, "N(0,1)"),
    Distribution("sign-flip", "the problem's own values with random signs", _sign_flip, "+-get_inputs()"),
    Distribution("heavy-tail", "Student-t, 2 degrees of freedom", _heavy_tail, "t(2)"),
    Distribution("wide-range", "random sign x 10^U(-3, 3)", _wide_range, "+-10^U(-3,3)"),
    Distribution("outliers", "N(0, 1) with 0.1 % of elements set to +-1000", _outliers, "N(0,1)+0.1% +-1e3"),
    Distribution("near-zero", "N(0, 1) x 1e-6", _near_zero, "1e-6 N(0,1)"),
    Distribution("offset", "1000 + N(0, 1)", _offset, "1e3+N(0,1)"),
):
    register_distribution(_d)

#: kbv's default randomised distributions, in the order they are run (the EvalConfig default).
DEFAULT_DISTRIBUTIONS: tuple[str, ...] = records.DEFAULT_DISTRIBUTIONS
assert all(n in DISTRIBUTIONS for n in DEFAULT_DISTRIBUTIONS)


def check_names(hidden: Sequence[str], distributions: Sequence[str]) -> None:
    """Raises ValueError naming any unknown hidden or randomised distribution."""
    bad = [n for n in hidden if n not in HIDDEN_DISTRIBUTIONS]
    if bad:
        raise ValueError(f"unknown hidden distribution(s) {bad}; known: {list(HIDDEN_DISTRIBUTIONS)}")
    bad = [n for n in distributions if n not in DISTRIBUTIONS]
    if bad:
        raise ValueError(f"unknown randomised distribution(s) {bad}; known: {list(DISTRIBUTIONS)}")


#: elements of one tensor given new values at a time: the float64 temporaries of a distribution
#: (up to four of this size for ``heavy-tail``) stay near 128 MiB whatever the input's size.
VALUE_CHUNK_ELEMENTS = 1 << 22


def _generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    # a separate stream from get_inputs(): the values do not repeat the problem's own draw
    return torch.Generator(device=device).manual_seed((seed * 0x9E3779B1 + 1) % (1 << 63))


def _new_values(a: torch.Tensor, dist: Distribution, g: torch.Generator) -> torch.Tensor:
    """``dist``'s values for a tensor shaped like ``a``, in ``a``'s dtype and on its device, made
    :data:`VALUE_CHUNK_ELEMENTS` at a time (each chunk from the base values at its positions)."""
    base = a.detach().contiguous()
    out = torch.empty(base.shape, dtype=a.dtype, device=a.device)
    src, dst = base.view(-1), out.view(-1)
    for s in range(0, src.numel(), VALUE_CHUNK_ELEMENTS):
        chunk = src[s:s + VALUE_CHUNK_ELEMENTS].to(torch.float64)
        dst[s:s + VALUE_CHUNK_ELEMENTS] = dist.values(chunk, g).to(a.dtype)
        del chunk
    return out


def randomised(args: Sequence[Any], dist: Distribution, seed: int,
               domains: Mapping[int, Domain] | None = None) -> list[Any]:
    """New values for every floating-point tensor of ``args`` (one ``get_inputs()`` draw).

    Values are made on each tensor's own device (a cuda generator for cuda tensors) and in chunks,
    so a large input needs no float64 copy of itself. Integer tensors declared ``index:LOW:HIGH``
    are redrawn in range; other integer and boolean tensors, Python scalars and ``fixed`` inputs
    are kept. A tensor with a declared domain is projected whole (a domain such as ``probability``
    or ``symmetric`` couples elements), on the CPU.
    """
    domains = domains or {}
    gens: dict[str, torch.Generator] = {}

    def gen(device: torch.device) -> torch.Generator:
        key = str(device)
        if key not in gens:
            gens[key] = _generator(seed, device)
        return gens[key]

    out = []
    for i, a in enumerate(args):
        dom = domains.get(i)
        if dom is not None and dom.kind == "fixed":
            out.append(a)
        elif is_float_tensor(a) and dist.values is not None:
            if dom is None:
                out.append(_new_values(a, dist, gen(a.device)))
            else:
                v = dist.values(a.detach().to("cpu", torch.float64), gen(torch.device("cpu")))
                out.append(dom.project(v, a.cpu(), gen(torch.device("cpu"))).to(a.device))
        elif isinstance(a, torch.Tensor) and dom is not None and dom.kind == "index" and dist.values is not None:
            out.append(dom.project(a.cpu(), a.cpu(), gen(torch.device("cpu"))).to(a.device))
        else:
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
        return randomised(draw(get_inputs, seed, device), dist, seed, domains), None

    return InputSet(name, InputKind.RANDOM, dist.transform or dist.name, seed, maker=make)


def randomised_sets(get_inputs: Callable[[], Sequence[Any]], names: Sequence[str],
                    domains: Mapping[int, Domain] | None = None, device: Device = None) -> list[InputSet]:
    """One set per randomised distribution, each under its own fresh secret seed, made on
    ``device`` when first used."""
    check_names((), names)
    return [build_set(get_inputs, n, secret_seed(), domains, device) for n in names]
