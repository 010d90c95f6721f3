"""Row log-softmax (dim=1) of a 16 x 256 float32 matrix."""
import torch
import torch.nn as nn

batch_size = 16
dim = 256


class Model(nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
