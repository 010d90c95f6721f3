"""Runtime integrity probes: the pieces that run next to a candidate call, and the checks that
turn what they saw into :class:`kbv.records.Finding` records naming entries of
``../shared/hack-taxonomy.md``.

Two halves:

* **Worker side** (imported by the candidate worker before any candidate code): fill the
  allocator's free memory with a NaN pattern (:func:`poison_free_memory`), list live threads
  (:func:`live_threads`), find outputs whose storage overlaps an input (:func:`overlaps`).
  These run in the untrusted process and are best effort: a candidate that patches them is
  caught by the harness-identity check (taxonomy 4) or the static scan.
* **Trusted side** (reference worker): every check that decides something: stale-memory
  pattern in outputs, zero strides, aliasing, input mutation, writes after return, outputs
  repeated across different inputs, re-checks of timed calls, the sync-vs-event timing gap, the
  parent-side wall clock, the roofline floor, the reference-op shortcut. Each returns findings;
  :func:`status_from_findings` folds them into the verdict status.

Thresholds are kbv choices, documented where they are defined, with the measurement behind them
where there is one (``docs/anti-cheat.md``).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

from kbv.records import Finding, Severity

#: the 4-byte pattern written into free allocator memory: a quiet float32 NaN with payload
#: 0x40DEAD. Honest arithmetic yields the canonical NaN (0x7FC00000), never this payload, so
#: finding it in an output means the candidate returned memory it never wrote (taxonomy 9/10).
POISON_INT32 = 0x7FC0DEAD
#: the same pattern as seen through 2- and 8-byte views (0x7FC0 is a NaN in fp16 and bf16).
POISON_INT16 = 0x7FC0
POISON_INT64 = (POISON_INT32 << 32) | POISON_INT32
#: at most this many free allocator blocks are poisoned before a call (bounds the probe's cost).
MAX_POISON_BLOCKS = 512


# Worker side -----------------------------------------------------------------------------------

def live_threads() -> set[str]:
    """Thread ids of this process from ``/proc/self/task`` (native threads included); empty
    where /proc is missing."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def poison_free_memory(device: Any, cpu_sizes: Iterable[int] = ()) -> int:
    """Fill free allocator memory with :data:`POISON_INT32`; returns the bytes written.

    cuda: every inactive block of the caching allocator (``torch.cuda.memory_snapshot``), up to
    :data:`MAX_POISON_BLOCKS`, is allocated at its exact size, filled and released again, so a
    later ``torch.empty`` that lands on it holds the pattern. cpu: the allocator is malloc, so
    blocks of each size in ``cpu_sizes`` (bytes; the previous call's inputs and outputs) are
    allocated, filled and freed, which is where malloc hands the next same-size request.
    """
    import torch

    device = torch.device(device)
    held = []
    written = 0
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        sizes = []
        for seg in torch.cuda.memory_snapshot():
            if seg.get("device") != index:
                continue
            sizes += [b["size"] for b in seg.get("blocks", ()) if b.get("state") == "inactive"]
        for size in sorted(sizes, reverse=True)[:MAX_POISON_BLOCKS]:
            if size < 4:
                continue
            t = torch.empty(size // 4, dtype=torch.int32, device=device)
            t.fill_(POISON_INT32)
            held.append(t)
            written += t.numel() * 4
    else:
        for size in cpu_sizes:
            for _ in range(2):
                t = torch.empty(max(1, int(size) // 4), dtype=torch.int32)
                t.fill_(POISON_INT32)
                held.append(t)
                written += t.numel() * 4
    del held
    return written


def _span(t: Any) -> tuple[int, int] | None:
    import torch

    if type(t) is not torch.Tensor or t.numel() == 0:
        return None
    st = t.untyped_storage()
    return st.data_ptr(), st.data_ptr() + st.nbytes()


def overlaps(outputs: Sequence[Any], inputs: Sequence[Any]) -> tuple[tuple[int, int], ...]:
    """(output index, input index) pairs whose storages share bytes (taxonomy 8)."""
    out = []
    spans = [_span(a) for a in inputs]
    for i, o in enumerate(outputs):
        so = _span(o)
        if so is None:
            continue
        for j, si in enumerate(spans):
            if si is not None and so[0] < si[1] and si[0] < so[1]:
                out.append((i, j))
    return tuple(out)


# Trusted side ----------------------------------------------------------------------------------

def poisoned_elements(t: Any) -> int:
    """Elements of ``t`` that hold the poison pattern bit for bit (floating dtypes; 0 for others)."""
    import torch

    if type(t) is not torch.Tensor or not t.is_floating_point() or t.numel() == 0:
        return 0
    c = t.detach().contiguous()
    size = c.element_size()
    if size == 4:
        return int((c.view(torch.int32) == POISON_INT32).sum())
    if size == 2:
        return int((c.view(torch.int16) == POISON_INT16).sum())
    if size == 8:
        return int((c.view(torch.int64) == POISON_INT64).sum())
    return 0


def has_zero_stride(t: Any) -> bool:
    """True when a dimension of size > 1 has stride 0 (an expanded tensor: one value repeated)."""
    return any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape))


def bitwise_equal(a: Any, b: Any) -> bool:
    """Same shape, dtype and bytes (NaNs with the same bits compare equal)."""
    import torch

    if type(a) is not torch.Tensor or type(b) is not torch.Tensor:
        return False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    x = a.detach().contiguous().reshape(-1).view(torch.uint8)
    y = b.detach().contiguous().reshape(-1).view(torch.uint8)
    return bool(torch.equal(x, y.to(x.device)))


def fingerprint(tensors: Sequence[Any], samples: int = 4096) -> tuple:
    """A cheap identity of output values: shape, dtype and the bytes of up to ``samples``
    evenly spaced elements of each tensor (compared bitwise). Two calls with different inputs
    and different reference outputs must not produce the same fingerprint (taxonomy 8/11)."""
    import torch

    out = []
    for t in tensors:
        if type(t) is not torch.Tensor:
            out.append(None)
            continue
        flat = t.detach().reshape(-1)
        n = flat.numel()
        if n > samples:
            idx = torch.linspace(0, n - 1, samples, device=flat.device).long()
            flat = flat[idx]
        out.append((tuple(t.shape), str(t.dtype), bytes(flat.contiguous().view(torch.uint8).cpu().numpy())))
    return tuple(out)


def finding(check: str, taxonomy: Sequence[int], severity: Severity, detail: str) -> Finding:
    return Finding(check, tuple(sorted(set(taxonomy))), severity, detail)


def worst(findings: Iterable[Finding]) -> Severity | None:
    """The most severe level present (HACK > SHORTCUT > WARNING), or None."""
    found = {f.severity for f in findings}
    for sev in (Severity.HACK, Severity.SHORTCUT, Severity.WARNING):
        if sev in found:
            return sev
    return None


def ordered(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Findings without duplicates, most severe first (stable within a level)."""
    rank = {Severity.HACK: 0, Severity.SHORTCUT: 1, Severity.WARNING: 2}
    seen, out = set(), []
    for f in findings:
        key = (f.check, f.taxonomy, f.detail)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return tuple(sorted(out, key=lambda f: rank[f.severity]))
