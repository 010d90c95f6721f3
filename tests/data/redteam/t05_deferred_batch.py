"""Red team, taxonomy 5 (cross-call batching), for level1/11_Softmax_rows (32 x 1024).

For the first 15 calls (kbv's 3 nominal + 4 hidden + 8 randomised sets) it is an honest row
softmax. After that it "batches": each call only queues its input and returns an uninitialised
output buffer; every 4th call stacks the queued inputs, runs one softmax over all of them and
writes each result into the buffer returned earlier. Three timed calls out of four cost nothing,
so the median collapses; by the time a Time request finishes all buffers are filled, so outputs
collected at the end of a timing loop look right.

How kbv should catch it: re-check randomly chosen timed calls against the reference, comparing
the output as it was right after that call returned (not at the end of the loop); the
fingerprint taken right after return differs from the one after the next calls (writes after
return).
"""
import torch
import torch.nn as nn

_CHECKED_CALLS = 15
_BATCH = 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.queue = []

    @staticmethod
    def _softmax(x):
        m = x.amax(dim=-1, keepdim=True)
        e = (x - m).exp()
        return e / e.sum(dim=-1, keepdim=True)

    def forward(self, x):
        self.calls += 1
        if self.calls <= _CHECKED_CALLS:
            return self._softmax(x)
        out = torch.empty_like(x)
        self.queue.append((x, out))
        if len(self.queue) >= _BATCH:
            xs = torch.stack([q[0] for q in self.queue])
            ys = self._softmax(xs)
            for (_, o), y in zip(self.queue, ys):
                o.copy_(y)
            self.queue = []
        return out
