"""The input-rounding term's moves (:meth:`kbv.reference.oracle.Oracle.input_rounding`): every
floating-point input element moved by one fp32 rounding, up or by a pseudo-random sign, in float64.
On cuda one fused pass makes the same values (:func:`kbv.reference.fused.rounded_move`)."""

from __future__ import annotations

import torch

from kbv.reference import fused
from kbv.reference.passes import chunk_elements, host_threads
from kbv.reference.policy import CHUNK_ELEMENTS


def signs(start: int, n: int, seed: int, device: torch.device) -> torch.Tensor:
    """±1 (float64) for the flat element indices ``start .. start + n - 1``: a hash of each index
    and ``seed`` (a 64-bit multiply and xor-shifts), so the draw of an element is the same whether
    the tensor is moved whole, in chunks or in pieces of its batch."""
    h = torch.arange(start, start + n, device=device, dtype=torch.int64).mul_(-7046029254386353131).add_(seed)
    h = h.bitwise_xor_(h >> 29).mul_(-4658895280553007687)
    h = h.bitwise_xor_(h >> 32)
    return ((h >> 17) & 1).to(torch.float64).mul_(2).sub_(1)


def rounded_up(a: torch.Tensor, device: torch.device, seed: int | None = None, offset: int = 0) -> torch.Tensor:
    """``a`` in float64 on ``device`` with every element moved by one fp32 rounding: up, ``a + eps *
    |a|``, or with ``seed`` up or down by a draw, ``a ± eps * |a|`` (:func:`signs` of the element's
    flat index plus ``offset``, where ``a`` is a piece of a larger tensor), made
    :func:`kbv.reference.passes.chunk_elements` at a time on the host's idle cores
    (:meth:`kbv.reference.oracle.Oracle.input_rounding`): no full-size temporaries, and ``a`` is not written. A
    contiguous ``a`` already on a cuda ``device`` takes :func:`kbv.reference.fused.rounded_move`
    instead: the same values in one pass (12 bytes moved per float32 element against 84, or 324
    with the draw)."""
    if (a.device == torch.device(device) and a.dtype in fused.MOVE_DTYPES and a.is_contiguous()
            and fused.available(a.device)):
        return fused.rounded_move(a, seed, offset)  # cuda: one pass, the same values
    eps = torch.finfo(torch.float32).eps
    m = torch.empty(a.shape, dtype=torch.float64, device=device)
    src, dst = a.reshape(-1), m.view(-1)
    step = chunk_elements(device, CHUNK_ELEMENTS)
    with host_threads(device):
        for s in range(0, src.numel(), step):
            part = dst[s:s + step]
            part.copy_(src[s:s + step])  # float64 in the result's own memory: no chunk copied twice
            move = part.abs().mul_(eps)
            if seed is not None:
                move.mul_(signs(offset + s, part.numel(), seed, device))
            # the move rounded on its own, then added: ``add_(alpha=)`` may fuse the two (one rounding
            # on AVX2 hosts), which differs where ``eps * |a|`` underflows (float64 below 2^-999)
            part.add_(move)
    return m


#: the input-rounding moves (:meth:`kbv.reference.oracle.Oracle.input_rounding`): every element up (None), and up or
#: down by a fixed pseudo-random draw (the seed; the draw needs no secrecy, it only has to mix signs).
ROUNDING_MOVES: tuple[int | None, ...] = (None, 0x5EED)
