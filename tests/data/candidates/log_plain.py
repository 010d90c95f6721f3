"""Honest log for level1/13_Log_positive (inputs declared positive): PASS, with D4 (x -1) dropped
as outside the declared domain and every randomised set judged on positive values."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.log(x)
