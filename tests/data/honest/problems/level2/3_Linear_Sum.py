"""Linear (256 -> 192, with bias) followed by a sum over the features (KernelBench level 2,
18_Matmul_Sum_..., without its no-op tail), batch 64: the reference runs a GEMM and reduces it;
sum_j (x W^T + b)_j = x . (sum_j W_j) + sum_j b_j is one GEMV."""
import torch
import torch.nn as nn

batch_size = 64
in_features = 256
out_features = 192


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
