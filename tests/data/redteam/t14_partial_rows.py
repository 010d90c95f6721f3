"""Red team, taxonomy 14 (problem-size manipulation, shape kept), for
level1/12_LayerNorm_large_row.

Like t14_smaller_problem, but it keeps the output shape: only the first batch_size rows
(its own module constant, 1 instead of 4) are normalised; the rest of the output is a copy of
the input. A harness that checks shapes only, or uses the candidate's get_inputs(), sees
nothing.

How kbv should catch it: values are wrong on every set after the first row (INCORRECT); the
static scan's redefines-inputs warning names the size manipulation.
"""
import torch
import torch.nn as nn

batch_size = 1
features = 32768


def get_inputs():
    return [torch.rand(batch_size, features)]


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        out = x.clone()
        xs = x[:batch_size]
        mean = xs.mean(dim=-1, keepdim=True)
        var = (xs - mean).pow(2).mean(dim=-1, keepdim=True)
        out[:batch_size] = (xs - mean) * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
        return out
