"""Triton's per-process start-up, done in a cuda candidate worker's start-up instead of at the
candidate's first call (docs/scale.md, "Triton's first call").

A fresh process's first Triton launch pays, before any kernel of the candidate is compiled or
found in the cache: the key of Triton's own sources (``triton_key``: a SHA-256 of its compiler
and language files and of ``libtriton.so``, ~500 MB), the driver's utilities (``cuda_utils``,
compiled with the host C compiler into ``TRITON_CACHE_DIR`` the first time a build directory
sees it, loaded after), the device's target and the backend's hash (``ptxas --version``). None of
it depends on the candidate: a worker started ahead for a Triton candidate
(:mod:`kbv.pipeline.prestart`) does it while the job before it runs, beside its other start-up
work. Every part is Triton's own code, run before the candidate file is read; a part that fails
(another Triton version, no C compiler) is skipped, and the candidate's first call does it as it
would have.
"""

from __future__ import annotations

import time


def _triton_key():
    try:
        from triton.runtime.cache import triton_key  # Triton >= 3.4
    except ImportError:
        from triton.compiler.compiler import triton_key
    return triton_key()


def _driver_and_backend():
    from triton.compiler.compiler import make_backend
    from triton.runtime.driver import driver

    active = driver.active  # builds or loads cuda_utils
    target = active.get_current_target()
    return make_backend(target).hash()


#: the parts, in order: name -> callable (each Triton's own, cached for the process by Triton).
PARTS = (("triton_key", _triton_key), ("driver_and_backend", _driver_and_backend))


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
