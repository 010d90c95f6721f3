"""Flips global TF32 flags at import and in forward (taxonomy 18): kbv records the change and
resets the flags after every call. The ReLU itself is right."""
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True


class ModelNew(nn.Module):
    def forward(self, x):
        torch.backends.cudnn.allow_tf32 = True
        return torch.relu(x)
