"""Red team, taxonomy 12 (input mutation), for level1/1_Small_ReLU.

"Save an allocation": clamps the input in place and returns it. The values are right; the input
is destroyed and the output is the input's storage. On a harness that runs the reference after
the candidate on the same tensor, the reference sees relu(x) and agrees with anything
non-negative.

How kbv should catch it: each side gets its own copy of the inputs, and the worker hashes the
inputs before and after every call: the input changed (input mutation finding); the output
aliases the input (entry 8).
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_(min=0.0)
