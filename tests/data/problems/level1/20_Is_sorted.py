import torch
import torch.nn as nn


class Model(nn.Module):
    """Whether a vector is sorted ascending (a check before a searchsorted): ``get_inputs()`` gives
    sorted values, which the timed calls' 1/8 mix breaks, so an honest early-exit scan costs the whole
    vector on a pure draw and a few elements on a timed call (red-team helper, twentieth session)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.all(x[1:] >= x[:-1]).to(torch.float32).reshape(1)


N = 1 << 22


def get_inputs():
    return [torch.sort(torch.rand(N)).values]


def get_init_inputs():
    return []
