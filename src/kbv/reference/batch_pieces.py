"""Pieces of one oracle call's arguments (:mod:`kbv.reference.oracle`): which arguments a piece of
the batch cuts, and the cut itself. Where one float64 call does not fit, the oracle runs the model on
rows ``s0 .. s0 + step - 1`` of the cut arguments at a time, once the fp32 reference showed it
row-separable there (:meth:`kbv.reference.oracle.Oracle._separable`)."""

from __future__ import annotations

from typing import Any, Sequence

import torch


def batch_size(args: Sequence[Any]) -> int | None:
    """The common leading size of every tensor argument (None if they differ or there is none)."""
    sizes = {a.shape[0] for a in args if isinstance(a, torch.Tensor) and a.dim() > 0}
    ok = all(a.dim() > 0 for a in args if isinstance(a, torch.Tensor))
    return sizes.pop() if ok and len(sizes) == 1 else None


#: Which arguments a piece of the batch cuts (:meth:`kbv.reference.oracle.Oracle._plan`): every
#: tensor (a batch) or the first tensor alone (the rows of a matrix product: ``A[rows] @ B``).
SPLIT_ALL, SPLIT_FIRST = "all", "first"


def split_args(args: Sequence[Any], how: str) -> tuple[int | None, tuple[bool, ...]]:
    """(the leading size a piece slices, which arguments it slices) for ``how`` (:data:`SPLIT_ALL`,
    :data:`SPLIT_FIRST`); (None, ()) where ``args`` cannot be split so."""
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    if how == SPLIT_ALL:
        n = batch_size(args)
        return (n, tuple(isinstance(a, torch.Tensor) for a in args)) if n is not None else (None, ())
    if not tensors or args[tensors[0]].dim() == 0:
        return None, ()
    return args[tensors[0]].shape[0], tuple(i == tensors[0] for i in range(len(args)))


def cut_rows(args: Sequence[Any], mask: tuple[bool, ...], s0: int, step: int) -> list[Any]:
    """``args`` with the masked ones cut to rows ``s0 .. s0 + step - 1``."""
    return [a[s0:s0 + step] if m else a for a, m in zip(args, mask)]
