"""Batch-test run "honest", level1/1_ReLU sample 0: plain PyTorch clamp (expected PASS)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
