"""A timed call's inputs: a timing set written into the caller's buffer, a share of its elements
taken from another set at secret positions (the mix), and a few elements changed. The same code
on both sides of the trust boundary, so the trusted side rebuilds exactly the values a call got.
Part of the worker's side: nothing here imports trusted code."""

from __future__ import annotations

from typing import Collection, Sequence

import torch

#: share of each input tensor's elements that a timed call of the candidate takes from another
#: timing set (kbv choice). With one element changed per call, two caches still won: a matmul that patched only the rows and columns of C whose inputs changed (PASS 6.2x) and a
#: mean cross-entropy that ignored changes too small to move it (PASS 8.9x). At 1/8 every row and
#: column of a large operand changes and the output moves by far more than any error budget.
MIX_FRACTION = 0.125


#: elements mixed at a time by :func:`mix_values` (its temporaries stay near 20 MiB).
MIX_CHUNK_ELEMENTS = 1 << 22


def _mixes(ai: int, a: object, b: object, skip: Collection[int]) -> bool:
    """Whether :func:`mix_values` changes input ``ai`` (``a``, with ``b`` of the source set)."""
    return ai not in skip and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
        and a.numel() > 0


def mix_values(args: Sequence[object], source: Sequence[object], seed: int, skip: Collection[int] = (),
               fraction: float = MIX_FRACTION, *, inplace: bool = False, into: Sequence[object] | None = None) -> list:
    """``args`` where a random ``fraction`` of each tensor's elements (all of them at 1) take the values the
    same-shaped tensor of ``source`` (another timing set, so inside the problem's domain, and with
    any structure tied to positions kept) has there. Positions come from ``seed`` on the tensors'
    device, so the trusted side rebuilds exactly the values a timed call got. Inputs at positions in
    ``skip`` (declared domains a position-wise mix would break) are left as they are. New tensors;
    the inputs are not written, except with ``inplace``: contiguous tensors of ``args`` (buffers the
    caller owns) then take the mixed values themselves, the same values, with no full-size copy.
    With ``into`` (per input a buffer of its shape, contiguous, owned by the caller, or None) a mixed
    input with a buffer is written there from ``args`` and ``source`` in one pass (no copy of
    ``args`` first), and the buffer is what comes back for it."""
    out = []
    for ai, (a, b) in enumerate(zip(args, source)):
        if _mixes(ai, a, b, skip):
            g = torch.Generator(device=a.device)
            g.manual_seed((int(seed) + ai) % (1 << 63))
            b = b.to(device=a.device, dtype=a.dtype)
            target = into[ai] if into is not None and ai < len(into) else None
            # where the mixed values go: the caller's buffer, ``a`` itself, or a new tensor; a new one
            # is not filled first (both branches below write every element of it: issue 21's bytes)
            dst = target if target is not None else a if inplace and a.is_contiguous() \
                else torch.empty_like(a, memory_format=torch.contiguous_format)
            if fraction >= 1:
                dst.copy_(b)
            else:  # in chunks: no full-size mask or random tensor beside the result; no index gather
                flat, base, src = dst.view(-1), a.reshape(-1), b.reshape(-1)
                for s in range(0, flat.numel(), MIX_CHUNK_ELEMENTS):
                    part = flat[s:s + MIX_CHUNK_ELEMENTS]
                    mask = _mix_mask(part.shape, fraction, g, a.device)
                    torch.where(mask, src[s:s + MIX_CHUNK_ELEMENTS], base[s:s + MIX_CHUNK_ELEMENTS], out=part)
            a = dst
        out.append(a)
    return out


def _mix_mask(shape: torch.Size, fraction: float, g: torch.Generator, device: torch.device) -> torch.Tensor:
    """Boolean mask with each element True with probability ``fraction``, from ``g``: one random byte
    an element where ``fraction`` is a multiple of 1/256 (:data:`MIX_FRACTION` and the bound pass's
    1/2 are), a float32 draw otherwise."""
    steps = fraction * 256
    if steps >= 256 or steps <= 0:
        return torch.full(shape, steps > 0, device=device, dtype=torch.bool)
    if steps == int(steps):
        return torch.randint(0, 256, shape, generator=g, device=device, dtype=torch.uint8) < int(steps)
    return torch.rand(shape, generator=g, device=device) < fraction


def call_inputs(buffer: list, sets: Sequence[Sequence[object]], index: int, mix: tuple = (),
                mutate: Sequence[tuple] = ()) -> list:
    """The inputs of one timed call, written into ``buffer`` (a list of tensors of a timing set's
    shapes, owned by the caller): timing set ``index``, then ``mix`` (``(source set index, seed[,
    skip[, fraction]])``, :func:`mix_values`), then ``mutate`` (``(arg index, index tuple, value)``
    changes). The same values on both sides of the trust boundary."""
    n = len(sets)
    src = sets[index % n]
    direct: set[int] = set()
    if mix:  # a mixed input is written from both sets in one pass, with no copy of the set first
        source, seed, *rest = mix
        other = sets[int(source) % n]
        skip = rest[0] if rest else ()
        direct = {k for k, (a, b) in enumerate(zip(src, other)) if _mixes(k, a, b, skip)
                  and isinstance(buffer[k], torch.Tensor) and buffer[k].is_contiguous() and buffer[k].shape == a.shape}
    for k, a in enumerate(src):
        if isinstance(a, torch.Tensor):
            if k not in direct:
                buffer[k].copy_(a)
        else:
            buffer[k] = a
    if mix:
        into = [buffer[k] if k in direct else None for k in range(len(src))]
        for k, a in enumerate(mix_values(src, other, seed, *rest, into=into)):
            if isinstance(a, torch.Tensor) and a is not buffer[k] and a is not src[k]:
                buffer[k].copy_(a)  # mixed apart (a buffer that is not contiguous)
    for ai, where, value in mutate:
        buffer[ai][tuple(where)] = value
    return buffer
