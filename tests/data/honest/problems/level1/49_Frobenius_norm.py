"""x / ||x||_F (KernelBench level 1, 37_FrobeniusNorm_) at a CPU size: 16 x 64 x 16 x 16
(262144 elements), the norm a reduction over the whole tensor."""
import torch
import torch.nn as nn

batch_size = 16
features = 64
dim1 = 16
dim2 = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        norm = torch.norm(x, p="fro")
        return x / norm


def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return []
