"""A float32 batched matmul, C[b] = A[b] @ B[b] (8 x 128 x 128 each): the CPU stand-in for the
528 MiB batched matmul of issue 15's diff-and-patch cache (the red-team row forces the timing
phase onto the two-set path of big problems with ``EvalConfig.timing_input_bytes``)."""
import torch
import torch.nn as nn

BATCH = 8
N = 128


class Model(nn.Module):
    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(BATCH, N, N), torch.randn(BATCH, N, N)]


def get_init_inputs():
    return []
