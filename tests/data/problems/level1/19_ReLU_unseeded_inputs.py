import numpy as np
import torch
import torch.nn as nn

# get_inputs() draws from numpy's Generator API at import, which no global seed controls: every
# call gives new values (the idiom numpy recommends; red-team helper, twentieth session)
_rng = np.random.default_rng()


class Model(nn.Module):
    """ReLU whose inputs no seed reproduces: kbv's bound pass keeps its timing-set mix."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.from_numpy(_rng.standard_normal((64, 512)).astype(np.float32))]


def get_init_inputs():
    return []
