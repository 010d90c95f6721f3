"""Layer norm over a long row (32768 features): a reduction-heavy float32 problem."""
import torch
import torch.nn as nn

batch_size = 4
features = 32768


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]
