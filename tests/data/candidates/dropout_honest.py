"""Honest copy of vetting/2_Dropout_train (dropout in training mode, then x2). It cannot match a
stochastic reference: expected INCORRECT, with the problem flagged stochastic in the verdict."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return self.dropout(x) * 2.0
