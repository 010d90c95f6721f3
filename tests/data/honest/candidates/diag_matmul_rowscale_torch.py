"""diag(A) @ B as a row scaling (backend: torch reformulation) -- problems level1/47_Diag_matmul
(CPU size) and level1/48_Diag_matmul_large.

What it does: returns ``A[:, None] * B``, i.e. C[i, j] = A[i] * B[i, j]: one multiply per output
element, O(N M) work instead of the reference's O(N^2 M) dense matmul with an N x N diagonal matrix.
Why it is honest: it is the same function (row i of diag(A) has one non-zero entry, A[i]), computed
from A and B on every call. It is far faster than the reference only because the reference does
N times more arithmetic than needed; a roofline floor built from the reference's FLOPs would call
that "faster than physics", kbv's floor counts only the bytes read and written (issue 9).
Expected verdict: PASS, no HACK finding.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A.unsqueeze(1) * B
