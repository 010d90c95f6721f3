"""How kbv's own elementwise passes over large tensors run: comparisons with the reference, errors
against the float64 oracle, output summaries, content digests, randomised input values. Reference
worker only; the reference and oracle models themselves run as torch runs them.

Each pass takes a tensor :func:`chunk_elements` at a time. On the host a chunk is
:data:`CPU_CHUNK_ELEMENTS` elements (2 MiB of float64), so the few operations a pass applies to it
find it in the L2/L3 cache; on a device it is the caller's own (larger) chunk. Inside
:func:`host_threads` a host pass runs on no more intra-op threads than the machine has idle cores:
torch's OpenMP pool meets at a barrier after every operation, and a thread the scheduler has not run
stalls the whole pass. Measured on the 2-core CI machine at load average 9 (16M fp32 elements, an
honest ReLU's output): ``comparison.compare`` took 25.6 s with two threads and 4M-element chunks,
3.2 s with one thread and 256K-element chunks; the float64 error pass 6.2 s and 1.3 s
(docs/architecture.md, "Memory and time at scale").
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import torch

#: elements of one host chunk (2 MiB of float64 per operand: an operand and a few temporaries fit in L3).
CPU_CHUNK_ELEMENTS = 1 << 18


def chunk_elements(device: torch.device | str, default: int) -> int:
    """Elements a pass takes at a time for tensors on ``device``: ``default`` (the caller's chunk)
    on a device, at most :data:`CPU_CHUNK_ELEMENTS` on the host."""
    return min(default, CPU_CHUNK_ELEMENTS) if torch.device(device).type == "cpu" else default


def idle_threads(current: int) -> int:
    """Intra-op threads a host pass may use: ``current`` (torch's setting), or fewer where the
    1-minute load average leaves fewer cores idle (this process's own running thread counted as
    idle, since the load includes it); at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return current
    free = (os.cpu_count() or 1) - load + 1
    return max(1, min(current, int(free)))


@contextlib.contextmanager
def host_threads(device: torch.device | str) -> Iterator[None]:
    """Inside, a pass over host tensors runs on :func:`idle_threads` intra-op threads; torch's own
    setting is restored after. No-op for device tensors."""
    if torch.device(device).type != "cpu":
        yield
        return
    current = torch.get_num_threads()
    want = idle_threads(current)
    if want == current:
        yield
        return
    torch.set_num_threads(want)
    try:
        yield
    finally:
        torch.set_num_threads(current)


def all_finite(t: torch.Tensor, default_chunk: int = 1 << 22) -> bool:
    """Every element of ``t`` is finite (both parts of a complex one; True for tensors of no
    floating-point or complex dtype), read
    :func:`chunk_elements` at a time: no full-size boolean temporary.

    Each chunk is summed first: a NaN or an infinity anywhere in it makes its sum NaN or infinite
    (IEEE 754 addition), so a finite sum proves the chunk finite in one reduction (about 6x
    quicker than ``isfinite().all()`` on a CPU); a sum that is not finite (such an element, or
    finite values overflowing) is settled element by element."""
    if t.is_complex():  # finite where both parts are
        t = torch.view_as_real(t.detach().resolve_conj())
    if not t.is_floating_point():
        return True
    flat = t.detach().reshape(-1)
    step = chunk_elements(flat.device, default_chunk)
    with host_threads(flat.device):
        for s in range(0, flat.numel(), step):
            chunk = flat[s:s + step]
            if not bool(torch.isfinite(chunk.sum())) and not bool(torch.isfinite(chunk).all()):
                return False
    return True
