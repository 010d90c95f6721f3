"""Variance and mean of each row, computed by torch ops that a small Python "interpreter" issues
one node at a time (backend: torch reformulation) -- problem level1/31_VarMean.

What it does: builds a graph of Python node objects (each holds its parents and its consumers, so
the graph is a web of reference cycles, as Triton's interpreter and tracing frontends make), walks
it to issue mean = x.sum(1) / n and var = sum((x - mean)^2) / (n - 1), and drops the graph. Each
call leaves about 9,000 cyclic objects for Python's collector: a full collection (walking every
object of the process) then falls in about one call of ten.
Why it is honest: the definitions as in ``varmean_twopass_torch.py``; the graph is bookkeeping.
Its cost to the collector is not the call's: a collection walks every object of the process
(torch's modules included), wherever it falls, and kbv's timed loops run with the collector off
on both sides (``kbv.sandbox.timer.gc_paused``) so a whole-loop CPU bound and a per-call median
see the same work.
Expected verdict: PASS, no HACK finding, no bound on its time.
"""

import torch
import torch.nn as nn

NODES = 3_000  # bookkeeping nodes per call, three tracked objects each, every one in a cycle


class _Node:
    __slots__ = ("parents", "users", "attrs")

    def __init__(self, parents):
        self.parents = parents
        self.users = []
        self.attrs = {}
        for p in parents:
            p.users.append(self)


def _graph() -> _Node:
    root = _Node(())
    last = root
    for i in range(NODES):
        last = _Node((last,) if i % 7 else (last, root))
    return last


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        tail = _graph()
        n = x.shape[1]
        mean = x.sum(dim=1) / n
        d = x - mean.unsqueeze(1)
        var = (d * d).sum(dim=1) / (n - 1)
        del tail
        return var, mean
