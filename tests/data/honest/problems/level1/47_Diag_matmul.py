"""C = diag(A) @ B (KernelBench level 1, 12_Matmul_with_diagonal_matrices_) at a CPU size:
A is a vector of N diagonal entries, B an N x M matrix. The reference builds the N x N diagonal
matrix and runs a dense matmul (O(N^2 M)); the answer is a row scaling of B (O(N M))."""
import torch
import torch.nn as nn

N = 512
M = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


def get_inputs():
    return [torch.rand(N), torch.rand(N, M)]


def get_init_inputs():
    return []
