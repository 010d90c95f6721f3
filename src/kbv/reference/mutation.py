"""Changes of single input elements: the per-call changes of timed inputs, the perturbed cache
probe, and a content digest that stands in for a kept copy (reference worker only)."""

from __future__ import annotations

import torch

from kbv.reference.passes import chunk_elements, host_threads

#: declared domains (kbv.reference.domains) that a change of single elements would break: inputs declared so
#: are left alone by the per-call changes of timed inputs.
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


def timed_mutation(args: list, spare: list, g: torch.Generator, skip: tuple = ()) -> tuple:
    """The change one timed call's inputs get: for each tensor of ``args`` (a timing set) one
    element at a random position (from ``g``) takes the value ``spare`` (another ``get_inputs()``
    draw, so inside the problem's domain) has there. Returns ``((arg index, index tuple, value),
    ...)``; :func:`apply_mutation` applies it. Every timed call gets its own, so no two timed calls
    see the same values: a cache keyed by the whole input never hits, and one keyed by a sample of
    it returns a stale answer that the timed re-check sees (taxonomy 11; red-team row t11-sniff-sample-cache)."""
    out = []
    for ai, (a, b) in enumerate(zip(args, spare)):
        if ai not in skip and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) \
                and tuple(a.shape) == tuple(b.shape) and a.numel():
            flat = int(torch.randint(a.numel(), (1,), generator=g))
            where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)) if a.dim() else ()
            out.append((ai, where, b[where].to(a.dtype).item()))
    return tuple(out)


def apply_mutation(args: list, mutation: tuple) -> list:
    """``args`` with :func:`timed_mutation`'s changes (touched tensors cloned)."""
    out = list(args)
    for ai, where, value in mutation:
        t = out[ai].clone() if out[ai] is args[ai] else out[ai]
        t[tuple(where)] = value
        out[ai] = t
    return out


def perturbed(args: list, other: list, seed: int, skip: tuple = ()) -> list:
    """``args`` with one element of each tensor (at a random position) taken from the same-shaped
    tensor of ``other`` (another draw of ``get_inputs()``); inputs at positions in ``skip``
    (declared :data:`STRUCTURED_DOMAINS`) are left as they are."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for ai, (a, b) in enumerate(zip(args, other)):
        if ai not in skip and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
                and a.numel():
            a = a.clone()  # same layout as get_inputs() made it
            k = int(torch.randint(a.numel(), (1,), generator=g))
            where = tuple(int(i) for i in torch.unravel_index(torch.tensor(k), a.shape))
            a[where] = b[where].to(a.dtype)
        out.append(a)
    return out
