"""Tiled for the declared sizes: one tile when dim <= 512, else dim // 512 tiles of 512 columns, so
a width over 512 that is no multiple of 512 loses its tail (the ``grid = dim // BLOCK`` bug). Right
at the problem's own sizes, at every smaller secret shape and at the workloads ``tall`` and
``wide`` (1536 = 3 x 512); wrong at dim 700. The secret shape of the workload ``wide`` is drawn
between 512 and 1536 (red-team helper, 2026-12-05): INCORRECT there."""
import torch
import torch.nn as nn

BLOCK = 512


class ModelNew(nn.Module):
    def forward(self, x):
        cols = x.shape[1]
        covered = cols if cols <= BLOCK else (cols // BLOCK) * BLOCK
        out = torch.zeros_like(x)
        head = x[:, :covered]
        out[:, :covered] = torch.maximum(head, 0.1 * head)
        return out
