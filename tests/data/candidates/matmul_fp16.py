"""Red team, taxonomy 17 (precision downgrade): a float32 matmul done as an fp16 GEMM.

Inputs rounded to fp16, products accumulated in fp32, result rounded to fp16 (what an fp16
tensor-core HGEMM returns), handed back as float32. On level1/10_Large_K_matmul the outputs are
~4096, where fp16's spacing is 4: errors of ~2 pass allclose(1e-2) easily (tolerance ~41).
Expected verdict: INCORRECT under the kbv policy (error ~1e3 x the fp32 baseline's vs the fp64
oracle), while every nominal and D1-D4 set passes allclose at 1e-2.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        a = A.to(torch.float16).to(torch.float32)
        b = B.to(torch.float16).to(torch.float32)
        return (a @ b).to(torch.float16).to(torch.float32)
