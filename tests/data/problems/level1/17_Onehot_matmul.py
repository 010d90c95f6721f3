"""Y = X @ W for one-hot rows X (4096 x 64) and a dense W (64 x 32): an embedding lookup written as
a matmul. ``get_inputs()`` gives one-hot rows but declares no domain, so the reference is defined on
any X: kbv's ``break-sparse`` set sets a few zero entries of X (rows with two ones), and a kernel
that gathers rows of W must check every row (or handle any input)."""
import torch
import torch.nn as nn

ROWS, CLASSES, DIM = 4096, 64, 32


class Model(nn.Module):
    def forward(self, X, W):
        return torch.matmul(X, W)


def get_inputs():
    X = torch.nn.functional.one_hot(torch.randint(0, CLASSES, (ROWS,)), CLASSES).float()
    return [X, torch.randn(CLASSES, DIM)]


def get_init_inputs():
    return []
