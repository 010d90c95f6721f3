"""Runtime integrity probes that run in the candidate worker, next to a candidate call (imported
before any candidate code): fill the allocator's free memory with a NaN pattern
(:func:`poison_free_memory`; on cpu also glibc's fill of every new chunk, :class:`malloc_perturb`),
watch the candidate's threads for work after forward returns (:class:`ThreadWork`), find outputs
whose storage overlaps an input (:func:`overlaps`), keep the harness's own callables as they were
(:class:`kbv.sandbox.guard.HarnessGuard`), notice torch op kernels registered from Python
(:func:`kbv.sandbox.op_kernels.torch_op_overrides`) and writes outside the sandbox (:func:`watch_writes`).

They run in the untrusted process and are best effort: a candidate that patches them is caught
by the harness-identity check (taxonomy 4) or the static scan. What they saw is decided on the
trusted side: :mod:`kbv.checks` (findings, entries of ``docs/hack-taxonomy.md``) and
:mod:`kbv.pipeline.verdict` (the status). Thresholds are kbv choices, documented where they are
defined (``docs/anti-cheat.md``).
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from typing import Any, Iterable, Sequence

from kbv.sandbox.guard import HarnessGuard  # noqa: F401 - the worker's names (it calls them as probes.*)
from kbv.sandbox.op_kernels import (  # noqa: F401
    TORCH_OP_NAMESPACES, DispatcherWatch, registration_sites, torch_op_overrides)



#: the 4-byte pattern written into free allocator memory: a quiet float32 NaN with payload
#: 0x40DEAD. Honest arithmetic yields the canonical NaN (0x7FC00000), never this payload, so
#: finding it in an output means the candidate returned memory it never wrote (taxonomy 9/10).
POISON_INT32 = 0x7FC0DEAD
#: the same pattern as seen through 2- and 8-byte views (0x7FC0 is a NaN in fp16 and bf16).
POISON_INT16 = 0x7FC0
POISON_INT64 = (POISON_INT32 << 32) | POISON_INT32
#: at most this many free allocator blocks are poisoned before a call (bounds the probe's cost).
MAX_POISON_BLOCKS = 512
#: cpu: blocks of each previous size poisoned (a forward typically allocates a few same-size
#: temporaries before its output), and the most bytes poisoned per call.
CPU_POISON_COPIES = 4
CPU_POISON_BYTES = 256 << 20
#: cpu: the byte glibc's malloc fills every chunk it hands out with while :func:`malloc_perturb` is
#: on (``mallopt(M_PERTURB, 0x80)``: glibc writes ``0x80 ^ 0xFF``). Seen as float32 it is
#: 3.396e38 (0x7F7F7F7F), in fp16 a NaN with payload 0x37F; no arithmetic yields these bit for bit.
#: Needed because pre-filling free blocks is not enough on cpu: a forward that frees a same-size
#: temporary before allocating its output hands the output that temporary's values (the
#: red-team row ``t09-partial-write`` is caught only this way).
PERTURB_FILL_BYTE = 0x7F
_M_PERTURB = -6  # glibc <malloc.h>


# Worker side -----------------------------------------------------------------------------------

def live_threads() -> set[str]:
    """Thread ids of this process from ``/proc/self/task`` (native threads included); empty
    where /proc is missing."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


#: tensor metadata and allocation calls: not work for :class:`ThreadWork`.
_NOT_WORK = frozenset({
    "numel", "nelement", "size", "dim", "ndimension", "stride", "storage_offset", "element_size", "data_ptr",
    "is_contiguous", "is_floating_point", "is_complex", "is_signed", "get_device", "__len__", "__bool__", "__repr__",
    "__format__", "__hash__", "__sizeof__", "untyped_storage",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "record_stream", "detach", "view",
    "as_strided",
})


class ThreadWork:
    """Watches the Python threads started after :meth:`install` (the candidate's own threads and
    pools) for *work*: a call into a C function of torch or of an extension module (a tensor
    method, ``torch.exp``, a ``load_inline`` function, a Triton launcher, numpy), made from
    Python code in that thread; metadata reads, allocation and state switches are not work
    (:meth:`_plumbing`).

    Python code alone is not work: pool plumbing, a worker loop polling its queue through
    helpers of its own, a done-callback (each an honest pattern that would otherwise be a false
    positive). So an idle pool, a pool whose results forward waited for (``.result()``,
    ``join()``, ``map``) and a persistent worker blocked between jobs stay quiet. A work call that
    starts *or returns* after forward returned (a torch op still running at the return ends
    later) is work outside the timed call (taxonomy 2).

    The hook is ``threading.setprofile``: it costs the candidate's own threads a Python call per
    function call, nothing in the main thread. Not seen: threads started through ``_thread``
    directly, a thread that removes its own hook (``sys.setprofile``), torch functions called
    from C (``map(torch.exp, ...)`` consumed by a builtin) and native threads; the scan flags the
    plain spellings (``scan:thread-or-process``, ``scan:trace-hook``, ``scan:source-thread``), and
    outputs written late are caught by ``probe:writes-after-return`` and the timed re-checks.
    """

    def __init__(self) -> None:
        from multiprocessing import resource_sharer

        self._seq = itertools.count(1)
        self._local = threading.local()
        self._last: dict = {}  #: thread ident → (sequence number, label) of its latest work call
        #: watched threads started so far, not counting multiprocessing's own fd-sharing thread (it
        #: starts when the worker first sends a shared tensor and is no thread of the candidate's: counted,
        #: it made every probed forward wait :data:`kbv.sandbox.worker.THREAD_SETTLE_S`); its work
        #: calls are recorded as any thread's
        self.threads = 0
        self._sharer_serve = resource_sharer._ResourceSharer._serve

    def _harness_thread(self) -> bool:
        """Whether the current thread is a plain ``Thread`` running multiprocessing's fd sharer
        (its ``_target`` is read before ``run`` deletes it: the first hook event is ``run``'s call)."""
        t = threading.current_thread()
        target = getattr(t, "_target", None)
        return type(t) is threading.Thread and getattr(target, "__func__", None) is self._sharer_serve

    def install(self) -> None:
        threading.setprofile(self._hook)

    @staticmethod
    def _label_c(fn: Any) -> tuple[str, bool]:
        """(label, owned by torch) of a C function; ``("", False)`` when it is not work."""
        owner = getattr(fn, "__self__", None)
        owner_module = getattr(type(owner), "__module__", None) if owner is not None else None
        name = getattr(fn, "__name__", "?")
        name = name if isinstance(name, str) else "?"
        if isinstance(owner_module, str) and owner_module.split(".")[0] == "torch":
            return f"{type(owner).__name__}.{name}", True
        module = getattr(fn, "__module__", None)
        module = module if isinstance(module, str) else ""
        if not module and isinstance(owner, type(sys)):
            module = owner.__name__ if isinstance(owner.__name__, str) else ""
        top = module.split(".")[0]
        if top and top not in sys.stdlib_module_names and top != "builtins":
            return f"{module}.{name}", top == "torch"
        return "", False

    @staticmethod
    def _plumbing(label: str) -> bool:
        """Torch calls that compute nothing: metadata reads, allocation, grad-mode, stream and
        device switches (``torch._C._set_grad_enabled`` when a ``no_grad`` block ends,
        ``torch._C._cuda_setStream`` when a ``torch.cuda.stream`` block ends). A done-callback
        reading ``numel()`` after forward returned is not work (honest, it would otherwise be a
        false positive); a copy or fill into an output is. Applied to torch's own functions only: an
        extension's ``set_out`` is work."""
        name = label.rsplit(".", 1)[-1]
        return (name in _NOT_WORK or name.startswith(("_set_", "_get_", "is_", "_is_")) or "record_function" in name
                or "._ops.profiler." in label  # torch.ops.profiler._record_function_enter/exit
                or name in ("__enter__", "__exit__")  # torch context managers: profiler ranges, mode guards
                or name.startswith("_cuda_") and ("Stream" in name or "Device" in name))

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        # never raise: an exception here makes CPython drop the hook from the thread for good
        try:
            local = self._local
            if not getattr(local, "seen", False):
                local.seen = True
                if not self._harness_thread():
                    self.threads += 1
            if event not in ("c_call", "c_return", "c_exception"):
                return
            label, torch_owned = self._label_c(arg)
            if not label or torch_owned and self._plumbing(label):
                return
            where = f" in {frame.f_code.co_name}" if frame is not None else ""
            what = f"{label}{where}" if event == "c_call" else f"{label}{where} (still running)"
            # one slot per thread, written only by that thread: no lost update between threads
            self._last[threading.get_ident()] = (next(self._seq), what)
        except BaseException:  # noqa: BLE001
            pass

    def mark(self) -> int:
        """A point in the sequence of work calls (take it right after forward returns)."""
        return next(self._seq)

    def since(self, mark: int) -> str:
        """The latest work call a watched thread started or finished after ``mark`` (``""`` when none)."""
        latest = max(list(self._last.values()), default=(0, ""))
        return latest[1] if latest[0] > mark else ""


def poison_free_memory(device: Any, cpu_sizes: Iterable[int] = ()) -> int:
    """Fill free allocator memory with :data:`POISON_INT32`; returns the bytes written.

    cuda: every inactive block of the caching allocator (``torch.cuda.memory_snapshot``), up to
    :data:`MAX_POISON_BLOCKS`, is allocated at its exact size, filled and released again, so a
    later ``torch.empty`` that lands on it holds the pattern. cpu: the allocator is malloc, so
    :data:`CPU_POISON_COPIES` blocks of each size in ``cpu_sizes`` (bytes; the previous call's inputs
    and outputs) are allocated, filled and freed, which is where malloc hands the next same-size request.
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
        budget = CPU_POISON_BYTES
        for size in cpu_sizes:
            for _ in range(CPU_POISON_COPIES):
                budget -= int(size)
                if budget < 0:
                    break
                t = torch.empty(max(1, int(size) // 4), dtype=torch.int32)
                t.fill_(POISON_INT32)
                held.append(t)
                written += t.numel() * 4
    del held
    return written


class malloc_perturb:
    """Context manager: glibc's malloc fills every chunk it returns with :data:`PERTURB_FILL_BYTE`
    while inside (``mallopt(M_PERTURB)``, glibc's MALLOC_PERTURB_ set at run time), so an output the
    candidate allocated on cpu and never wrote holds the pattern whatever free block it landed on.

    Process-wide and switched off on exit, so timed calls never pay for it. A no-op where the C
    library is not glibc (``active`` is then False).
    """

    def __init__(self) -> None:
        self.active = False
        self._mallopt = None
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt"):
                self._mallopt = libc.mallopt
        except OSError:
            self._mallopt = None

    def __enter__(self) -> "malloc_perturb":
        if self._mallopt is not None:
            self.active = bool(self._mallopt(_M_PERTURB, PERTURB_FILL_BYTE ^ 0xFF))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            self._mallopt(_M_PERTURB, 0)
            self.active = False


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


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_WRITE_EVENTS = {"os.mkdir", "os.remove", "os.rename", "os.rmdir", "os.symlink", "os.link", "os.truncate",
                 "os.chmod", "os.chown", "shutil.rmtree", "shutil.move", "shutil.copyfile"}


def watch_writes(allowed: Sequence[str], log: list) -> None:
    """Install an audit hook (``sys.addaudithook``; it cannot be removed) that appends to ``log``
    every Python-level write outside the ``allowed`` directories: opening a file for writing,
    mkdir, remove, rename, symlink, chmod... (taxonomy 26). The worker reports the log; the trusted
    side turns any entry into a HACK finding. Writes from native code are not seen; the read-only
    filesystem view of :mod:`kbv.sandbox.confinement` stops those.
    """
    import sys

    roots = tuple(os.path.realpath(a) for a in allowed)

    def outside(path: Any) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        try:
            p = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return None
        if any(p == r or p.startswith(r + os.sep) for r in roots):
            return None
        return p

    def hook(event: str, args: tuple) -> None:
        if len(log) >= 50:
            return
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
            where = outside(path) if writes else None
            if where:
                log.append(f"open for writing: {where}")
        elif event in _WRITE_EVENTS and args:
            where = outside(args[0])
            if where:
                log.append(f"{event}: {where}")

    sys.addaudithook(hook)


def block_tracing(watch: ThreadWork) -> None:
    """Install an audit hook (it cannot be removed) that refuses ``sys.settrace`` and
    ``sys.setprofile`` (and what calls them: ``threading.settrace`` in a new thread, C extensions
    through ``PyEval_SetTrace``/``PyEval_SetProfile``) from now on: a trace function runs before every
    line of the harness's frames and can rewrite their locals (a red-team helper's tracer, found by
    walking the stack, set ``timed_call``'s ``reused`` to ``""`` and moved ``one_call``'s ``t0``:
    PASS 4.6x and a forged claim, no ctypes; 2026-12-04). The call raises ``RuntimeError`` in the
    candidate. A ``sys.setprofile`` made by ``threading``'s thread start while its hook is ``watch``'s
    (:meth:`ThreadWork.install`) is kbv's own and goes through."""
    threading_file = threading.__file__

    def allowed_profile() -> bool:
        return sys._getframe(2).f_code.co_filename == threading_file and threading._profile_hook == watch._hook

    def hook(event: str, args: tuple) -> None:
        if event == "sys.settrace" or (event == "sys.setprofile" and not allowed_profile()):
            raise RuntimeError(f"kbv: {event}() is refused in the candidate worker (a trace or profile hook "
                               "can rewrite the harness's frames)")

    sys.addaudithook(hook)
