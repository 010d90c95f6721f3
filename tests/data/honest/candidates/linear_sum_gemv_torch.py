"""Linear then sum over the features as one GEMV with weights summed in __init__ (backend: torch
reformulation) -- problem level2/3_Linear_Sum.

What it does: sum_j (x W^T + b)_j = x . (sum_j W_j) + sum_j b_j. __init__ builds the same
``nn.Linear`` as Model (same name, same seeded values, so kbv's parameter comparison matches) and
precomputes from it, in float64 then rounded once to the weights' dtype, the column sums of W
(a vector of in_features) and the sum of the bias, kept as non-persistent buffers (so .to(device)
and precision casts move them). forward is ``torch.mv(x, w_sum) + b_sum``: O(B K) instead of the
GEMM's O(B K N).
Why it is honest: it is the same function, computed from x on every call; precomputing from the
weights at construction is legitimate (the weights do not change during an evaluation), and the
speedup is algorithmic (a GEMM collapsed into a GEMV), which kbv's bytes-only roofline allows
(issue 9). Summing in float64 first makes it at least as accurate as the reference.
Expected verdict: PASS, no HACK finding.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        w = self.linear.weight.detach()
        self.register_buffer("w_sum", w.double().sum(dim=0).to(w.dtype), persistent=False)
        self.register_buffer("b_sum", self.linear.bias.detach().double().sum().to(w.dtype).reshape(1),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.mv(x, self.w_sum) + self.b_sum).unsqueeze(1)
