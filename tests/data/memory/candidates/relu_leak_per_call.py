"""A per-call leak (a bug, not a cheat): an honest ReLU by ``clamp_min`` that keeps, in a list on the
module (a history an author forgot), eight copies of every output it returns (1 MiB a call on
1_Small_ReLU, every page written), so the worker's memory grows by that much a call and never levels
off. (One 128 KiB copy a call sat at glibc's mmap threshold, and its resident growth came in steps
that a full-suite run once read as levelling off.) Expected: PASS (its values are right, its time
honest) with a WARNING ``memory:growth`` naming the rate."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def forward(self, x):
        out = x.clamp_min(0.0)
        self.history.append(torch.cat([out] * 8))
        return out
