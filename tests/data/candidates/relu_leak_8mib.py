"""A per-call leak (a bug, not a cheat; issue 24): an honest ReLU by ``clamp_min`` that keeps a fresh
8 MiB tensor, filled so that its pages are resident on cpu, in a module-level list on every call, on
the device of its input (host memory on cpu, device memory on cuda). Expected: PASS (its values are
right, its time honest) with a WARNING ``memory:growth`` whose rate is about 8 MiB a call."""
import torch
import torch.nn as nn

#: what every call leaves behind, never freed.
KEPT = []


class ModelNew(nn.Module):
    def forward(self, x):
        KEPT.append(torch.ones(2 << 20, dtype=torch.float32, device=x.device))  # 8 MiB
        return x.clamp_min(0.0)
