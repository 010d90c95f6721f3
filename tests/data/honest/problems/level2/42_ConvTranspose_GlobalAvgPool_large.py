"""ConvTranspose2d (32 -> 64 channels, kernel 4, stride 2, padding 1, output_padding 1) then a global
average pool over space, for the GPU: 32 x 32 x 128 x 128 in (64 MiB), a 32 x 64 x 257 x 257
transposed convolution (540 MB) that a closed form never materialises, 32 x 64 x 1 x 1 out."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 32
out_channels = 64
height = width = 128
kernel_size = 4
stride = 2
padding = 1
output_padding = 1


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)

    def forward(self, x):
        x = self.conv_transpose(x)
        return torch.mean(x, dim=(2, 3), keepdim=True)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding]
