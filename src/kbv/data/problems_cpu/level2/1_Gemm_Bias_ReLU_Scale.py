# kbv demo on CPU: problems/level2/1_Gemm_Bias_ReLU_Scale.py with smaller sizes (same verdicts, a demo of minutes on 2 cores).
import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer (GEMM + bias), then ReLU, then multiplication by a constant scale."""

    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = torch.relu(x)
        x = x * self.scaling_factor
        return x


batch_size = 32
in_features = 1024
out_features = 512
scaling_factor = 2.0


def get_inputs():
    x = torch.rand(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
