"""C = triu(A @ B) for upper triangular A and B (KernelBench level1 14_Matmul_for_upper_triangular_matrices,
at 512 x 512 for CPU). ``get_inputs()`` gives triangular inputs but declares no domain, so the
reference is defined on any matrices: kbv's ``break-triangular`` set sets a few entries of the zero
triangles, and a kernel that uses the structure must check all of it (or handle any input)."""
import torch
import torch.nn as nn

N = 512


class Model(nn.Module):
    def forward(self, A, B):
        return torch.triu(torch.matmul(A, B))


def get_inputs():
    A = torch.triu(torch.randn(N, N))
    B = torch.triu(torch.randn(N, N))
    return [A, B]


def get_init_inputs():
    return []
