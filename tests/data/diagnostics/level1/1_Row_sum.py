"""Row sums (issue 24's shared-memory race row): ``x.sum(dim=1, keepdim=True)``."""
import torch
import torch.nn as nn

batch_size = 256
dim = 4096


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
