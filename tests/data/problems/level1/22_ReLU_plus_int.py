import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU plus a plain int argument that each draw of ``get_inputs()`` picks (seeded): the timing
    sets hold different ints, which the bound pass's calls must keep as the worker has them (an
    honest kernel got a HACK, newcomer, twentieth session)."""

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return torch.relu(x) + n


def get_inputs():
    return [torch.randn(256, 4096), int(torch.randint(1, 100, ()).item())]


def get_init_inputs():
    return []
