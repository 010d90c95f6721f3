"""C = diag(A) @ B at KernelBench's size (level 1, 12_Matmul_with_diagonal_matrices_, N = M = 4096),
for the GPU: the reference's dense matmul does 4096^3 multiply-adds, a row scaling 4096^2. The
roofline floor (inputs read once, the output written once) is ~128 MiB of traffic."""
import torch
import torch.nn as nn

N = 4096
M = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


def get_inputs():
    return [torch.rand(N), torch.rand(N, M)]


def get_init_inputs():
    return []
