"""The candidate worker: the only process that ever imports candidate code (untrusted).

One fresh ``spawn``ed process per candidate. On start it leaves the parent's process group (so the
parent can kill it together with anything it starts), sends its stdout/stderr to a log file, moves
into a fresh temporary directory, drops the current directory from ``sys.path`` (no ``torch.py``
planted next to the candidate can shadow torch) and points the extension and Triton caches at the
candidate's content-hash build directory. It then serves :mod:`kbv.sandbox.protocol` requests.

Inputs arrive as shared tensors and are cloned into this process's own memory before any
candidate call, so nothing the candidate does can touch the reference worker's copies. Reference
outputs, hidden seeds and the comparison code never enter this process: it only returns raw
outputs, times and allocator figures.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from kbv.sandbox.inherited_fds import close_inherited
from kbv.sandbox.confinement import WorkerSetup, apply_sandbox
from kbv.sandbox.probe_requests import ProbeRequests
from kbv.sandbox.reply_reports import ReplyReports
from kbv.sandbox.timed import TimedRequests, _flatten

#: seconds the worker waits for threads a call left running before it reports (they may still
#: be writing the outputs: the trusted side compares the outputs with the snapshot taken at return).
THREAD_GRACE_S = 0.2
#: seconds the worker waits after a probed forward returns, when the candidate has threads of its
#: own, before asking whether they worked after the return (kbv.sandbox.call_probes.ThreadWork): work queued
#: before the return is picked up by an idle pool thread well within this (kbv choice).
THREAD_SETTLE_S = 0.02


class _Server(TimedRequests, ProbeRequests, ReplyReports):
    def __init__(self, conn: Connection, setup: WorkerSetup, notes: list[str]):
        import torch

        # harness modules are imported before any candidate code: timing captures its callables now
        from kbv.sandbox import numeric_flags as baselines
        from kbv.sandbox import call_probes as integrity
        from kbv.sandbox import peak_memory as memory
        from kbv.sandbox import kernels as kernel_timeline
        from kbv.sandbox import pointers
        from kbv.sandbox import profiling
        from kbv.sandbox import protocol
        from kbv.sandbox import timer as timing  # noqa: F401
        from kbv.sandbox import fault_handlers, frame_watch, guard, pickling, probe_requests, rawcopy, timed, torch_state  # noqa: F401
        import multiprocessing.connection as mpc
        import multiprocessing.reduction as mpr

        self.torch = torch
        self.integrity = integrity
        self.pointers = pointers
        self.baselines = baselines
        self.protocol = protocol
        self.timing = timing
        self._out_of_memory = memory.is_out_of_memory  # captured before the candidate loads
        self._memory = memory
        # likewise, at the C binding: torch.cuda.empty_cache looks its callees up when called
        self._empty_cache = getattr(torch._C, "_cuda_emptyCache", None)
        # own references, taken before any candidate code runs (patching the modules later does
        # not reach these; a patch is reported by _tampering())
        self._time_calls = timing.time_calls
        self._one_call = timing.one_call
        self._call_inputs = timing.call_inputs
        self._thread_time = timing._thread_time
        self._time_calls_code = timing.time_calls.__code__
        self._kw_defaults = timing.time_calls.__kwdefaults__
        self.conn = conn
        self.setup = setup
        # an explicit index: torch.cuda.set_device and friends refuse a bare "cuda"
        self.device = torch.device("cuda", 0) if setup.device == "cuda" else torch.device(setup.device)
        self.model = None
        self.flags: dict = {}
        self.timing_sets: list = []
        self.notes = tuple(notes)
        self.last_args: list | None = None  #: the previous forward's inputs (``reuse`` buffers).
        self.last_sizes: list[int] = []  #: bytes of the previous call's tensors (cpu poisoning).
        #: cpu probe calls run with glibc's malloc filling every chunk it hands out (stale memory, taxonomy 9)
        self._perturb = integrity.malloc_perturb() if self.device.type == "cpu" else contextlib.nullcontext()
        self._warm_runtime()
        self._modes = torch_state.ModeShield(torch)  #: torch modes the candidate leaves on, taken off (taxonomy 4)
        self._tensor_class = torch_state.TorchClassWatch(torch)  #: torch.Tensor's and the op counts' classes as before the load
        # every harness callable, the clocks and the reply path, as they are before the candidate
        # loads: checked (and put back) before every reply, taxonomy 4/24/25
        self.guard = integrity.HarnessGuard(
            guard.kbv_modules(),
            [(time, "perf_counter", "time.perf_counter"), (time, "monotonic", "time.monotonic"),
             (torch.cuda, "synchronize", "torch.cuda.synchronize"), (torch.cuda, "Event", "torch.cuda.Event"),
             (torch.cuda.Event, "record", "torch.cuda.Event.record"),
             (torch.cuda.Event, "elapsed_time", "torch.cuda.Event.elapsed_time"),
             (torch.Tensor, "clone", "torch.Tensor.clone"),
             (mpc.Connection, "send_bytes", "Connection.send_bytes"),
             (mpc.Connection, "_send_bytes", "Connection._send_bytes"), (mpc.Connection, "_send", "Connection._send"),
             (mpr.ForkingPickler, "dumps", "ForkingPickler.dumps"), (mpr.ForkingPickler, "__init__", "ForkingPickler.__init__"),
             *torch_state.torch_attributes(torch),
             *((self, name, f"worker.{name}") for name in ("_time_calls", "_one_call", "_call_inputs", "_thread_time",
                                                            "torch", "timing",
                                                            "protocol", "baselines", "pointers",
                                                            "integrity", "conn", "_perturb", "_modes",
                                                            "_tensor_class"))])
        # the candidate's own Python threads, watched for work after forward returns (taxonomy 2)
        self.threadwork = integrity.ThreadWork()
        self.threadwork.install()
        self.guard.watch(threading, "_profile_hook", "threading.setprofile hook")
        integrity.block_tracing(self.threadwork)
        #: the candidate's code asking for a frame or an object walk: refused and reported (taxonomy 13)
        self._frames = frame_watch.FrameWatch()
        self._frames.install()
        self._op_impls = set(getattr(torch.library, "_impls", ()))  #: torch.library registrations before load
        self._registry_at_load = hasattr(torch.library, "_impls")
        try:  #: torch's operators as they are before the candidate loads (harness identity)
            self._ops_before = frozenset(torch._C._dispatch_get_all_op_names())
        except Exception:  # noqa: BLE001 - a torch without the call
            self._ops_before = frozenset()
        try:  #: the dispatcher's kernels for torch's ops before the candidate loads (C++ ones included)
            self._dispatcher = integrity.DispatcherWatch(torch)
        except Exception:  # noqa: BLE001 - a torch without the dispatcher's dump
            self._dispatcher = None
        self.guard.watch(self, "_dispatcher", "worker._dispatcher")
        #: whose SIGSEGV/SIGBUS handlers the candidate left: faulthandler's or its own (taxonomy 3)
        self._faults = fault_handlers.FaultHandlerWatch()
        self.guard.watch(self, "_faults", "worker._faults")
        self.guard.watch(self, "_frames", "worker._frames")
        self.writes: list[str] = []  #: writes outside the sandbox seen by the audit hook (taxonomy 26).
        integrity.watch_writes([setup.workdir, setup.build_dir, "/dev/shm", "/dev/null"], self.writes)
        self._reported_writes = 0
        self._held: tuple = ()  #: tampering reports waiting for a reply that carries them.
        # the start-up's objects (torch, Triton, the harness) leave the collector's generations: the
        # full collection of each Ping then walks only what came after (a worker started ahead
        # answered its job's readiness Ping in 110-125 ms on the H100, a collection over torch)
        self.timing.collect(freeze=True)

    def _warm_runtime(self) -> None:
        """Start torch's own threads (intra-op pool, CUDA driver) before the thread baseline, and
        apply the eager-fp32 flags once, before the snapshots of torch's operators and of the
        harness. On cpu nothing of kbv's imports ``torch._dynamo`` or ``torch._inductor`` in this
        worker (:func:`kbv.sandbox.numeric_flags._set_deterministic`, :mod:`kbv.sandbox.profiling`): a
        candidate that compiles imports them itself, and what they register then is torch's own
        (the op-registry check leaves registrations made from torch's files alone). On cuda the
        kernel profiler (``torch.profiler.profile``, :mod:`kbv.sandbox.kernels`) loads Inductor on
        its first use, so it is loaded here, before the snapshots, as it always was there."""
        torch = self.torch
        if self.device.type == "cuda":
            import torch._inductor.config  # noqa: F401 - see above
        self.baselines.apply_flags(self.baselines.flags_for("eager-fp32"))
        torch.ones(1 << 16).sum()
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.ones(1 << 16, device=self.device).sum()
            self._sync()
            self.pointers.driver()  # the driver library the output-memory check asks, bound before the candidate
            self.pointers.copier()  # and its cuMemcpy, which copies the timed calls' outputs out
        for name in self.setup.preload:  # the candidate's backend's imports, before its load (not on its clock)
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not installed or broken here: the candidate's own import says so
                pass
        if self.device.type == "cuda" and "triton" in self.setup.preload and "triton" in sys.modules:
            from kbv.sandbox.triton_warm import start_triton

            start_triton()  # Triton's per-process start-up, off the first call's clock

    # helpers ---------------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.timing._cuda_sync(self.device)

    def _release_cache(self, tensors: Any, poison: bool = False) -> None:
        """:func:`kbv.sandbox.peak_memory.release_cache` of this worker's device after a correctness
        forward over ``tensors`` (its inputs and outputs); ``poison`` on a probed call."""
        if self.device.type == "cuda":
            self._memory.release_cache(self.device, tensors, self._empty_cache,
                                       self.integrity.poison_free_memory if poison else None, self._out_of_memory)

    def _own(self, args: Any) -> list:
        """Copy shared inputs into this process's own memory."""
        torch = self.torch
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    def _check_flags(self) -> tuple:
        changes = tuple(self.baselines.flag_changes(self.flags))
        if changes:
            self.baselines.apply_flags(self.base_flags)
        return changes

    # requests --------------------------------------------------------------------------------
    def load(self, req: Any) -> Any:
        torch = self.torch
        self.base_flags = dict(req.flags)
        self.baselines.apply_flags(self.base_flags)
        self.flags = self.baselines.numeric_flags()  # every switch, new TF32 API included
        t0 = time.perf_counter()
        spec = importlib.util.spec_from_file_location(req.module_name, req.candidate_path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {req.candidate_path}")
        module = importlib.util.module_from_spec(spec)
        self._frames.arm(req.candidate_path, (self.setup.workdir, self.setup.build_dir), vars(module))
        sys.modules[req.module_name] = module
        self._importing = True  # a failure now is the file's import, not ModelNew's construction (Failed.phase)
        spec.loader.exec_module(module)
        self._importing = False
        cls = getattr(module, "ModelNew", None)
        if cls is None:
            raise AttributeError("candidate module defines no ModelNew")
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.set_device(self.device)
            self._sync()
            before = torch.cuda.memory_allocated(self.device)
        torch.manual_seed(req.init_seed)
        try:
            model = cls(*req.init_args)
        except TypeError as exc:  # most often the arity: say what get_init_inputs() gave
            kinds = ", ".join(f"Tensor{list(a.shape)}" if isinstance(a, torch.Tensor) else type(a).__name__
                              for a in req.init_args)
            raise TypeError(f"ModelNew(*get_init_inputs()) with {len(req.init_args)} argument(s) ({kinds}): "
                            f"{exc}") from exc
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[req.precision]
        model = model.to(self.device)
        if req.precision != "fp32":
            model = model.to(dtype)
        self._sync()
        model_bytes = torch.cuda.memory_allocated(self.device) - before if cuda else None
        self.model = model
        state = {}
        if isinstance(model, torch.nn.Module):
            for name, t in list(model.named_parameters()) + list(model.named_buffers()):
                state[name] = t.detach()
        changes = self._check_flags()
        self.timing.collect(freeze=True)
        return self.protocol.Loaded(state=state, model_bytes=model_bytes,
                                    load_seconds=time.perf_counter() - t0, flag_changes=changes,
                                    sandbox=self.notes)

    def _forward_args(self, req: Any) -> list:
        torch = self.torch
        prev = self.last_args
        if req.buffers == "reuse" and prev is not None and len(prev) == len(req.inputs) and all(
                (type(a) is torch.Tensor) == (type(b) is torch.Tensor)
                and (type(a) is not torch.Tensor or (a.shape == b.shape and a.dtype == b.dtype))
                for a, b in zip(prev, req.inputs)):
            for k, a in enumerate(req.inputs):
                if type(a) is torch.Tensor:
                    prev[k].copy_(a)
                else:
                    prev[k] = a
            return prev
        spacer = None
        if req.buffers == "moved":  # new copies away from the previous addresses
            spacer = [torch.empty(max(1, a.numel()) * a.element_size() + 4096, dtype=torch.uint8, device=a.device)
                      for a in req.inputs if type(a) is torch.Tensor]
        args = self._own(req.inputs)
        del spacer
        return args

    def forward(self, req: Any) -> Any:
        torch = self.torch
        ig = self.integrity
        args = self._forward_args(req)
        if not req.probes:
            self._sync()
            with torch.no_grad():
                out = self.model(*args)
            self._modes.clear()  # no harness torch call after the candidate's under a mode it entered
            self._sync()
            self.last_args = args
            tensors, structure = _flatten(out)
            memory = self.pointers.output_memory(tensors) if self.device.type == "cuda" else ""
            tensors = self._shareable(tensors, memory)
            self._release_cache((*args, *tensors))
            return self.protocol.Outputs(tensors=tensors, structure=structure,
                                         flag_changes=self._check_flags(), memory=memory)
        ig.poison_free_memory(self.device, self.last_sizes)
        self._sync()
        before = ig.live_threads()
        with torch.no_grad(), self._perturb:
            out = self.model(*args)
        self._modes.clear()
        mark = self.threadwork.mark()
        tensors, structure = _flatten(out)
        # right after return, before any sync: on cuda the copy is ordered on the current stream
        snapshot = tuple(t.detach().clone() if type(t) is torch.Tensor else None for t in tensors)
        self._sync()
        new = ig.live_threads() - before
        if new:
            deadline = time.monotonic() + THREAD_GRACE_S
            while new and time.monotonic() < deadline:
                time.sleep(0.01)
                new &= ig.live_threads()
        if self.threadwork.threads:  # pool work queued before return starts within a few ms
            time.sleep(THREAD_SETTLE_S)
        late = self.threadwork.since(mark)
        late_work = f"ran {late}" if late else ""
        self._sync()
        aliases = ig.overlaps(tensors, args)
        memory = self.pointers.output_memory(tensors) if self.device.type == "cuda" else ""
        tensors = self._shareable(tensors, memory)
        self.last_args = args
        self.last_sizes = [t.numel() * t.element_size() for t in (*tensors, *args) if type(t) is torch.Tensor]
        self._release_cache((*args, *tensors), poison=True)
        changes = self._check_flags()
        return self.protocol.Outputs(tensors=tensors, structure=structure, flag_changes=changes,
                                     snapshot=snapshot, exact=tuple(type(t) is torch.Tensor for t in tensors),
                                     inputs_after=tuple(a for a in args if type(a) is torch.Tensor),
                                     aliases=aliases, new_threads=len(new), late_work=late_work,
                                     memory=memory)

    def _shareable(self, tensors: tuple, memory: str) -> tuple:
        """``tensors``, with cuda outputs over memory CUDA IPC cannot share (``memory`` names it)
        copied to ordinary device memory (:func:`kbv.sandbox.rawcopy.device_copies`): the reply is then
        sent and the trusted side names the memory (``probe:output-memory``), instead of the worker
        dying while it pickles the reply."""
        if not memory:
            return tensors
        from kbv.sandbox import rawcopy

        out = rawcopy.device_copies(tensors, self.pointers.copier())
        self._sync()
        return out

    def ping(self, req: Any) -> Any:
        # the trusted side pings before each measured request: the collections owed run here
        self.timing.collect(trim=req.trim)
        return self.protocol.Pong()

    def release_shared(self) -> None:
        """Drop every tensor the trusted side sent (the bound pass's sets, the buffers made of them, the
        last forward's inputs, the timing sets), before the process exits. On cuda
        they came by CUDA IPC: a block is freed in the sender only once each receiver released it,
        and a receiver killed while holding it never does (the reference worker's device memory grew
        job after job at full size, docs/gpu-runs.md, seventh session). A candidate that keeps such a
        tensor itself keeps it held: the reference worker then replaces itself
        (:func:`kbv.processes.footprint.device_left_over`)."""
        # dropped by reference count, at once (no collection on the job's path: a cycle of the
        # candidate's making that holds one is the candidate's, and costs it a fresh reference worker)
        self.bound_sets, self._call_buffers, self.timing_sets, self.last_args = [], [], [], None
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def serve(self) -> None:
        p = self.protocol
        reports = _Server._with_reports  # the class's own, whatever the instance holds later
        reply_path = _Server._with_reply_path
        handlers = {
            p.Load: ("load", self.load),
            p.Forward: ("forward", self.forward),
            p.SetTimingInputs: ("time", self.set_timing_inputs),
            p.SetBoundInputs: ("time", self.set_bound_inputs),
            p.Time: ("time", self.time),
            p.TimedCall: ("time", self.timed_call),
            p.MeasureMemory: ("memory", self.memory),
            p.Ping: ("ping", self.ping),
            p.CountOps: ("profile", self.count_ops),
        }
        while True:
            try:
                req = p.recv_request(self.conn)
            except EOFError:
                return
            if isinstance(req, p.Shutdown):
                if self.device.type == "cuda":  # on cpu the exit itself unmaps what was shared
                    self.release_shared()
                return
            phase, handler = handlers[type(req)]
            full = type(req) in (p.Load, p.CountOps, p.MeasureMemory)  # the rest: a light registry read
            deferred = type(req) is p.Time and req.defer_checks is True
            # every request runs, and its reply is pickled, without collections (timer.gc_paused): the
            # bound pass's clock holds the whole request, and a candidate that asks gc.isenabled()
            # cannot tell a timed call from a checked or counted one (a red-team helper's wrapper
            # dodged the op count that way, SHORTCUT to PASS); the ping collects explicitly
            with self.timing.gc_paused():
                try:
                    reply = handler(req)
                except BaseException as exc:  # noqa: BLE001 - the candidate may raise anything, even SystemExit
                    where = "import" if phase == "load" and getattr(self, "_importing", False) else phase
                    reply = p.Failed(phase=where, error_type=type(exc).__name__, message=str(exc)[:4000],
                                     traceback="".join(traceback.format_exception(exc))[-8000:],
                                     kind=p.OUT_OF_MEMORY if self._out_of_memory(exc) else p.RAISED)
                    traceback.print_exc()
                del req  # the request's shared inputs (copied by the handler) unmapped now, not at the next request
                # the reply path restored before it is used (a deferred request: that alone, the rest at the next reply)
                reply = reply_path(self, reply) if deferred else reports(self, reply, full)
                p.send(self.conn, reply)
                del reply




def candidate_main(conn: Connection, setup: WorkerSetup, log_fd: int | None = None) -> None:
    """Entry point of the spawned candidate worker; ``log_fd`` receives its stdout/stderr."""
    notes = apply_sandbox(setup, log_fd)
    # nothing of the trusted side's stays open: the tracker's pipe, the zygote's sentinel
    notes.append(f"descriptors: {len(close_inherited({conn.fileno()}))} inherited closed")
    _Server(conn, setup, notes).serve()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
