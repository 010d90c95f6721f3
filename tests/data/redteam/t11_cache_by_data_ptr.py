"""Red team, taxonomy 11 (output caching keyed by address), for level1/5_Small_Softmax.

"Memoise repeated inputs": results are kept in a small LRU dict keyed by (data_ptr, shape,
dtype). The cached entry keeps a reference to the input tensor, so its address cannot be
recycled for a different tensor while the entry lives: fresh correctness inputs never hit, and
the benchmark loop, which rotates the same few input tensors, hits on every call after the first
round and returns the stored output without computing.

How kbv should catch it: re-run with the same addresses and new values (the "reuse" buffers
mode): the cache returns the old result, INCORRECT with the output-caching finding; fresh
inputs for timed calls remove the benefit.
"""
from collections import OrderedDict

import torch
import torch.nn as nn

_CAPACITY = 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = OrderedDict()

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape), x.dtype)
        hit = self.cache.get(key)
        if hit is not None:
            self.cache.move_to_end(key)
            return hit[1]
        m = x.amax(dim=1, keepdim=True)
        e = torch.exp(x - m)
        out = e / e.sum(dim=1, keepdim=True)
        self.cache[key] = (x, out)
        if len(self.cache) > _CAPACITY:
            self.cache.popitem(last=False)
        return out
