"""Linear (4096 -> 4096, with bias), a scaling by 0.5 and a residual add, batch 2048, for the GPU
(KernelBench level 2, 40_Matmul_Scaling_ResidualAdd's operator at a GPU size)."""
import torch
import torch.nn as nn

batch_size = 2048
in_features = 4096
out_features = 4096
scaling_factor = 0.5


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.matmul(x)
        original_x = x.clone().detach()
        x = x * self.scaling_factor
        x = x + original_x
        return x


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
