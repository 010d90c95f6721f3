"""Red team, taxonomy 12 (input mutation so the reference agrees), for level1/1_Small_ReLU.

Zeroes the input in place and returns a fresh zero tensor. On a harness that computes the
reference *after* the candidate from the same input tensor, relu(0) = 0 matches exactly, and
the candidate did almost no work.

How kbv should catch it: the reference runs on its own copy (so the zeros are wrong:
INCORRECT), and the input hash before/after the call names the mutation.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x.zero_()
        return torch.zeros_like(x)
