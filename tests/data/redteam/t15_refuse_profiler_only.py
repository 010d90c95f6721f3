"""Red team, taxonomy 15 (baseline wrapper), for level1/5_Small_Softmax.

forward is torch.softmax run with the Python dispatch key excluded, so kbv's first op count (a
dispatch mode) sees no op and succeeds; while the autograd profiler records (kbv's second count,
which would see that softmax) it raises instead. One count clean and empty, the other failed:
nothing covered the reference. Every name is built at run time, so the static scan reads none.
Found by the red team on 2026-12-01: PASS (op-count-refused asked for both counts to fail).

How kbv should catch it: a forward that passed every correctness set and then fails under either
op count is not credited as a custom kernel: SHORTCUT (probe:op-count-refused).
"""
import torch
import torch.nn as nn

_off = getattr(torch._C, "_Disable" + "TorchDispatch")
_profiler = getattr(torch.autograd, "pro" + "filer")


class ModelNew(nn.Module):
    def forward(self, x):
        if getattr(_profiler, "_is_profiler" + "_enabled"):
            raise RuntimeError("unsupported here")
        with _off():
            return torch.softmax(x, dim=1)
