"""The candidate and reference workers' environments: the candidate's is what it is spawned with
and what :func:`kbv.sandbox.confinement.apply_sandbox` leaves it (its ``/proc/self/environ`` holds
no secret: kbv's own settings and API keys are dropped)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbv.sandbox.confinement import WorkerSetup

#: environment variables a candidate worker keeps (by name or prefix); everything else, API keys
#: and kbv's own settings included, is dropped. The prefixes keep CUDA/Triton toolchains working.
_KEEP_PREFIXES = ("CUDA_", "NVIDIA_", "TRITON_", "TORCH_CUDA_", "NCCL_", "LD_", "CPATH", "LIBRARY_PATH",
                  "CONDA_PREFIX", "VIRTUAL_ENV", "PYTORCH_", "NVSHMEM_")
_KEEP_ENV = (
    "PATH", "LANG", "LC_ALL", "USER", "LOGNAME",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CC", "CXX",
    "TRITON_INTERPRET", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
)

#: OpenMP threads that wait sleep at once instead of spinning (libgomp and Intel's runtime both
#: read it when they load), in the candidate worker and the reference worker alike, so both are
#: timed the same way: a spinning pool thread burns CPU while a peer waits for a core, and the
#: worker's CPU time is the proof of ``timing:parent-wall`` (an honest softmax burnt 2.0 CPU-ms
#: per call against a 0.18 ms median on a loaded 2-core machine spinning; 0.5-0.75 CPU-ms passive
#: at load 8). It costs small CPU ops a wake-up per parallel region (~10 % on a 0.2 ms softmax).
WAIT_POLICY = {"OMP_WAIT_POLICY": "PASSIVE"}

#: torch's CUDA allocator settings (the old name and torch >= 2.9's).
ALLOC_CONF_NAMES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def shared_worker_env(environ: dict | None = None) -> dict[str, str]:
    """What both workers' environments get on top of what they inherit: :data:`WAIT_POLICY`, and
    each allocator setting of ``environ`` (default ``os.environ``, :data:`ALLOC_CONF_NAMES`)
    without ``expandable_segments``. Every kbv process is undumpable
    (:func:`kbv.processes.procfs.undumpable`), and torch shares a tensor in an expandable segment
    between processes by taking the sender's file descriptor with ``pidfd_getfd``, which the kernel
    allows only a process that may ptrace the sender (``PTRACE_MODE_ATTACH_REALCREDS``,
    pidfd_getfd(2)): inputs and outputs would no longer reach the other worker. Both workers get the
    same settings, so the reference and the candidate are timed with one allocator."""
    environ = os.environ if environ is None else environ
    env = dict(WAIT_POLICY)
    for name in ALLOC_CONF_NAMES:
        if name in environ:
            parts = [p for p in environ[name].split(",")
                     if p.strip() and p.split(":", 1)[0].strip() != "expandable_segments"]
            env[name] = ",".join(parts)
    return env


def worker_environment(setup: WorkerSetup, environ: dict | None = None) -> dict[str, str]:
    """The candidate worker's whole environment: toolchain variables of ``environ`` (default
    ``os.environ``) only, ``HOME``/``TMPDIR`` in its workdir, and every cache a toolchain writes
    (torch extensions, Triton, inductor, the CUDA JIT cache, ``XDG_CACHE_HOME``) in its build
    directory: with ``/dev/shm``, the only places it can write; OpenMP waits passive and the CUDA
    allocator has no expandable segments (:func:`shared_worker_env`)."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)}
    build = setup.build_dir
    env.update(HOME=setup.workdir, TMPDIR=setup.workdir, PWD=setup.workdir,
               TORCH_EXTENSIONS_DIR=os.path.join(build, "torch_extensions"),
               TRITON_CACHE_DIR=os.path.join(build, "triton"), TRITON_HOME=build,
               TORCHINDUCTOR_CACHE_DIR=os.path.join(build, "inductor"),
               CUDA_CACHE_PATH=os.path.join(build, "cuda_cache"), XDG_CACHE_HOME=os.path.join(build, "cache"),
               **shared_worker_env(environ))
    return env
