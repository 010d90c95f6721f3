"""Declared input domains: what values a problem's inputs may take.

A problem file may declare, next to ``get_inputs()``::

    KBV_METADATA = {
        "input_domains": {
            0: "positive",            # by position in get_inputs()
            "targets": "index:0:10",  # or by forward() parameter name
        },
    }

kbv's randomised distributions (:mod:`kbv.reference.inputs`) draw values for every floating-point input and
then *project* them into the declared domain, so a problem whose reference is only defined on,
say, probability vectors is tested on probability vectors. The scaled sets D1–D4 are kept as
KernelBench-Verified defines them; one whose scaling leaves a declared domain (``x-1`` of a
``positive`` input) is dropped with that reason instead of judged.

Domains (``spec`` strings):

========================  ==================================================================
``real``                  any value (the default for floating-point inputs)
``positive``              > 0: ``|v|``, zeros raised to the dtype's smallest normal number
``nonnegative``           >= 0: ``|v|``
``unit``                  in [0, 1): ``|v| / (1 + |v|)`` (keeps magnitudes' order, near-zero stays near zero)
``probability[:DIM]``     non-negative, summing to one along ``DIM`` (default -1): ``|v| / sum |v|``
``symmetric``             symmetric in the last two dims: ``(v + v^T) / 2``
``spd``                   symmetric positive definite (last two dims): ``v v^T / n + I``
``index:LOW:HIGH``        integer tensor with values in [LOW, HIGH): redrawn uniformly by the
                          randomised distributions (undeclared integer tensors are kept as drawn)
``fixed``                 never changed by any distribution (masks, lookup tables)
========================  ==================================================================

Runs in the reference worker only (it reads the imported problem module).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

METADATA_NAME = "KBV_METADATA"
KINDS = ("real", "positive", "nonnegative", "unit", "probability", "symmetric", "spd", "index", "fixed")
_PROB_TOL = 1e-3  #: |sum - 1| allowed when checking a probability input (fp32/bf16 rounding).


class DomainError(ValueError):
    """A malformed ``KBV_METADATA`` declaration (one line)."""


@dataclass(frozen=True)
class Domain:
    """One parsed domain spec."""

    kind: str
    dim: int = -1  #: ``probability``: the dimension that sums to one.
    low: int = 0  #: ``index``: inclusive lower bound.
    high: int = 0  #: ``index``: exclusive upper bound.

    @property
    def spec(self) -> str:
        if self.kind == "probability":
            return f"probability:{self.dim}"
        if self.kind == "index":
            return f"index:{self.low}:{self.high}"
        return self.kind

    # projection ---------------------------------------------------------------------------------
    def project(self, v: torch.Tensor, template: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Values ``v`` (float64, shaped like ``template``) mapped into this domain, in ``template``'s dtype.

        ``index`` ignores ``v`` and draws uniformly from [low, high) with ``gen``; ``fixed``
        returns ``template`` unchanged.
        """
        k = self.kind
        if k == "fixed":
            return template
        if k == "index":
            return torch.randint(self.low, self.high, tuple(template.shape), generator=gen,
                                 dtype=template.dtype)
        if k == "positive":
            tiny = torch.finfo(template.dtype).tiny
            v = v.abs().clamp_min(tiny)
        elif k == "nonnegative":
            v = v.abs()
        elif k == "unit":
            a = v.abs()
            v = a / (1.0 + a)
        elif k == "probability":
            a = v.abs() + torch.finfo(template.dtype).tiny
            v = a / a.sum(dim=self.dim, keepdim=True)
        elif k == "symmetric":
            v = (v + v.mT) / 2
        elif k == "spd":
            n = v.shape[-1]
            v = v @ v.mT / n + torch.eye(n, dtype=v.dtype)
        out = v.to(template.dtype)
        if k == "positive":  # rounding to a narrower dtype may have produced zeros
            out = out.clamp_min(torch.finfo(template.dtype).tiny)
        return out

    # membership ---------------------------------------------------------------------------------
    def contains(self, t: torch.Tensor) -> bool:
        """Whether the tensor ``t`` lies in this domain (used to drop D1–D4 sets that leave it)."""
        k = self.kind
        if k in ("real", "fixed"):
            return True
        if k == "index":
            return t.numel() == 0 or (int(t.min()) >= self.low and int(t.max()) < self.high)
        x = t.detach().to(torch.float64)
        if k == "positive":
            return bool((x > 0).all())
        if k == "nonnegative":
            return bool((x >= 0).all())
        if k == "unit":
            return bool(((x >= 0) & (x <= 1)).all())
        if k == "probability":
            return bool((x >= 0).all()) and bool(((x.sum(dim=self.dim) - 1).abs() <= _PROB_TOL).all())
        if k in ("symmetric", "spd"):
            sym = bool(torch.allclose(x, x.mT, rtol=1e-5, atol=1e-6 * float(x.abs().max().clamp_min(1e-30))))
            if k == "symmetric" or not sym:
                return sym
            try:
                return bool((torch.linalg.eigvalsh(x) > 0).all())
            except RuntimeError:
                return False
        return True


def parse(spec: str) -> Domain:
    """Parse a domain spec string (see the module docstring).

    Raises:
        DomainError: unknown kind or malformed arguments.
    """
    if not isinstance(spec, str) or not spec:
        raise DomainError(f"domain must be a non-empty string, not {spec!r}")
    parts = spec.strip().split(":")
    kind, args = parts[0], parts[1:]
    if kind not in KINDS:
        raise DomainError(f"unknown input domain {spec!r}; known: {', '.join(KINDS)}")
    malformed = DomainError(f"malformed input domain {spec!r} (probability[:DIM], index:LOW:HIGH)")
    if kind == "probability":
        if len(args) > 1:
            raise malformed
        try:
            return Domain(kind, dim=int(args[0]) if args else -1)
        except ValueError:
            raise malformed from None
    if kind == "index":
        try:
            low, high = (int(a) for a in args) if len(args) == 2 else (None, None)
        except ValueError:
            raise malformed from None
        if low is None:
            raise malformed
        if high <= low:
            raise DomainError(f"input domain {spec!r}: empty index range")
        return Domain(kind, low=low, high=high)
    if args:
        raise DomainError(f"input domain {kind!r} takes no arguments (got {spec!r})")
    return Domain(kind)


def declared_domains(module: Any, sample: Sequence[Any]) -> dict[int, Domain]:
    """Domains a problem module declares, by argument position, checked against one input draw.

    Raises:
        DomainError: a malformed ``KBV_METADATA``, an unknown parameter name, a position out of
            range, a float domain on a non-float input or ``index`` on a non-integer one.
    """
    meta = getattr(module, METADATA_NAME, None)
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise DomainError(f"{METADATA_NAME} must be a dict, not {type(meta).__name__}")
    raw = meta.get("input_domains", {})
    if not isinstance(raw, Mapping):
        raise DomainError(f"{METADATA_NAME}['input_domains'] must be a dict")
    names: list[str] = []
    model_cls = getattr(module, "Model", None)
    if model_cls is not None:
        try:
            params = list(inspect.signature(model_cls.forward).parameters)
            names = params[1:] if params and params[0] == "self" else params
        except (TypeError, ValueError):
            names = []
    out: dict[int, Domain] = {}
    for key, spec in raw.items():
        if isinstance(key, str):
            if key not in names:
                raise DomainError(f"input domain for {key!r}: forward() has no such parameter ({names})")
            pos = names.index(key)
        elif isinstance(key, int) and not isinstance(key, bool):
            pos = key
        else:
            raise DomainError(f"input domain key must be a position or a parameter name, not {key!r}")
        if not 0 <= pos < len(sample):
            raise DomainError(f"input domain for position {pos}: get_inputs() returns {len(sample)} value(s)")
        d = parse(spec)
        a = sample[pos]
        if d.kind == "index":
            if not isinstance(a, torch.Tensor) or a.is_floating_point() or a.dtype == torch.bool:
                raise DomainError(f"input {pos}: domain {d.spec!r} needs an integer tensor")
        elif d.kind not in ("real", "fixed"):
            if not isinstance(a, torch.Tensor) or not a.is_floating_point():
                raise DomainError(f"input {pos}: domain {d.spec!r} needs a floating-point tensor")
            if d.kind in ("symmetric", "spd") and (a.dim() < 2 or a.shape[-1] != a.shape[-2]):
                raise DomainError(f"input {pos}: domain {d.spec!r} needs square matrices, got {tuple(a.shape)}")
        out[pos] = d
    return out
