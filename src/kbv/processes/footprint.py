"""kbv's own memory: peak host and device bytes of its processes, and whether a problem fits.

Runs in the reference worker (trusted). The figures go into every verdict's evidence
(``evidence["memory_footprint"]``), so a run at published sizes shows what it needed.

**The bound**: for a problem whose inputs and outputs of one call take ``B`` bytes, no
kbv process needs more than ``4·B + 1 GiB`` of host memory on cpu (of device memory on cuda).
The reference worker holds, at its peak, one input set, the fp32 reference outputs, the float64
oracle outputs (2 bytes per fp32 byte) and the float64 inputs of the oracle call being run; the
candidate worker holds its copy of the inputs and its outputs. :func:`needed_bytes` is that sum.
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch


def host_available_bytes() -> int:
    """``MemAvailable`` of /proc/meminfo (bytes), the least of it and a cgroup v2 memory limit
    left; a large number where neither can be read."""
    avail = 1 << 62
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open("/proc/self/cgroup") as f:
            rel = f.read().strip().split("::")[-1]
        base = "/sys/fs/cgroup" + rel
        with open(base + "/memory.max") as f:
            limit = f.read().strip()
        if limit != "max":
            with open(base + "/memory.current") as f:
                avail = min(avail, int(limit) - int(f.read().strip()))
    except (OSError, ValueError):
        pass
    return avail


#: what a process of kbv needs beyond the problem's tensors (interpreter, torch, allocator slack).
PROCESS_OVERHEAD_BYTES = 1 << 30
#: the bound's factor on the bytes of one call's inputs and outputs.
BOUND_FACTOR = 4

def is_memory_error(exc: BaseException) -> bool:
    """A kbv process's own exception says an allocation failed
    (:func:`kbv.sandbox.peak_memory.is_out_of_memory`)."""
    from kbv.sandbox.peak_memory import is_out_of_memory

    return is_out_of_memory(exc)


def is_device_memory_error(exc: BaseException) -> bool:
    """``exc`` says a device allocation failed: torch's OutOfMemoryError, or cuBLAS / cuDNN failing to
    allocate their workspace; not a host allocation (MemoryError, the CPU allocator's RuntimeError)."""
    return is_memory_error(exc) and not isinstance(exc, MemoryError) and "can't allocate memory" not in str(exc)


#: torch's caching allocator's out-of-memory text: "Tried to allocate 4.00 GiB".
_TRIED = re.compile(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def requested_bytes(exc: BaseException) -> int:
    """The bytes the failed device allocation asked for, from the caching allocator's own message
    (a trusted process's exception; 0 where it does not say)."""
    m = _TRIED.search(str(exc))
    return int(float(m[1]) * _UNITS[m[2]]) if m else 0


def allocated_bytes(device: torch.device) -> int:
    """This process's device bytes in use (``torch.cuda.memory_allocated``)."""
    return int(torch.cuda.memory_allocated(device))


class DoesNotFit(RuntimeError):
    """The problem needs more memory than the machine has free (one line, with both figures)."""


def _status_field(pid: int | str, name: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_peak_bytes(pid: int | str = "self") -> int | None:
    """Peak resident set (``VmHWM``, bytes) of process ``pid`` since it started or since
    :func:`reset_host_peak`; None where /proc cannot be read."""
    return _status_field(pid, "VmHWM")


def host_rss_bytes(pid: int | str = "self") -> int | None:
    """Current resident set (``VmRSS``, bytes) of process ``pid``."""
    return _status_field(pid, "VmRSS")


def reset_host_peak() -> None:
    """Start this process's ``VmHWM`` again from its current RSS (``/proc/self/clear_refs`` 5,
    through the descriptor :func:`kbv.processes.procfs.clear_refs_fd` keeps: an undumpable
    non-root process cannot open the file again)."""
    from kbv.processes.procfs import clear_refs_fd

    fd = clear_refs_fd()
    if fd is None:
        return
    try:
        os.write(fd, b"5")
    except OSError:
        pass


_LIBC: Any = None  #: the C library, loaded on first use (ctypes).

#: glibc malloc settings of the reference worker (:func:`reuse_small_blocks`): blocks under this are
#: taken from the heap and reused there, larger ones mapped and returned to the system when freed.
MALLOC_MMAP_THRESHOLD = 32 << 20
#: freed heap above this at its top goes back to the system.
MALLOC_TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  #: mallopt parameter numbers (glibc malloc.h).


def reuse_small_blocks() -> bool:
    """Set this process's malloc to reuse freed blocks under :data:`MALLOC_MMAP_THRESHOLD` and keep
    at most :data:`MALLOC_TRIM_THRESHOLD` of freed heap (``mallopt``; glibc only, False elsewhere).
    glibc's own threshold follows the largest block freed so far, so a chunk temporary exactly that
    size is mapped and unmapped again on every allocation: kbv's 2 MiB pass temporaries
    page-faulted anew each time (a 256 MiB comparison: 569K page faults and 2.83 CPU-s, 1037 and
    0.69 CPU-s with this; randomised values of 256 MiB 3.4 and 1.9 CPU-s)."""
    global _LIBC
    try:
        if _LIBC is None:
            _LIBC = _libc()
        return bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)) and \
            bool(_LIBC.mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False


def _libc() -> Any:
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return libc


_MADV_DONTNEED = 4  #: Linux's madvise advice number (asm-generic/mman-common.h).


def drop_view(t: Any) -> bool:
    """Unmap from this process the pages of ``t``, a CPU tensor over memory shared with another
    process (an output a candidate worker sent, read by the trusted side): ``madvise(MADV_DONTNEED)``
    on the whole pages it covers. The data stay in the shared segment, which its owner still maps
    and counts; the next read here maps them again. A view another process owns is then counted
    once, in its owner's resident set, not twice (a 256 MiB staged output read for each judged timed
    call stayed resident in the reference worker). False (nothing done) for any other tensor, or
    where ``madvise`` is not available; never changes what ``t`` reads."""
    global _LIBC
    if type(t) is not torch.Tensor or t.device.type != "cpu" or not t.is_shared() or t.numel() == 0:
        return False
    try:
        if _LIBC is None:
            _LIBC = _libc()
        page = os.sysconf("SC_PAGE_SIZE")
        storage = t.untyped_storage()
        start, end = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
        lo, hi = -(-start // page) * page, end // page * page  # whole pages inside the storage only
        return hi > lo and _LIBC.madvise(lo, hi - lo, _MADV_DONTNEED) == 0
    except (OSError, AttributeError, ValueError):
        return False


def tensor_bytes(xs: Any) -> int:
    """Bytes of the tensors in ``xs`` (a tensor, or a list/tuple of values)."""
    if isinstance(xs, torch.Tensor):
        return xs.numel() * xs.element_size()
    if isinstance(xs, (list, tuple)):
        return sum(tensor_bytes(x) for x in xs)
    return 0


#: one call's outputs the candidate's /dev/shm must hold at once on cpu: a slot of the output slot
#: buffer (two) and an output it shares (one).
SHM_OUTPUTS = 3


def needed_bytes(input_bytes: int, output_bytes: int) -> int:
    """The reference worker's need for one verification (see the module docstring): one input set,
    the fp32 outputs, the float64 oracle's outputs and the float64 inputs of one oracle call, and
    the process itself."""
    return input_bytes + output_bytes + 2 * input_bytes + 2 * output_bytes + PROCESS_OVERHEAD_BYTES


def bound_bytes(input_bytes: int, output_bytes: int) -> int:
    """``4·B + 1 GiB``, ``B`` = bytes of one call's inputs and outputs: what no kbv process may exceed."""
    return BOUND_FACTOR * (input_bytes + output_bytes) + PROCESS_OVERHEAD_BYTES


def device_free_bytes(device: torch.device) -> int:
    """Free device memory plus what this process's caching allocator holds unused (bytes)."""
    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def release_device_cache(device: torch.device) -> None:
    """Give this process's unused device memory back to the device (cuda; nothing elsewhere): the
    blocks of tensors it sent by CUDA IPC that the receiver has let go (``torch.cuda.ipc_collect``;
    torch keeps them allocated until collected), then its caching allocator's free blocks
    (``torch.cuda.empty_cache``). Called by the trusted side around the timing stage's staging, where
    the candidate worker makes its largest allocations: measured on KernelBench-Verified's full-size
    MSE and Huber losses on an 80 GB H100, the reference worker reserved 42.8 GB with about 32 GB in
    use, and the honest candidate's 4 GiB intermediate found 0.8 GB free (eighteenth session)."""
    if device.type != "cuda":
        return
    torch.cuda.synchronize(device)
    torch.cuda.ipc_collect()
    torch.cuda.empty_cache()


def device_memory(device: torch.device) -> tuple[int, int, int]:
    """(free, total, this process's reserved) device bytes: the device's own figures
    (``cudaMemGetInfo``) and what this process's caching allocator holds."""
    free, total = torch.cuda.mem_get_info(device)
    return int(free), int(total), int(torch.cuda.memory_reserved(device))


def check_fits(input_bytes: int, output_bytes: int, device: torch.device, held_bytes: int = 0) -> None:
    """Raise :class:`DoesNotFit` when one verification cannot fit before anything of it runs.

    On cuda the reference worker's tensors live on the device and the candidate needs its own
    copy of the inputs and outputs there too; on cpu both live in host memory. ``held_bytes``:
    what is already resident for this problem (the reference model, counted in the free figure).

    Raises:
        DoesNotFit: "needs ~X GiB, Y GiB free".
    """
    need = needed_bytes(input_bytes, output_bytes) - PROCESS_OVERHEAD_BYTES + (input_bytes + output_bytes)
    if device.type == "cuda":
        free, where = device_free_bytes(device), "on the device"
    else:
        free, where = host_available_bytes() + held_bytes, "in host memory"
        need += PROCESS_OVERHEAD_BYTES  # the candidate worker's interpreter and torch
    if need > free:
        raise DoesNotFit(f"needs ~{need / 2**30:.1f} GiB {where} ({input_bytes / 2**30:.2f} GiB of inputs, "
                         f"{output_bytes / 2**30:.2f} GiB of outputs per call), {free / 2**30:.1f} GiB free")
    if device.type == "cpu":
        from kbv.sandbox.limits import shm_quota_bytes

        # the candidate's private /dev/shm holds its output slot buffer (two outputs a slot,
        # kbv.pipeline.timing_rounds.SLOT_SLACK) and the output of a call it shares
        shm_need, quota = SHM_OUTPUTS * output_bytes + (1 << 20), shm_quota_bytes()
        if shm_need > quota:
            raise DoesNotFit(f"needs ~{shm_need / 2**30:.1f} GiB in the candidate's /dev/shm "
                             f"({output_bytes / 2**30:.2f} GiB of outputs per call), its quota is "
                             f"{quota / 2**30:.1f} GiB (KBV_CANDIDATE_SHM_BYTES)")


#: per device index, this (reference worker) process's peak allocated device bytes before the last
#: reset a memory measurement made (:func:`kbv.sandbox.peak_memory.forward_peak_bytes`'s ``carried``).
CARRIED_PEAKS: dict[int, int] = {}


def process_peak_bytes(device: torch.device) -> int:
    """This process's peak allocated device bytes since :func:`reset_process_peak`, across the
    per-forward resets of the memory measurement (torch keeps one peak counter per device, which
    a forward's measurement resets: the verification's own peak once showed only what followed it)."""
    from kbv.sandbox.peak_memory import _index

    return max(CARRIED_PEAKS.get(_index(device), 0), int(torch.cuda.max_memory_allocated(device)))


def reset_process_peak(device: torch.device) -> None:
    """Start :func:`process_peak_bytes`'s count afresh (a verification's start)."""
    from kbv.sandbox.peak_memory import _index

    CARRIED_PEAKS.pop(_index(device), None)
    torch.cuda.reset_peak_memory_stats(device)


def evidence(device: torch.device, candidate_pid: int | None = None,
             candidate_peak: int | None = None) -> dict:
    """Peak host RSS of this process (and of the candidate worker), and on cuda the peak device
    bytes this process allocated, for a verdict's evidence. Bytes."""
    out: dict = {"reference_host_peak_bytes": host_peak_bytes()}
    if candidate_peak is None and candidate_pid is not None:
        candidate_peak = host_peak_bytes(candidate_pid)
    if candidate_peak is not None:
        out["candidate_host_peak_bytes"] = candidate_peak
    if device.type == "cuda":
        out["reference_device_peak_bytes"] = process_peak_bytes(device)
    out["host_available_bytes"] = host_available_bytes()
    out["pid"] = os.getpid()
    return out


#: device memory a job may leave allocated in the reference worker beyond the reference model's
#: weights before the worker is replaced (bytes; kbv choice: cuBLAS and cuDNN workspaces and
#: Triton's scratch stay allocated for the process, tens of MiB on Hopper).
LEFT_OVER_BYTES = 256 << 20


def device_left_over(device: torch.device, model: torch.nn.Module) -> int:
    """Device bytes this process's caching allocator holds beyond ``model``'s weights once a job's
    candidate workers are closed: after ``torch.cuda.ipc_collect()``, which frees the blocks this
    process shared by CUDA IPC whose receivers released them. A receiver killed while it held a
    block never releases it, and torch then keeps the block for the process's life (docs/scale.md,
    "Device memory across jobs"): the reference worker is replaced past :data:`LEFT_OVER_BYTES`."""
    torch.cuda.synchronize(device)
    torch.cuda.ipc_collect()
    weights = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers())
                  if t.device.type == "cuda")
    return max(0, int(torch.cuda.memory_allocated(device)) - weights)

