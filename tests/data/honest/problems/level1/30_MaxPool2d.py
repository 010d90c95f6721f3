"""2x2 max pooling with stride 2 of a 4 x 8 x 16 x 16 float32 tensor."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.rand(4, 8, 16, 16)]


def get_init_inputs():
    return [2]
