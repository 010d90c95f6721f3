import numpy as np
import torch
import torch.nn as nn

# numpy's Generator API at import, which no global seed controls (as 19_ReLU_unseeded_inputs)
_rng = np.random.default_rng()


class Model(nn.Module):
    """Element-wise Bessel J0 with inputs no seed reproduces: the bound pass keeps each fresh draw
    for its pass rather than mixing the timing sets, where a per-element table answers everything
    (red-team row t11-element-memo-unseeded)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)


def get_inputs():
    return [torch.from_numpy((_rng.standard_normal((16, 16384)) * 4).astype(np.float32))]


def get_init_inputs():
    return []
