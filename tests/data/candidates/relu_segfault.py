"""Crashes in forward with SIGSEGV, as a buggy native kernel would: the worker dies, CRASH.
(faulthandler's test hook raises the signal without ctypes, which the static scan would call a
native attack.)"""
import faulthandler

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        faulthandler._sigsegv()
        return x
