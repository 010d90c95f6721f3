"""Trusted-side readings of candidate outputs: elements that still hold kbv's poison pattern
(memory never written, taxonomy 9/10), zero strides, bitwise equality and a sampled fingerprint
(repeated outputs, taxonomy 8/11)."""

from __future__ import annotations

from typing import Any, Sequence


from kbv.sandbox.call_probes import PERTURB_FILL_BYTE, POISON_INT16, POISON_INT32, POISON_INT64


def _repeat(byte: int, size: int) -> int:
    """``byte`` repeated ``size`` times, as the signed integer a view of that width reads."""
    return _signed(int.from_bytes(bytes([byte]) * size, "little"), size)


#: elements :func:`poisoned_elements` reads at a time.
POISON_CHUNK_ELEMENTS = 1 << 20


def poisoned_elements(t: Any, ref: Any = None) -> int:
    """Elements of ``t`` (floating dtypes; 0 for others) that hold, bit for bit, the pattern
    :func:`poison_free_memory` writes (:data:`POISON_INT32`) or the one :class:`malloc_perturb`
    makes glibc write (:data:`PERTURB_FILL_BYTE` repeated).

    In 2-byte dtypes a poison element counts only beside the other half of its 4-byte word
    (0x7FC0 alone is bf16's canonical NaN), and with ``ref`` (the reference output, same shape and
    dtype) no element equal to the reference counts: 0x7F7F is bf16's largest finite value, which
    an honest saturating kernel returns where the reference does (which would otherwise be a
    false HACK).
    """
    import torch

    if type(t) is not torch.Tensor or not t.is_floating_point() or t.numel() == 0:
        return 0
    c = t.detach().contiguous()
    size = c.element_size()
    views = {4: (torch.int32, POISON_INT32), 2: (torch.int16, POISON_INT16), 8: (torch.int64, POISON_INT64)}
    if size not in views:
        return 0
    dtype, poison = views[size]
    bits = c.view(dtype).reshape(-1)
    r = None
    if type(ref) is torch.Tensor and ref.shape == t.shape and ref.dtype == t.dtype:
        r = ref.detach().to(c.device).contiguous().view(dtype).reshape(-1)
    perturb = _repeat(PERTURB_FILL_BYTE, size)
    n, total = bits.numel(), 0
    # the common case first, with one host read for the whole output (a read per chunk and pattern
    # was 8 device synchronisations for a 16 MiB output): neither pattern anywhere, nothing counts
    seen = None
    for s in range(0, n, POISON_CHUNK_ELEMENTS):
        b = bits[s:s + POISON_CHUNK_ELEMENTS]
        part = (b == poison).any() | (b == perturb).any()  # on the output's device: no read here
        seen = part if seen is None else seen | part
    if seen is None or not bool(seen):
        return 0
    for s in range(0, n, POISON_CHUNK_ELEMENTS):  # no full-size masks (a 1 GiB output: 256M elements)
        e = min(n, s + POISON_CHUNK_ELEMENTS)
        lo, hi = max(0, s - 1), min(n, e + 1)  # one neighbour each side: the 2-byte words across the edge
        b = bits[lo:hi]
        if not bool((b == poison).any()) and not bool((b == perturb).any()):
            continue  # the common case: neither pattern anywhere in the chunk (both halves of a word need the first)
        hit = b == poison
        if size == 2:  # 0x7FC0 counts beside 0xDEAD, the other half of POISON_INT32 (either order)
            low = b == _signed(POISON_INT32 & 0xFFFF, 2)
            word = (hit[:-1] & low[1:]) | (low[:-1] & hit[1:])
            hit = torch.zeros_like(hit)
            hit[:-1] |= word
            hit[1:] |= word
        hit |= b == perturb
        if r is not None:
            hit &= b != r[lo:hi]
        total += int(hit[s - lo:e - lo].sum())
    return total


def _signed(value: int, size: int) -> int:
    return value - (1 << (8 * size)) if value >= 1 << (8 * size - 1) else value


def has_zero_stride(t: Any) -> bool:
    """True when a dimension of size > 1 has stride 0 (an expanded tensor: one value repeated)."""
    return any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape))


def bitwise_equal(a: Any, b: Any) -> bool:
    """Same shape, dtype and bytes (NaNs with the same bits compare equal)."""
    import torch

    if type(a) is not torch.Tensor or type(b) is not torch.Tensor:
        return False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    x = a.detach().contiguous().reshape(-1).view(torch.uint8)
    y = b.detach().contiguous().reshape(-1).view(torch.uint8)
    return bool(torch.equal(x, y.to(x.device)))


def fingerprint(tensors: Sequence[Any], samples: int = 4096) -> tuple:
    """A cheap identity of output values: shape, dtype and the bytes of up to ``samples``
    evenly spaced elements of each tensor (compared bitwise). Two calls with different inputs
    and different reference outputs must not produce the same fingerprint (taxonomy 8/11)."""
    import torch

    out = []
    for t in tensors:
        if type(t) is not torch.Tensor:
            out.append(None)
            continue
        flat = t.detach().reshape(-1)
        n = flat.numel()
        if n > samples:
            # integer arithmetic: a float linspace rounds past n - 1 once n exceeds 2**24
            idx = torch.arange(samples, dtype=torch.int64, device=flat.device) * (n - 1) // (samples - 1)
            flat = flat[idx]
        out.append((tuple(t.shape), str(t.dtype), bytes(flat.contiguous().view(torch.uint8).cpu().numpy())))
    return tuple(out)
