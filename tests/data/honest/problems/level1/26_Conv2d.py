"""A small 3x3 convolution with padding and bias: 2 x 3 x 16 x 16 -> 2 x 8 x 16 x 16."""
import torch
import torch.nn as nn

batch_size = 2
in_channels = 3
out_channels = 8
kernel_size = 3
height = width = 16


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
