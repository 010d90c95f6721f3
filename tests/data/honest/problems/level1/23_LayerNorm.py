"""nn.LayerNorm over the last dimension (256 features, learnable affine) of a 16 x 256 matrix."""
import torch
import torch.nn as nn

batch_size = 16
features = 256


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)
        with torch.no_grad():  # non-trivial affine parameters, drawn under the shared seed
            self.ln.weight.copy_(torch.rand(features) + 0.5)
            self.ln.bias.copy_(torch.randn(features) * 0.1)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]
