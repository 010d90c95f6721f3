"""Taxonomy 6 (phase detection by call counting) for a big output: an honest ReLU for the first
six calls (the correctness calls of tests/pipeline/test_timing_memory.py's config: one nominal set, the four
cache probes, D1), twice the ReLU afterwards, in the timed calls. Caught only by the timed
re-checks, which judge each kept call as it returns where the outputs are big."""
import torch
import torch.nn as nn

_CHECKED_CALLS = 6


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = torch.relu(x)
        return out if self.calls <= _CHECKED_CALLS else out * 2
