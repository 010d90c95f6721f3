"""Changes of single input elements: the per-call changes of timed inputs, the perturbed cache
probe, and a content digest that stands in for a kept copy (reference worker only)."""

from __future__ import annotations

from typing import Callable, Collection

import torch

from kbv.reference.passes import chunk_elements, host_threads

#: declared domains (kbv.reference.domains) that a change of single elements would break: inputs declared so
#: get changes that keep the domain (:func:`structured_change`) and are left out of the input mix.
STRUCTURED_DOMAINS = ("fixed", "probability", "symmetric", "spd")


def content_digest(t: torch.Tensor) -> tuple:
    """Shape, dtype and two position-weighted int64 sums of the tensor's bytes, computed where it
    lies and in chunks: equal for bitwise-equal tensors, and different, but for a deliberate
    collision, for any other pair (stands in for keeping a copy to compare bitwise)."""
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    a = b = 0
    step = chunk_elements(words.device, 1 << 22)
    with host_threads(words.device):
        for s in range(0, words.numel(), step):
            w = words[s:s + step].to(torch.int64)
            idx = torch.arange(s + 1, s + 1 + w.numel(), device=w.device, dtype=torch.int64)
            a = (a + int(w.sum())) & ((1 << 64) - 1)
            b = (b + int(w.mul_(idx).sum())) & ((1 << 64) - 1)
    return tuple(t.shape), str(t.dtype), a, b


def _index(flat: int, shape: tuple) -> tuple:
    """The index tuple of row-major position ``flat`` in ``shape`` (``torch.unravel_index``'s
    result, in plain integers: its first call imports torch's symbolic-shapes module, about 1 s of
    every reference worker's first mutation on cpu)."""
    out = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        out.append(i)
    return tuple(reversed(out))


def structured_change(a: torch.Tensor, b: torch.Tensor, kind: str, g: torch.Generator) -> list[tuple]:
    """A change of a few elements of ``a`` that keeps its declared domain ``kind`` (one of
    :data:`STRUCTURED_DOMAINS`), values from ``b`` (another draw of the same domain) where it
    takes any: ``[(index tuple, value), ...]``, empty where none keeps it.

    * ``symmetric`` (square last two dims): one off-diagonal pair (i, j) and (j, i) set to ``b``'s
      value there.
    * ``spd``: one diagonal entry raised by ``|b|``'s there (A + d e_i e_i^T with d >= 0 stays
      symmetric positive definite).
    * ``probability`` (rows over the last dim): two entries of one row swapped (the row's sum and
      signs stay).
    * ``fixed``: none.
    """
    shape = tuple(a.shape)
    if kind in ("symmetric", "spd") and a.dim() >= 2 and shape[-1] == shape[-2] and shape[-1] >= 2:
        n = shape[-1]
        batch = _index(int(torch.randint(max(1, a[..., 0, 0].numel()), (1,), generator=g)), shape[:-2])
        i, j = (int(v) for v in torch.randperm(n, generator=g)[:2])
        if kind == "symmetric":
            v = b[(*batch, i, j)].to(a.dtype).item()
            return [((*batch, i, j), v), ((*batch, j, i), v)]
        d = abs(b[(*batch, i, i)].to(a.dtype).item())
        return [((*batch, i, i), (a[(*batch, i, i)] + d).item())]
    if kind == "probability" and a.dim() >= 1 and shape[-1] >= 2:
        row = _index(int(torch.randint(max(1, a[..., 0].numel()), (1,), generator=g)), shape[:-1])
        i, j = (int(v) for v in torch.randperm(shape[-1], generator=g)[:2])
        return [((*row, i), a[(*row, j)].item()), ((*row, j), a[(*row, i)].item())]
    return []


def timed_mutation(args: list, spare: list, g: torch.Generator, skip: tuple = (),
                   kinds: dict | None = None, at: Callable[[torch.Tensor, torch.Tensor], int] | None = None) -> tuple:
    """The change one timed call's inputs get: for each tensor of ``args`` (a timing set) one
    element at a random position (from ``g``) takes the value ``spare`` (another ``get_inputs()``
    draw, so inside the problem's domain) has there; an input in ``skip`` (declared
    :data:`STRUCTURED_DOMAINS`, its kind in ``kinds``) gets :func:`structured_change` instead.
    ``at``: the flat position of each change, from the tensor and its spare (default: drawn from ``g``).
    Returns ``((arg index, index tuple, value), ...)``; :func:`apply_mutation` applies it. Every
    timed call gets its own, so no two timed calls see the same values: a cache keyed by the whole
    input never hits, and one keyed by a sample of it returns a stale answer that the timed re-check
    sees (taxonomy 11; red-team rows t11-sniff-sample-cache, t11-exact-memo-symmetric)."""
    out = []
    kinds = kinds or {}
    for ai, (a, b) in enumerate(zip(args, spare)):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and tuple(a.shape) == tuple(b.shape) and a.numel()):
            continue
        if ai in skip:
            out += [(ai, where, value) for where, value in structured_change(a, b, kinds.get(ai, "fixed"), g)]
            continue
        flat = at(a, b) if at is not None else int(torch.randint(a.numel(), (1,), generator=g))
        where = _index(flat, tuple(a.shape))
        out.append((ai, where, b[where].to(a.dtype).item()))
    return tuple(out)


def apply_mutation(args: list, mutation: tuple, owned: Collection[int] = ()) -> list:
    """``args`` with :func:`timed_mutation`'s changes (touched tensors cloned, except those at the
    positions in ``owned``: tensors the caller made for this call alone, changed in place)."""
    out = list(args)
    for ai, where, value in mutation:
        t = out[ai].clone() if out[ai] is args[ai] and ai not in owned else out[ai]
        t[tuple(where)] = value
        out[ai] = t
    return out


def _largest_change(a: torch.Tensor, b: torch.Tensor) -> int:
    """The row-major position where ``a`` and ``b`` (same shape) differ the most, read in chunks (no
    full-size temporary); the first position where none differ."""
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    best, where = -1.0, 0
    step = chunk_elements(fa.device, 1 << 22)
    with host_threads(fa.device):
        for s in range(0, fa.numel(), step):
            x, y = fa[s:s + step], fb[s:s + step]
            d = (y - x).abs() if x.is_complex() else (y.to(torch.float64) - x.to(torch.float64)).abs()
            d = torch.nan_to_num(d, nan=-1.0)
            i = int(d.argmax())
            if float(d[i]) > best:
                best, where = float(d[i]), s + i
    return where


def perturbed(args: list, other: list, seed: int, skip: tuple = (), kinds: dict | None = None) -> list:
    """``args`` with one element of each tensor taken from the same-shaped tensor of ``other`` (another
    draw of ``get_inputs()``, under a secret seed) at the same position, the position where the two
    draws differ the most: a cache keyed by a sample of the inputs misses it as it misses any one
    position (the position comes from the secret draw), and the stale answer it then returns is as
    far off as one element can make it (a random position's change, small by chance, once left a
    stale cache's error at 5.5 x its budget, under the 10 x that accuses; row
    t11-bound-pass-stale-cache). Inputs at positions in ``skip`` (declared
    :data:`STRUCTURED_DOMAINS`) get :func:`structured_change` of their kind in ``kinds``."""
    return apply_mutation(list(args), timed_mutation(list(args), list(other), torch.Generator().manual_seed(seed),
                                                     skip, kinds, at=_largest_change))
