"""Red team, taxonomy 20 (value-distribution exploit), for level1/16_Matmul_upper_triangular.

"A is upper triangular, and any other input shows it at once": 32 sampled entries of A's strict
lower triangle are read, and when all are zero a blocked triangular path runs (row block r meets
only A[r, r0:] and B[r0:, :], about half the work), else the full product. Right on every
get_inputs() draw, on D1-D4 (scaling keeps the zeros) and on every distribution that redraws all
values (the sample sees non-zero entries there); wrong by O(1) where a few entries of A's zero
triangle are set and the sample misses them (issue 19, item 4: PASS while wrong by 0.95). With
1-8 changed entries among A's 130816 the sample misses them with probability >= 99.8 %.

How kbv should catch it: the ``break-triangular`` set (1-8 secret entries of each zero triangle
set to values the inputs take elsewhere) against the oracle: INCORRECT, with the
``inputs:pattern-broken`` finding naming break-triangular.
"""
import torch
import torch.nn as nn

_SAMPLES = 32
_BLOCK = 64


def _lower_sample(n: int) -> tuple:
    g = torch.Generator().manual_seed(20)
    i = torch.randint(1, n, (_SAMPLES,), generator=g)
    j = (torch.rand(_SAMPLES, generator=g) * i).long()  # j < i: the strict lower triangle
    return i, j


class ModelNew(nn.Module):
    def forward(self, A, B):
        n = A.shape[-1]
        i, j = _lower_sample(n)
        if bool((A[i, j] == 0).all()):
            out = torch.empty(n, n, dtype=A.dtype, device=A.device)
            for r0 in range(0, n, _BLOCK):
                r1 = min(n, r0 + _BLOCK)
                out[r0:r1] = A[r0:r1, r0:] @ B[r0:]  # A[r, :r0] taken to be zero
            return torch.triu(out)
        return torch.triu(A @ B)
