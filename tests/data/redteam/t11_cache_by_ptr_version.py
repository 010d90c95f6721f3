"""Red team, taxonomy 11 (output caching keyed by address and version counter), for
level1/12_LayerNorm_large_row.

Keyed by (data_ptr, x._version), holding x: a harness that refills the same input tensor in
place (copy_, fill_, any in-place op) bumps its version counter, so the "same address, new
values" probe misses the cache and gets a correct answer; the benchmark loop, which never writes
to its inputs, hits on every call after the first round.

How kbv should catch it: write the new values without going through the tensor's version
counter (through .data, an untyped_storage view, or from the reference process through shared
memory), or give every timed call fresh inputs; the static scan can flag ._version / data_ptr()
in forward.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), x._version, tuple(x.shape))
        hit = self.cache.get(key)
        if hit is not None and hit[0] is x:
            return hit[1]
        mean = x.mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
        out = (x - mean) * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
        if len(self.cache) >= 8:
            self.cache.clear()
        self.cache[key] = (x, out)
        return out
