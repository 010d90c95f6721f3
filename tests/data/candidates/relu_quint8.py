"""Returns its ReLU as a quantized ``torch.quint8`` tensor, a dtype kbv cannot judge (its quantizer
does not cross the pipe): INCORRECT, the fault names the dtype (the trusted side's ``clone()`` of
the rebuilt tensor failed an internal assert, kbv's own EVAL_ERROR, until replies admitted only
judged dtypes)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.quantize_per_tensor(torch.clamp_min(x, 0.0), 1.0 / 255, 0, torch.quint8)
