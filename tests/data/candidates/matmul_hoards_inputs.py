"""Right answers (torch.matmul), but every input tensor it is called with is kept in a module list
for the process's life: on cuda the inputs come by CUDA IPC, so the trusted side cannot free them
when the worker is killed. The reference worker must not carry that memory into the next job."""
import torch
import torch.nn as nn

KEPT = []


class ModelNew(nn.Module):
    def forward(self, A, B):
        KEPT.append((A, B))
        return torch.matmul(A, B)
