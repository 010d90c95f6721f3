"""A torch-only candidate for level2/1_Gemm_Bias_ReLU_Scale: the reference's own GEMM written as an
einsum (PyTorch runs it as a bmm), its ReLU as clamp_min. Correct; its speed is PyTorch's GEMM:
SHORTCUT by the reference's op time, the GEMM beneath the einsum re-running all of its
multiply-adds (red-team helper, seventeenth session: PASS while the einsum went unsized)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = torch.einsum("bi,oi->bo", x, self.gemm.weight) + self.gemm.bias
        return y.clamp_min(0) * self.scaling_factor
