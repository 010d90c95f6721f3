"""A torch-only candidate for level2/1_Gemm_Bias_ReLU_Scale: the reference's own GEMM cut into two
row blocks (two addmm calls and a cat), its ReLU written as clamp_min. Correct; its speed is
PyTorch's GEMM: SHORTCUT by the reference's op time, the blocks re-running all of the GEMM's
multiply-adds (red-team helper, seventeenth session: PASS when only the exact sizes counted)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        h = x.shape[0] // 2
        w = self.gemm.weight.t()
        y = torch.cat([torch.addmm(self.gemm.bias, x[:h], w), torch.addmm(self.gemm.bias, x[h:], w)])
        return y.clamp_min(0) * self.scaling_factor
