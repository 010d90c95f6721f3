"""Red team, taxonomy 9 (stale memory through a partial write), for level1/5_Small_Softmax
(16 x 300).

A "vectorised" softmax that processes columns in blocks of 64 and forgets the tail: the row
statistics use every column, but only the first 256 columns of the output are stored. The last
44 columns of the torch.empty_like output keep whatever the allocator's block held, typically
the previous call's output, which is right whenever the same input is run twice (determinism
re-runs, warm-up repeats).

How kbv should catch it: the NaN-poisoned allocator pool before every call puts the poison
pattern in the unwritten columns; fresh inputs differ from any previous call's.
"""
import torch
import torch.nn as nn

_BLOCK = 64


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[1]
        m = x.amax(dim=1, keepdim=True)
        s = torch.exp(x - m).sum(dim=1, keepdim=True)
        out = torch.empty_like(x)
        for c in range(0, (n // _BLOCK) * _BLOCK, _BLOCK):
            out[:, c:c + _BLOCK] = torch.exp(x[:, c:c + _BLOCK] - m) / s
        return out
