"""The environment a verdict was produced in (GPU, driver, torch, CUDA, Triton, kbv)."""

from __future__ import annotations

import platform
import socket

import torch

from kbv import __version__
from kbv.model.records import Environment


def driver_version() -> str | None:
    """The NVIDIA driver version (nvidia-ml-py), or None where it cannot be read."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - telemetry is optional
        return None


def collect_environment(device: str) -> Environment:
    """Describe this process's view of ``device`` (``cpu`` or ``cuda``)."""
    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # noqa: BLE001 - optional
        triton_version = None
    name = driver = l2 = sms = None
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        name = props.name
        l2 = int(getattr(props, "L2_cache_size", 0)) or None
        sms = props.multi_processor_count
        driver = driver_version()
    elif device == "cpu":
        name = platform.processor() or platform.machine()
    return Environment(
        kbv_version=__version__,
        python=platform.python_version(),
        torch=torch.__version__,
        device=device,
        device_name=name,
        driver=driver,
        cuda=torch.version.cuda,
        triton=triton_version,
        hostname=socket.gethostname(),
        l2_cache_bytes=l2,
        multiprocessors=sms,
    )
