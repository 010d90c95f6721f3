"""ConvTranspose2d (16 -> 32 channels, kernel 4, stride 2, padding 1, output_padding 1) followed by a
global average pool over space (KernelBench level 2's ConvTranspose2d_GlobalAvgPool family), at a
CPU size: 8 x 16 x 16 x 16 in, a 8 x 32 x 33 x 33 transposed convolution, 8 x 32 x 1 x 1 out."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
height = width = 16
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
