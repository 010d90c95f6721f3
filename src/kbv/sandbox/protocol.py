"""The wire format between the reference worker (trusted) and a candidate worker (untrusted).

Requests go trusted → untrusted; replies come back. Both are small frozen dataclasses defined
here once. Tensors travel with ``torch.multiprocessing``'s reducers: CUDA tensors as CUDA IPC
handles, CPU tensors as shared-memory file descriptors.

Replies are decoded on the trusted side only, by :mod:`kbv.processes.reply_decoding` (which resolves
only the globals a tensor or a reply from this module needs): no code of that decoding is in this
package, which the candidate's process imports.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

from kbv.sandbox import pickling

#: Largest reply accepted from a candidate (bytes of pickle; tensor data travel out of band).
MAX_REPLY_BYTES = 256 << 20


class ProtocolError(RuntimeError):
    """A reply that is not a well-formed message of this protocol."""


# Requests (trusted → untrusted) ------------------------------------------------------------

@dataclass(frozen=True)
class Load:
    """Import the candidate file, seed, construct ``ModelNew(*init_args)`` on ``device``."""

    candidate_path: str
    module_name: str
    init_args: tuple
    init_seed: int
    device: str
    precision: str  #: fp32 | bf16 | fp16
    flags: dict  #: numeric flags to hold the candidate to (see :mod:`kbv.sandbox.numeric_flags`).


@dataclass(frozen=True)
class Forward:
    """Run one forward call on ``inputs`` (the worker copies them into its own memory first).

    ``buffers``: ``fresh`` (new copies), ``reuse`` (the values are copied into the previous
    call's input tensors: same addresses, new values) or ``moved`` (new copies placed away from
    the previous call's addresses). ``probes``: fill the allocator's free memory with a NaN
    pattern first (``kbv.sandbox.call_probes.POISON_INT32``), so memory the candidate reads without
    writing shows up, and return the snapshot, the inputs after the call, aliasing and threads.
    """

    inputs: tuple
    buffers: str = "fresh"
    probes: bool = True


@dataclass(frozen=True)
class SetTimingInputs:
    """Input sets the timed calls rotate through (kept as sent on cpu, in memory the trusted side
    no longer maps; copied into the worker's memory on cuda), and the output
    slots: ``slots`` regions of ``slot_bytes`` each, allocated now, before any timed call, into which
    every timed call's outputs are copied without the dispatcher (:mod:`kbv.sandbox.rawcopy`);
    ``hold_bytes``: bytes of earlier calls' outputs held between timed calls
    (``EvalConfig.held_output_bytes``). The reply is :class:`TimingReady`."""

    input_sets: tuple
    slot_bytes: int = 1 << 20
    slots: int = 1
    hold_bytes: int = 128 << 20
    #: bytes of each slot written when the buffer is made, on cpu (0: all; the rest is slack,
    #: backed by memory only where an output needs it: :class:`kbv.sandbox.rawcopy.SlotCopier`)
    touch_bytes: int = 0


@dataclass(frozen=True)
class Time:
    """Time ``trials`` calls after ``warmup`` untimed ones, rotating through the timing inputs
    (see :func:`kbv.sandbox.timer.time_calls` for ``refresh``, ``keep`` and ``sync_inside``)."""

    warmup: int
    trials: int
    l2_flush_bytes: int | None
    first_set: int = 0
    refresh: bool = True
    keep: tuple = ()  #: timed-call indices whose outputs come back for a correctness re-check.
    sync_inside: bool = False
    #: (timed-call index, ((arg index, index tuple, value), ...)) per timed call: elements changed in
    #: that call's inputs after the refresh copy (kbv.reference.mutation.timed_mutation).
    mutate: tuple = ()
    #: (timed-call index, (source set index, seed)) per timed call (kbv.sandbox.timed_inputs.mix_values).
    mix: tuple = ()
    #: every timed call's outputs copied into slot ``i`` (call i) of the slot buffer, their layouts in
    #: :attr:`Times.outputs`: the trusted side judges a subset it chooses after the reply (the bound pass).
    slots: bool = False
    #: the harness check (:meth:`kbv.sandbox.reply_reports.ReplyReports._tampering`) is not run before the loop nor
    #: before this reply but before the next one: the bound pass sends a :class:`Ping` first (which
    #: runs it) and measures this request alone, so its figures hold the calls and not the check.
    defer_checks: bool = False
    #: the calls run on the bound pass's input sets (:class:`SetBoundInputs`), call ``j`` on set ``j``, as
    #: the trusted side wrote them (``refresh`` off): the loop does no per-call work but the call.
    bound_inputs: bool = False


@dataclass(frozen=True)
class SetBoundInputs:
    """The bound pass's input sets, one per call of a pass (warmup first), kept as sent, never copied:
    they lie in memory the trusted side shares and writes each pass's values into while the worker
    is stopped (:mod:`kbv.pipeline.bound_pass`). The reply is :class:`Pong`."""

    input_sets: tuple


@dataclass(frozen=True)
class Ping:
    """Reply at once after a full collection (:func:`kbv.sandbox.timer.collect`): the round trip
    measures the channel's own overhead. ``trim``: freed heap pages go back to the system too, so that
    the resident set read next is what the worker holds (:mod:`kbv.checks.memory_growth_rules`)."""

    trim: bool = False


@dataclass(frozen=True)
class CountOps:
    """Run one forward on timing input set ``set_index`` under the op counter (and, on cuda,
    the kernel profiler) of :mod:`kbv.sandbox.profiling`."""

    set_index: int = 0
    #: (source set index, seed): the set's values mixed as a timed call's are (kbv.sandbox.timed_inputs.mix_values),
    #: so a cache filled during the timed calls does not answer the counted call.
    mix: tuple = ()
    #: ``(arg index, index tuple, value)`` changes after the mix, as a timed call's
    #: (kbv.reference.mutation.timed_mutation): structured inputs, left out of the mix, change too.
    mutate: tuple = ()
    #: ``(fresh set or None, set index, mix, mutate)`` per turn: each count (the dispatch mode's,
    #: then the profiler's) runs one call per turn and keeps, per op, the most any call ran. A turn
    #: without a fresh set is a timed call's inputs (timing set ``set index``, ``mix``, ``mutate``);
    #: one with a set no earlier request carried (a tuple of arguments, a timing set's layout) puts
    #: it in the timing set's place, ``mix`` taking its source from ``[fresh set, *timing sets]``.
    #: When given, ``set_index``, ``mix`` and ``mutate`` above are unused.
    inputs: tuple = ()


@dataclass(frozen=True)
class TimedCall:
    """Time one call on the inputs :func:`kbv.sandbox.timed_inputs.call_inputs` makes from timing set
    ``set_index`` with ``mix`` and ``mutate`` (revealed with this call, never before), with an
    L2 flush first on cuda. The reply (:class:`CallTimed`) carries the output itself, shared;
    whether kbv judges it is decided after the call returned, on the trusted side. Warmup and
    timed calls are the same request: the worker cannot tell them apart."""

    set_index: int
    l2_flush_bytes: int | None = None
    mix: tuple = ()
    mutate: tuple = ()


@dataclass(frozen=True)
class MeasureMemory:
    """Peak allocator figures of one forward call on timing input set ``set_index``."""

    set_index: int = 0


@dataclass(frozen=True)
class Shutdown:
    pass


# Reports inside replies (untrusted → trusted) ----------------------------------------------

#: A harness callable (or its code or defaults) was replaced since load: taxonomy 4.
HARNESS_PATCHED = "harness-patched"
#: The same on the reply path (the pipe's send functions, this module's pickling): taxonomy 4 and 24.
REPLY_PATH_PATCHED = "reply-path-patched"
#: A write outside the worker's working and build directories: taxonomy 26.
SANDBOX_WRITE = "sandbox-write"
#: The candidate's code asked for a frame or a walk of live objects, refused (:mod:`kbv.sandbox.frame_watch`): taxonomy 13.
FRAME_ACCESS = "frame-access"
TAMPERING_KINDS = (HARNESS_PATCHED, REPLY_PATH_PATCHED, SANDBOX_WRITE, FRAME_ACCESS)


@dataclass(frozen=True)
class Tampering:
    """One change the candidate made to the process it shares with the harness, found by the worker
    before a reply (and undone where it could be): ``kind`` is one of :data:`TAMPERING_KINDS`,
    ``detail`` what changed (the harness label, e.g. ``time.perf_counter``, or the path written).
    The findings they become are :func:`kbv.checks.flag_rules.tampering_findings`.

    Raises:
        ProtocolError: an unknown kind, or a detail that is not a ``str``.
    """

    kind: str
    detail: str

    def __post_init__(self) -> None:
        if self.kind not in TAMPERING_KINDS or type(self.detail) is not str:
            raise ProtocolError(f"not a tampering report: kind {self.kind!r}, detail of type "
                                f"{type(self.detail).__name__}")

    def describe(self) -> str:
        """The report as a verdict shows it: ``harness patched: <detail>`` or ``sandbox: <detail>``."""
        if self.kind == FRAME_ACCESS:
            return self.detail
        return f"{'sandbox' if self.kind == SANDBOX_WRITE else 'harness patched'}: {self.detail}"


# Replies (untrusted → trusted) -------------------------------------------------------------

@dataclass(frozen=True)
class Loaded:
    state: dict  #: name → tensor for every parameter and buffer of ModelNew.
    model_bytes: int | None  #: allocator growth across construction (cuda), else None.
    load_seconds: float
    flag_changes: tuple = ()  #: ``name: expected -> now`` per global numeric flag changed (str).
    tampering: tuple = ()  #: :class:`Tampering` reports.
    faulthandler: bool = False  #: SIGSEGV and SIGBUS run Python's faulthandler (:mod:`kbv.sandbox.fault_handlers`).
    sandbox: tuple = ()  #: notes on the isolation the worker achieved (network namespace, ...).


@dataclass(frozen=True)
class Outputs:
    tensors: tuple  #: the forward result flattened: one tensor, or the members of a tuple/list.
    structure: str  #: ``tensor`` or ``tuple``.
    flag_changes: tuple = ()  #: ``name: expected -> now`` per global numeric flag changed (str).
    tampering: tuple = ()  #: :class:`Tampering` reports.
    faulthandler: bool = False  #: SIGSEGV and SIGBUS run Python's faulthandler (:mod:`kbv.sandbox.fault_handlers`).
    snapshot: tuple = ()  #: copies of ``tensors`` taken right after forward returned (before a sync).
    inputs_after: tuple = ()  #: the worker's input tensors after the call (mutation check).
    aliases: tuple = ()  #: (output index, input index) pairs whose storages overlap.
    new_threads: int = 0  #: threads alive after the call that were not before it.
    exact: tuple = ()  #: per output: ``type(out) is torch.Tensor`` as forward returned it (before pickling).
    late_work: str = ""  #: work a candidate thread did after forward returned (kbv.sandbox.call_probes.ThreadWork).
    memory: str = ""  #: a cuda output over memory that is not device memory (kbv.sandbox.pointers), or "".


@dataclass(frozen=True)
class Pong:
    pass


@dataclass(frozen=True)
class OpCounts:
    ops: dict  #: aten compute op → calls during one forward (dispatch mode, calling thread).
    kernels: tuple = ()  #: (name, device µs, own) per GPU kernel (cuda only).
    own_share: float | None = None
    error: str | None = None
    flag_changes: tuple = ()  #: ``name: expected -> now`` per global numeric flag changed (str).
    tampering: tuple = ()  #: :class:`Tampering` reports.
    faulthandler: bool = False  #: SIGSEGV and SIGBUS run Python's faulthandler (:mod:`kbv.sandbox.fault_handlers`).
    recorded: dict = field(default_factory=dict)  #: top-level aten ops, every thread (kbv.sandbox.profiling.recorded_ops).
    recorded_error: str | None = None
    #: the same ops keyed with their arguments' sizes (:attr:`kbv.sandbox.profiling.OpCount.shaped`).
    recorded_shaped: dict = field(default_factory=dict)
    #: ``error`` / ``recorded_error`` came from the probe itself failing, not from the forward
    #: (``OpCount.probe_failed``, ``KernelProfile.probe_failed``): not the candidate's.
    probe_failed: bool = False
    recorded_probe_failed: bool = False
    #: device µs per profiled call, overlapping activities counted once (cuda only;
    #: :attr:`kbv.sandbox.kernels.KernelProfile.busy_us`): the CUPTI figure beside the timed events.
    kernel_busy_us: float | None = None


@dataclass(frozen=True)
class Times:
    times_ms: tuple
    clock: str
    flag_changes: tuple = ()  #: ``name: expected -> now`` per global numeric flag changed (str).
    tampering: tuple = ()  #: :class:`Tampering` reports.
    faulthandler: bool = False  #: SIGSEGV and SIGBUS run Python's faulthandler (:mod:`kbv.sandbox.fault_handlers`).
    kept: tuple = ()  #: (timed-call index, timing set index, output tensors) per kept call.
    #: with :attr:`Time.slots`: per timed call, one (offset, shape, strides, dtype name) per output in
    #: the slot buffer (:func:`kbv.sandbox.rawcopy.view`).
    outputs: tuple = ()
    structure: str = "tensor"


@dataclass(frozen=True)
class TimingReady:
    """Reply to :class:`SetTimingInputs`: the slot buffer, shared (cpu shared memory, CUDA IPC)."""

    slots: Any


@dataclass(frozen=True)
class CallTimed:
    time_ms: float
    clock: str
    #: one (offset, shape, strides, dtype name) per output: where this call's outputs were copied
    #: in slot 0 of the slot buffer (:class:`TimingReady`), after the call completed.
    outputs: tuple
    structure: str = "tensor"
    #: the output shares storage with the previous timed call's output (still held by the worker)
    #: or with a parameter or buffer of ModelNew: how, or "".
    reused: str = ""
    flag_changes: tuple = ()  #: ``name: expected -> now`` per global numeric flag changed (str).
    tampering: tuple = ()  #: :class:`Tampering` reports.
    faulthandler: bool = False  #: SIGSEGV and SIGBUS run Python's faulthandler (:mod:`kbv.sandbox.fault_handlers`).
    #: CPU time of the worker's calling thread over the call, ms (the repeat-gain comparison on
    #: cpu: a loaded machine stretches wall time, not CPU time).
    cpu_ms: float | None = None
    memory: str = ""  #: a cuda output over memory that is not device memory (kbv.sandbox.pointers), or "".


@dataclass(frozen=True)
class MemoryFigures:
    forward_peak_bytes: int
    input_bytes: int
    flag_changes: tuple = ()  #: ``name: expected -> now`` per global numeric flag changed (str).
    tampering: tuple = ()  #: :class:`Tampering` reports.
    faulthandler: bool = False  #: SIGSEGV and SIGBUS run Python's faulthandler (:mod:`kbv.sandbox.fault_handlers`).


@dataclass(frozen=True)
class Failed:
    """The request raised inside the candidate. ``phase`` is import (the load request's import of
    the file) / load / forward / time / memory;
    ``kind`` what the worker read off the exception where it caught it (:data:`RAISED`,
    :data:`OUT_OF_MEMORY`: an allocation failed); the reports as every reply with them."""

    phase: str
    error_type: str
    message: str
    traceback: str = ""
    kind: str = "raised"
    flag_changes: tuple = ()  #: ``name: expected -> now`` per global numeric flag changed (str).
    #: :class:`Tampering` reports: what the candidate did before it raised (a refused frame access
    #: raises in the candidate, and is reported with the failure it caused).
    tampering: tuple = ()
    faulthandler: bool = False  #: SIGSEGV and SIGBUS run Python's faulthandler (:mod:`kbv.sandbox.fault_handlers`).


#: :attr:`Failed.kind` values.
RAISED = "raised"
OUT_OF_MEMORY = "out-of-memory"


REPLY_TYPES = (Loaded, Outputs, Times, MemoryFigures, Failed, Pong, OpCounts, CallTimed, TimingReady)
#: classes a reply may hold besides tensors and builtins.
PAYLOAD_TYPES = (Tampering,)


#: every message class and its field names (:class:`kbv.sandbox.pickling.MessagePickler`).
_FIELDS = {c: tuple(f.name for f in dataclasses.fields(c)) for c in list(globals().values())
           if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == __name__}


def reducers_patched() -> list[str]:
    """:func:`kbv.sandbox.pickling.reducers_patched` for this module's message classes."""
    return pickling.reducers_patched(_FIELDS)


def encode(msg: Any) -> bytes:
    """Pickle ``msg`` with :class:`kbv.sandbox.pickling.MessagePickler` (tensors shared, not copied)."""
    buf = io.BytesIO()
    pickling.MessagePickler(buf, pickle.HIGHEST_PROTOCOL, _FIELDS).dump(msg)
    return buf.getvalue()


def send(conn: Connection, msg: Any) -> None:
    conn.send_bytes(encode(msg))


def recv_request(conn: Connection) -> Any:
    """Candidate side: requests come from the trusted side, plain unpickling is fine there."""
    return ForkingPickler.loads(conn.recv_bytes())
