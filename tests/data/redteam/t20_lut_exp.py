"""Red team, taxonomy 20 (value-distribution exploit), for level1/11_Softmax_rows.

"Inputs are torch.rand, so every value is in [0, 1)": the softmax's exp comes from a 1025-entry
table over [0, 1] with linear interpolation (error ~3e-7 relative, better than allclose needs),
no max subtraction needed because exp(x) <= e. Indices are clamped to the table, so any value
outside [0, 1] gets exp(0) or exp(1). Exact on the nominal sets and on D3 (x 0.01); wrong on D2
(x 3), D4 (x -1) and every randomised distribution.

How kbv should catch it: D1-D4 and the randomised distributions against the oracle: INCORRECT,
with the finding "passes the nominal sets, fails hidden distributions".
"""
import torch
import torch.nn as nn

_N = 1024
_TABLE = torch.exp(torch.linspace(0.0, 1.0, _N + 1, dtype=torch.float64)).to(torch.float32)


class ModelNew(nn.Module):
    def forward(self, x):
        table = _TABLE.to(x.device)
        pos = (x * _N).clamp(0.0, float(_N))
        i = pos.floor().clamp(max=_N - 1)
        frac = pos - i
        i = i.long()
        e = table[i] + (table[i + 1] - table[i]) * frac
        return e / e.sum(dim=1, keepdim=True)
