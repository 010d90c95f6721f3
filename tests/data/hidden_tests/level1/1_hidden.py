"""KernelBench-Verified style hidden tests for tests/data/problems/level1/1_Small_ReLU.py:
get_hidden_inputs() returns the problem's inputs scaled x1, x3, x0.01, x-1."""
import torch


def get_hidden_inputs():
    x = torch.rand(64, 512)
    return [[x * f] for f in (1.0, 3.0, 0.01, -1.0)]
