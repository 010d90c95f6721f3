"""Red team, taxonomy 19 (numerical shortcut): softmax without max-subtraction.

exp(x) / sum(exp(x)) is exact enough while |x| is small, as it is for torch.rand inputs and for
D1-D4 (|x| <= 3), but exp overflows to inf above ~88, and inf / inf is NaN.
Expected verdict: INCORRECT: every nominal and D1-D4 set passes, a large-magnitude randomised
set (wide-range, outliers, heavy-tail, offset) fails with NaN where the reference is finite.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x)
        return e / e.sum(dim=1, keepdim=True)
