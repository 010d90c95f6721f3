"""Exits the worker with code 0 before answering (taxonomy 24, forged early exit): CRASH, never PASS."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
