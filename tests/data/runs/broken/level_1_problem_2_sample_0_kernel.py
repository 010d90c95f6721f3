"""Batch-test run "broken", level1/2_Softmax sample 0: defines no ModelNew (static COMPILE_ERROR)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
