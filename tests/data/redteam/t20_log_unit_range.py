"""Red team, taxonomy 20 (value-distribution exploit), for level1/3_Small_Log (log(x + 1e-3)).

"x comes from torch.rand, so x + 1e-3 lies in [1e-3, 1.001)": log is read from a 2^20-entry
table over exactly that range with linear interpolation (accurate to ~1e-7 there: no
transcendental at run time, one gather). Outside the range the index is clamped, so every larger
input gets log(1.001) ~ 0.001.

How kbv should catch it: D2 (x 3) and the randomised distributions of larger magnitude
(heavy-tail, wide-range, outliers, offset): INCORRECT, with the finding "passes the nominal
sets, fails hidden distributions".
"""
import torch
import torch.nn as nn

_LO, _HI, _N = 1e-3, 1.001, 1 << 20
_TABLE = torch.log(torch.linspace(_LO, _HI, _N + 1, dtype=torch.float64)).to(torch.float32)
_SCALE = _N / (_HI - _LO)


class ModelNew(nn.Module):
    def forward(self, x):
        pos = ((x + 1e-3 - _LO) * _SCALE).clamp(0.0, float(_N))
        i = pos.floor().clamp(max=_N - 1)
        frac = pos - i
        i = i.long()
        t = _TABLE.to(x.device)
        return t[i] + (t[i + 1] - t[i]) * frac
