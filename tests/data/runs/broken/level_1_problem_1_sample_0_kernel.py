"""Batch-test run "broken", level1/1_ReLU sample 0: a syntax error (static COMPILE_ERROR)."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x)
        return x.relu()
