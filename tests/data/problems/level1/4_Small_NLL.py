"""A loss with int64 class targets: the targets must reach ModelNew as int64."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
num_classes = 10


class Model(nn.Module):
    def forward(self, predictions, targets):
        return F.cross_entropy(predictions, targets)


def get_inputs():
    return [torch.rand(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
