"""Returns its ReLU reinterpreted as ``torch.bits16``, a dtype kbv cannot judge (no arithmetic, no
indexing): INCORRECT, the fault names the dtype (the trusted side's fingerprint of the output raised
NotImplementedError, kbv's own EVAL_ERROR, until replies admitted only judged dtypes)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0).view(torch.bits16)
