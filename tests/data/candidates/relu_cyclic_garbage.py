"""Honest (issue 24's leak rule must not misfire): a ReLU by ``clamp_min`` that leaves, on every call,
cyclic garbage holding a filled 8 MiB tensor: a dict that refers to itself, as a recursive closure
(Triton's interpreter launches make one per call, holding the call's output) or an exception kept
with its traceback do. Nothing is kept: Python's cyclic collector frees it at its next collection,
which kbv's timed calls defer (kbv.sandbox.timer.gc_paused). Expected: PASS with no
``memory:growth`` finding."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        box = {"t": torch.ones(2 << 20, dtype=torch.float32, device=x.device)}  # 8 MiB, resident on cpu
        box["self"] = box  # a cycle: freed by the collector, not by reference counts
        return x.clamp_min(0.0)
