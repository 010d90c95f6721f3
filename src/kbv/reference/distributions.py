"""kbv's secret randomised input distributions and the hidden distributions D1–D4 (names and
factors); the input sets built from them are :mod:`kbv.reference.inputs`.

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

**Inputs that break a pattern in a few places** (:mod:`kbv.reference.structure`): a ``get_inputs()``
draw under the secret seed, changed at 1–8 secret positions per tensor, the rest of it as drawn:

==================== ========================================================================
``few-positions``    values that another ``get_inputs()`` draw has at those positions
``break-triangular`` entries set in the zero triangle of a triangular input
``break-banded``     entries set just outside (or anywhere outside) a banded input's band
``break-symmetric``  ``a[i, j]`` of a symmetric input changed, ``a[j, i]`` kept
``break-sorted``     two entries of a row swapped in a float input sorted along its last dim
``break-sparse``     zero entries set in an input at least 3/4 zeros (one-hot rows, masks)
==================== ========================================================================

A ``break-*`` set is built only when a draw of ``get_inputs()`` shows its structure
(:func:`applies`); its values are the tensor's own non-zero entries. Like ``fresh``, these start
from the problem's own draw and keep elementwise declared domains; inputs declared with a coupling
domain (``fixed``, ``probability``, ``symmetric``, ``spd``) are never changed.

Values are drawn in float64 and cast to the tensor's dtype. A problem may declare input domains
(:mod:`kbv.reference.domains`); the randomised values are then projected into them (``fresh`` excepted: the
problem's own generator is trusted to respect its own domain), integer inputs declared
``index:LOW:HIGH`` are redrawn in that range, and ``fixed`` inputs are never changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from kbv.model import records
from kbv.reference.domains import Domain
from kbv.reference.passes import chunk_elements, host_threads
from kbv.reference.structure import STRUCTURES, break_structure, few_positions

#: D1–D4 of KernelBench-Verified: name → factor applied to floating-point inputs.
HIDDEN_DISTRIBUTIONS: dict[str, float] = {"D1": 1.0, "D2": 3.0, "D3": 0.01, "D4": -1.0}


def is_float_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


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

    ``values`` is None for ``fresh`` (the problem's own values are kept as drawn) and for the
    distributions that change a draw in a few places, which give ``rewrite`` instead.
    """

    name: str
    description: str
    values: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None
    transform: str = ""  #: short form stored as the set's ``transform``.
    #: the whole draw rewritten: ``(draw, another draw's maker, generator, domains) -> (args, drop
    #: reason or None)`` (:func:`rewritten`).
    rewrite: Callable[[list, Callable[[], list], torch.Generator, Mapping[int, Domain]],
                      tuple[list, str | None]] | None = None
    #: the input structure (:data:`kbv.reference.structure.STRUCTURES`) the set breaks: built only
    #: where a draw shows it (:func:`applies`).
    structure: str = ""


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

def _few_positions(args: list, other: Callable[[], list], g: torch.Generator,
                   domains: Mapping[int, Domain]) -> tuple[list, str | None]:
    return few_positions(args, other(), g, domains), None


def _breaking(kind: str) -> Callable[..., tuple[list, str | None]]:
    def rewrite(args: list, other: Callable[[], list], g: torch.Generator,
                domains: Mapping[int, Domain]) -> tuple[list, str | None]:
        out, notes = break_structure(kind, args, g, domains)
        return out, (None if notes else f"get_inputs() drew no {kind} input under this seed")
    return rewrite


_BROKEN = {
    "triangular": "entries set in the zero triangle",
    "banded": "entries set outside the band",
    "symmetric": "a[i,j] changed, a[j,i] kept",
    "sorted": "two entries of a sorted row swapped",
    "sparse": "zero entries set",
}
assert set(_BROKEN) == set(STRUCTURES)

register_distribution(Distribution("few-positions", "get_inputs() with 1-8 positions per tensor from another draw",
                                   None, "get_inputs(), 1-8 elements from another draw", _few_positions))
for _kind, _what in _BROKEN.items():
    register_distribution(Distribution(f"break-{_kind}", f"get_inputs() with its {_kind} structure broken: "
                                       f"1-8 {_what}", None, f"get_inputs(), 1-8 {_what}", _breaking(_kind),
                                       structure=_kind))

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
    :data:`VALUE_CHUNK_ELEMENTS` at a time (on the host fewer, :mod:`kbv.reference.passes`; each
    chunk from the base values at its positions)."""
    base = a.detach().contiguous()
    out = torch.empty(base.shape, dtype=a.dtype, device=a.device)
    src, dst = base.view(-1), out.view(-1)
    step = chunk_elements(a.device, VALUE_CHUNK_ELEMENTS)
    with host_threads(a.device):
        for s in range(0, src.numel(), step):
            chunk = src[s:s + step].to(torch.float64)
            dst[s:s + step] = dist.values(chunk, g).to(a.dtype)
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


def other_seed(seed: int) -> int:
    """The seed of the second ``get_inputs()`` draw that ``few-positions`` takes values from."""
    return (seed * 0x2545F491 + 0x1B873593) % (1 << 31)


def rewritten(args: list, dist: Distribution, seed: int, other: Callable[[], list],
              domains: Mapping[int, Domain] | None = None) -> tuple[list, str | None]:
    """``dist.rewrite`` of the draw ``args`` under ``seed`` (positions from a private generator
    seeded from it; ``other`` makes another draw): ``(args, drop reason or None)``."""
    assert dist.rewrite is not None, dist.name
    return dist.rewrite(args, other, _generator(seed), domains or {})


def applies(dist: Distribution, structures: set[str]) -> bool:
    """Whether a set of ``dist`` is built for a problem whose draw shows ``structures``
    (:func:`kbv.reference.structure.present`): every distribution but a ``break-*`` one whose
    structure is absent."""
    return not dist.structure or dist.structure in structures
