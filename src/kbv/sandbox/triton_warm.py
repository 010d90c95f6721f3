"""Triton's per-process start-up, done in a cuda candidate worker's start-up instead of at the
candidate's first call (docs/scale.md, "Triton's first call").

A fresh process's first Triton launch pays, before any kernel of the candidate is compiled or
found in the cache, the key of Triton's own sources (``triton_key``: a SHA-256 of its compiler and
language files and of ``libtriton.so``, ~500 MB) and the backend's hash (``ptxas --version``), each
computed once per process. Neither depends on the candidate: a worker started ahead for a Triton
candidate (:mod:`kbv.pipeline.prestart`) computes them while the job before it runs.

Only Triton's own installed files are read: nothing of ``TRITON_CACHE_DIR`` or ``TRITON_HOME``,
which are the candidate's build directory, where it can write. The driver's utilities
(``cuda_utils``, loaded from that cache) are left to the candidate's first call: loaded here, a
library the candidate planted there would run before the worker's snapshots of the harness
(red-team helper, 2026-12-06). The target is read from torch (``get_device_capability``), as
Triton's driver reads it where torch is loaded. A part that fails (another Triton version) is
skipped, and the candidate's first call does it as it would have.
"""

from __future__ import annotations

import time


def _triton_key():
    try:
        from triton.runtime.cache import triton_key  # Triton >= 3.4
    except ImportError:
        from triton.compiler.compiler import triton_key
    return triton_key()


def _backend_hash():
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    major, minor = torch.cuda.get_device_capability()
    return make_backend(GPUTarget("cuda", major * 10 + minor, 32)).hash()


#: the parts, in order: name -> callable (each Triton's own, cached for the process by Triton).
PARTS = (("triton_key", _triton_key), ("backend_hash", _backend_hash))


def start_triton() -> dict[str, float | str]:
    """Run :data:`PARTS` in this process (its CUDA context current): ``{part: wall seconds}``, or
    ``{part: "ExcType: message"}`` for a part that failed (never raises). Call only where the
    ``triton`` module is importable and the device is a CUDA GPU."""
    out: dict[str, float | str] = {}
    for name, part in PARTS:
        t0 = time.perf_counter()
        try:
            part()
        except Exception as exc:  # noqa: BLE001 - the first call does it as it would have
            out[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        out[name] = round(time.perf_counter() - t0, 4)
    return out


__all__ = ["start_triton", "PARTS"]
