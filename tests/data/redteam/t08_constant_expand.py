"""Red team, taxonomy 8 (constant output), for tests/data/vetting/1_Constant_output
(softmax(x).sum(dim=1), which is 1 for every row whatever x is).

The candidate knows the answer and returns torch.ones(1) expanded to the batch: the values are
right on every input kbv can draw, and nothing is computed.

How kbv should catch it: zero strides in the output (an expanded constant) and an output
repeated bit for bit across different inputs; the problem is flagged constant-output by vetting
(23), so even a "correct" verdict stays out of the metrics.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ones(1, dtype=x.dtype, device=x.device).expand(x.shape[0])
