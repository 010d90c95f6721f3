"""Red team, taxonomy 23 (degenerate problem: stochastic reference), for
tests/data/vetting/2_Dropout_train (dropout(p=0.5) in training mode, then x 2).

No kernel can reproduce the reference's random mask, so the candidate skips dropout and
returns x * 2 ("inference semantics"), cheaper than any honest attempt. Any protocol that
compares it with one reference draw at a loose tolerance produces noise either way.

How kbv should catch it: vetting flags the problem stochastic (two reference runs on the same
input disagree), so the verdict carries problem flag 23 and the problem stays out of the
metrics; the candidate itself is INCORRECT.
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return x * 2.0
