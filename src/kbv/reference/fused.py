"""Fused passes on a CUDA device (issue 21, "one pass over the bytes"): every statistic a
judgement takes from a pair of tensors in one read of each, accumulated on the device, with one
host read-back per tensor pair. Reference worker only.

Three passes, each a Triton kernel registered as a torch operator (``kbv::...``, so a
``TorchDispatchMode`` such as ``bench/bytes_per_job.py`` sees and counts what it reads):

* :func:`max_error` — ``max_i |y_i - o_i| / (|o_i| + scale)`` in float64
  (:func:`kbv.reference.policy.max_error`'s figure); in torch that pass is a float64 copy of ``y``
  and six element-wise operations over it (about 116 bytes moved per float32 element, 12 here).
* :func:`allclose_figures` — the four figures of :func:`kbv.reference.comparison.compare`'s chunk pass
  (max ``|y - r|``, max relative error over ``|r| > atol``, the sweep's least tolerance, the count
  outside ``atol + rtol * |r|``), in float64; in torch about 13 operations over float64 copies.
* :func:`rounded_move` — the input-rounding term's moved inputs (``kbv.reference.rounding_moves.rounded_up``):
  the float64 copy, the move and its pseudo-random sign in one write, the same values bit for bit.

The two error passes return None where an element of either operand is not finite: the caller's torch pass then
settles NaN/Inf patterns as before (rare: the reference and the oracle are finite by then, so only a
candidate's NaN or Inf takes it). The arithmetic is the torch passes' own, in float64, so the
figures agree to float64 rounding (a fused multiply-add may round the threshold ``atol + rtol * |r|``
once where torch rounds twice: 1e-16 relative, below every tolerance kbv applies); the tests compare
the two on the same tensors (``tests/reference/test_fused.py``, under ``TRITON_INTERPRET=1`` on cpu).
Used only for cuda tensors, where Triton is importable (:func:`available`).
"""

from __future__ import annotations

import functools

import torch

#: elements one program reduces (a power of two; 4096 float64 elements = 32 KiB per operand).
BLOCK = 4096


@functools.lru_cache(maxsize=1)
def _kernels():
    """The Triton kernels and their torch operators, made on first use (None without Triton)."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001 - no Triton: the torch passes
        return None

    @triton.jit
    def _max_error_kernel(y_ptr, o_ptr, part_ptr, bad_ptr, n, scale, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        y = tl.load(y_ptr + offs, mask=m, other=0).to(tl.float64)
        o = tl.load(o_ptr + offs, mask=m, other=0).to(tl.float64)
        e = tl.abs(y - o) / (tl.abs(o) + scale)
        bad = (e != e) | (e == float("inf"))
        e = tl.where(bad, 0.0, e)
        tl.store(part_ptr + pid, tl.max(e, axis=0))
        tl.store(bad_ptr + pid, tl.max(bad.to(tl.int32), axis=0))

    @triton.jit
    def _allclose_kernel(y_ptr, r_ptr, part_ptr, count_ptr, bad_ptr, n, atol, rtol, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        y = tl.load(y_ptr + offs, mask=m, other=0).to(tl.float64)
        r = tl.load(r_ptr + offs, mask=m, other=0).to(tl.float64)
        d = tl.abs(y - r)
        ar = tl.abs(r)
        bad = (d != d) | (d == float("inf"))
        d = tl.where(bad, 0.0, d)
        t = d / (ar + 1.0)
        rel = tl.where(ar > atol, d / tl.maximum(ar, atol), 0.0)
        outside = (d > atol + rtol * ar) & m
        tl.store(part_ptr + pid * 3, tl.max(d, axis=0))
        tl.store(part_ptr + pid * 3 + 1, tl.max(rel, axis=0))
        tl.store(part_ptr + pid * 3 + 2, tl.max(t, axis=0))
        tl.store(count_ptr + pid, tl.sum(outside.to(tl.int64), axis=0))
        tl.store(bad_ptr + pid, tl.max(bad.to(tl.int32), axis=0))

    @torch.library.custom_op("kbv::max_error_partials", mutates_args=())
    def max_error_partials(y: torch.Tensor, o: torch.Tensor, scale: float) -> torch.Tensor:
        """Per program: [max error, any non-finite] as float64, shape (programs, 2)."""
        n = y.numel()
        programs = max(1, triton.cdiv(n, BLOCK))
        part = torch.empty(programs, dtype=torch.float64, device=y.device)
        bad = torch.empty(programs, dtype=torch.int32, device=y.device)
        _max_error_kernel[(programs,)](y, o, part, bad, n, float(scale), BLOCK=BLOCK)
        return torch.stack([part, bad.to(torch.float64)], dim=1)

    @torch.library.custom_op("kbv::allclose_partials", mutates_args=())
    def allclose_partials(y: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
        """Per program: [max |y-r|, max rel, max t, count outside, any non-finite] as float64."""
        n = y.numel()
        programs = max(1, triton.cdiv(n, BLOCK))
        part = torch.empty(programs * 3, dtype=torch.float64, device=y.device)
        count = torch.empty(programs, dtype=torch.int64, device=y.device)
        bad = torch.empty(programs, dtype=torch.int32, device=y.device)
        _allclose_kernel[(programs,)](y, r, part, count, bad, n, float(atol), float(rtol), BLOCK=BLOCK)
        return torch.cat([part.view(programs, 3), count.to(torch.float64).view(-1, 1),
                          bad.to(torch.float64).view(-1, 1)], dim=1)

    @triton.jit
    def _rounded_move_kernel(a_ptr, m_ptr, n, offset, seed, eps, SIGNED: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(a_ptr + offs, mask=mask, other=0).to(tl.float64)
        move = tl.abs(p) * eps
        if SIGNED:
            # kbv.reference.rounding_moves.signs: a 64-bit multiply and xor-shifts of the flat index (wrapping,
            # arithmetic shifts, as torch's int64 ops)
            h = (offs + offset) * -7046029254386353131 + seed
            h = (h ^ (h >> 29)) * -4658895280553007687
            h = h ^ (h >> 32)
            move = move * (((h >> 17) & 1).to(tl.float64) * 2.0 - 1.0)
        tl.store(m_ptr + offs, p + move, mask=mask)

    @torch.library.custom_op("kbv::rounded_move", mutates_args=())
    def rounded_move_op(a: torch.Tensor, offset: int, seed: int, signed: bool) -> torch.Tensor:
        """``a`` (flat, contiguous) in float64 with each element moved by ``eps * |a|``, signed by
        the index's draw where ``signed``."""
        n = a.numel()
        m = torch.empty(n, dtype=torch.float64, device=a.device)
        if n:
            # no fused multiply-add: the move is rounded on its own, then added, as the torch pass does
            _rounded_move_kernel[(triton.cdiv(n, BLOCK),)](a, m, n, offset, seed, torch.finfo(torch.float32).eps,
                                                           SIGNED=signed, BLOCK=BLOCK, enable_fp_fusion=False)
        return m

    return max_error_partials, allclose_partials, rounded_move_op


def available(device: torch.device | str, force: bool = False) -> bool:
    """Whether the fused passes serve tensors on ``device``: a cuda device with Triton importable
    (``force``: any device, for the tests under ``TRITON_INTERPRET=1``)."""
    return (force or torch.device(device).type == "cuda") and _kernels() is not None


#: source dtypes :func:`rounded_move` reads (each converts to float64 exactly).
MOVE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def rounded_move(a: torch.Tensor, seed: int | None, offset: int = 0) -> torch.Tensor:
    """:func:`kbv.reference.rounding_moves.rounded_up` in one pass: ``a`` in float64, every element moved
    by one fp32 rounding, ``a + eps * |a|`` (``seed`` None) or ``a ± eps * |a|`` by the draw of its
    flat index plus ``offset`` (:func:`kbv.reference.rounding_moves.signs`). The same values bit for bit
    (the move is exact: a power of two times ``|a|``, above float64's subnormals for these source
    dtypes but a float64 below 2^-999, where no fused multiply-add keeps the two roundings); 12
    bytes moved per float32 element where the torch pass moves 84 up and 324 with the draw (counted
    by a dispatch mode as ``bench/bytes_per_job.py`` counts).

    Args:
        a: contiguous, a dtype of :data:`MOVE_DTYPES`, on the device the result is wanted on.
        seed: the draw's seed, or None for every element up.
        offset: the flat index of ``a``'s first element in the tensor it is a piece of.
    Returns: float64, ``a``'s shape and device.
    """
    m = _kernels()[2](a.detach().reshape(-1), int(offset), int(seed or 0), seed is not None)
    return m.view(a.shape)


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).contiguous()


def max_error(y: torch.Tensor, o: torch.Tensor, scale: float) -> float | None:
    """``max_i |y_i - o_i| / (|o_i| + scale)`` over every element, in float64; None where an
    element's error is not finite (a NaN or Inf in either: the caller's torch pass settles it).

    Args:
        y: the output judged, any floating dtype, on ``o``'s device, ``o``'s element count.
        o: the float64 oracle output.
        scale: ``rms(o)`` (> 0).
    """
    if o.numel() == 0:
        return 0.0
    parts = _kernels()[0](_flat(y), _flat(o), float(scale))
    top, bad = torch.stack([parts[:, 0].max(), parts[:, 1].max()]).tolist()
    return None if bad else top


def allclose_figures(y: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> tuple | None:
    """(max ``|y - r|``, max ``|y - r| / max(|r|, atol)`` over ``|r| > atol``, max ``|y - r| / (1 +
    |r|)``, elements with ``|y - r| > atol + rtol * |r|``) in float64, one read of each operand;
    None where some element of either is not finite.

    Args:
        y: the candidate's output; r: the reference's, same dtype, device and element count.
    """
    if r.numel() == 0:
        return 0.0, 0.0, 0.0, 0
    parts = _kernels()[1](_flat(y), _flat(r), float(atol), float(rtol))
    top, rel, t, count, bad = torch.stack([parts[:, 0].max(), parts[:, 1].max(), parts[:, 2].max(),
                                           parts[:, 3].sum(), parts[:, 4].max()]).tolist()
    return None if bad else (top, rel, t, int(count))
