"""kbv — KernelBench-Verified: honest verdicts on LLM-written GPU kernels versus PyTorch."""

__version__ = "0.1.0"
