"""A reference whose forward asks the CPU allocator for 128 TiB: kbv's reference worker runs out
of memory, which is kbv's failure (EVAL_ERROR), never the candidate's."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.empty(1 << 45, dtype=torch.uint8)[:1].float()


def get_inputs():
    return [torch.rand(8, 8)]


def get_init_inputs():
    return []
