"""Red team, taxonomy 24 (forging the result channel) on cuda: a ``copyreg`` reducer registered for
the reply class divides every reported ``time_ms`` (the candidate worker's own CUDA events) by 20
while the reply is pickled; the kernel is torch's own matmul of the problem's size (8192^2 float32,
about 20 ms a call in strict fp32 on an H200). Expected: HACK ``probe:harness-identity`` (taxonomy 24): kbv pickles its replies with its own
reducers, so the forged figure is never sent, and the worker reports the reducer. Where it were
sent, the reference worker's wall clock around the bound pass allows far more than the claim, so
the floor would be credited with a WARNING ``timing:claim-below-bound``."""
import copyreg
import dataclasses
import sys

import torch
import torch.nn as nn

DIVISOR = 20


def _forge() -> None:
    proto = sys.modules.get("kbv.sandbox.protocol")
    if proto is None:
        return
    cls = proto.CallTimed

    def reduce(obj):
        values = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        values[0] = values[0] / DIVISOR
        return cls, tuple(values)

    copyreg.pickle(cls, reduce)


_forge()


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
