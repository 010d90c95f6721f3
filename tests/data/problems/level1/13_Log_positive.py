"""log(x) on inputs declared positive: kbv's randomised distributions stay positive, D4 (x -1) is
dropped because it leaves the declared domain."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log(x)


def get_inputs():
    return [torch.rand(16, 128) + 0.01]


def get_init_inputs():
    return []


KBV_METADATA = {"input_domains": {"x": "positive"}}
