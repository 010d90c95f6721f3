"""C = A @ B for symmetric A and B (KernelBench-style, level 1). The inputs' symmetry is declared
(KBV_METADATA), so kbv's distributions draw symmetric matrices and the per-call changes of timed
inputs keep them symmetric: a kernel may rely on A == A^T."""
import torch
import torch.nn as nn

N = 64

KBV_METADATA = {"input_domains": {0: "symmetric", 1: "symmetric"}}


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    A = torch.rand(N, N)
    B = torch.rand(N, N)
    return [(A + A.T) / 2, (B + B.T) / 2]


def get_init_inputs():
    return []
