"""Isolation of the candidate worker, applied in the worker before any candidate code runs.

The worker leaves the parent's process group (so the parent can kill it together with anything
it starts), asks to die with its parent, moves into an empty network namespace where the OS
allows it, caps core dumps and file sizes, sends stdout/stderr to a log file, moves into a fresh
temporary directory, drops the current directory from ``sys.path`` (no planted ``torch.py`` can
shadow torch) and scrubs its environment. Each step returns a note that goes into the verdict's
evidence (``sandbox``), so a record says which isolation a run actually had.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

#: environment variables a candidate worker keeps (by name or prefix); everything else, API keys
#: and kbv's own settings included, is dropped. The prefixes keep CUDA/Triton toolchains working.
_KEEP_PREFIXES = ("CUDA_", "NVIDIA_", "TRITON_", "TORCH_CUDA_", "NCCL_", "LD_", "CPATH", "LIBRARY_PATH",
                  "CONDA_PREFIX", "VIRTUAL_ENV", "PYTORCH_", "NVSHMEM_")
_KEEP_ENV = (
    "PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CC", "CXX",
    "TRITON_INTERPRET", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
)


@dataclass(frozen=True)
class WorkerSetup:
    """What the parent decides before the worker starts."""

    workdir: str  #: fresh temporary directory (cwd of the worker).
    build_dir: str  #: content-hash build cache of this candidate.
    log_path: str  #: stdout/stderr of the worker (compiler output, prints).
    device: str  #: ``cpu`` or ``cuda``.


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its parent dies (``prctl(PR_SET_PDEATHSIG)``)."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


#: largest file the worker may write (bytes): extension builds need tens of MB, nothing needs more.
MAX_FILE_BYTES = 1 << 30


def _isolate_network() -> str:
    """Move into a new, empty network namespace (Linux, root only). Returns a note for the record.

    Done before torch is imported, while the process is single-threaded, as ``unshare`` requires.
    CUDA does not use the network, so kernels run unchanged.
    """
    if sys.platform != "linux" or os.geteuid() != 0:
        return "network: not isolated (needs root on Linux)"
    import ctypes

    CLONE_NEWNET = 0x40000000
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) != 0:
            return f"network: not isolated (unshare: {os.strerror(ctypes.get_errno())})"
    except (OSError, AttributeError) as exc:
        return f"network: not isolated ({exc})"
    return "network: isolated (empty namespace)"


def _limit_resources() -> None:
    import resource

    for lim, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, MAX_FILE_BYTES)):
        try:
            soft, hard = resource.getrlimit(lim)
            new = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(lim, (new, hard))
        except (ValueError, OSError):
            pass


def apply_sandbox(setup: WorkerSetup) -> list[str]:
    """Isolate this process before any candidate code runs; returns notes for the record."""
    try:
        os.setsid()
    except OSError:
        pass
    _die_with_parent()
    notes = [_isolate_network()]
    _limit_resources()
    log_fd = os.open(setup.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    parent_cwd = os.getcwd()
    os.chdir(setup.workdir)
    sys.path[:] = [p for p in sys.path if p not in ("", ".", parent_cwd) and not p.startswith(parent_cwd + os.sep + "tests")]
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)}
    env["TORCH_EXTENSIONS_DIR"] = os.path.join(setup.build_dir, "torch_extensions")
    env["TRITON_CACHE_DIR"] = os.path.join(setup.build_dir, "triton")
    env["TMPDIR"] = setup.workdir
    env["PWD"] = setup.workdir
    os.environ.clear()
    os.environ.update(env)
    return notes
