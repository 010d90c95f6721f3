"""A Triton candidate's first call made ahead, in the build pool (docs/scale.md, "Triton's first call").

Triton compiles a kernel at its first launch, into ``TRITON_CACHE_DIR`` (the candidate's own
content-hash build directory, :func:`kbv.sandbox.worker_env.worker_environment`), with its launcher
and the driver's utilities: 1.0-1.8 s of a job's first forward on an H100 (docs/gpu-runs.md,
twelfth session), where a CUDA extension's build is done ahead by the pool. The pool's build of a
Triton candidate (:func:`kbv.pipeline.reference_worker._build`) therefore loads it and calls it once
on inputs of the problem's own shape, so that the job's workers find the kernels compiled.

What this call is and is not:

* its inputs are a fresh draw of ``get_inputs()`` under a seed of its own: nothing of the job's
  seeds, sets or secret shape reaches the pool (the shape is drawn by the job, after its load);
* its outputs are dropped unread: nothing it returns counts toward any verdict;
* it runs where every pool process runs: at idle CPU priority and stopped while a lane times
  (:mod:`kbv.batch.executors.builds`), so it adds no work beside a timed call;
* a failure (raised, timed out, died) is the job's own first call's to meet and report in its lane.
"""

from __future__ import annotations

from typing import Any

import torch

from kbv.reference import inputs as inp
from kbv.sandbox import protocol

#: candidate backends that compile at their first call rather than at import.
FIRST_CALL_BACKENDS = ("triton",)
#: inputs above this many bytes are not drawn for a first call ahead (kbv choice: the pool's draw
#: sits beside the lanes' workers on the device; a compile's second is small next to such a job).
MAX_INPUT_BYTES = 1 << 30
#: seconds the call ahead may take (kbv choice: a compile takes seconds; a candidate slower than
#: this meets its compile in its lane, as without the call ahead).
TIMEOUT_S = 60.0


def compiles_at_first_call(backend: str, device: str) -> bool:
    """True where a first call made ahead saves the job a compile: a Triton candidate on cuda
    (on cpu, Triton's interpreter compiles nothing)."""
    return device == "cuda" and backend in FIRST_CALL_BACKENDS


def _input_bytes(get_inputs) -> int | None:
    """Bytes of one draw of ``get_inputs()``'s tensors, read from a draw on the meta device
    (nothing allocated); None when the problem cannot draw there."""
    try:
        args = inp.draw(get_inputs, 0, "meta")
    except Exception:  # noqa: BLE001 - then the call ahead is skipped
        return None
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


def first_call_ahead(worker: Any, rp: Any, config: Any, *, max_bytes: int = MAX_INPUT_BYTES,
                     timeout_s: float = TIMEOUT_S) -> str:
    """Call ``worker``'s loaded ``ModelNew`` once on a fresh draw of ``rp``'s inputs (a
    :class:`~kbv.reference.build.ReferenceProblem`, on its device, in ``config.precision``) and
    drop the outputs. Returns ``"ok"``, ``"skipped: ..."`` (inputs over ``max_bytes`` or not
    drawable on the meta device) or the failure's one line; never raises."""
    nbytes = _input_bytes(rp.module.get_inputs)
    if nbytes is None or nbytes > max_bytes:
        return f"skipped: inputs of {nbytes} bytes" if nbytes is not None else "skipped: no meta draw"
    try:
        args = inp.to_device(inp.draw(rp.module.get_inputs, inp.secret_seed(), rp.device), rp.device,
                             config.precision)
        worker.send(protocol.Forward(tuple(inp.shared_clone(args)), probes=False), phase="first call ahead")
        del args
        reply = worker.receive(phase="first call ahead", timeout=min(timeout_s, config.call_timeout_s))
    except Exception as exc:  # noqa: BLE001 - the job's own first call meets it
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if isinstance(reply, protocol.Outputs):
        del reply  # unread: the worker is closed next
        return "ok"
    return f"{getattr(reply, 'error_type', type(reply).__name__)}: {str(getattr(reply, 'message', ''))[:200]}"


__all__ = ["compiles_at_first_call", "first_call_ahead", "FIRST_CALL_BACKENDS", "MAX_INPUT_BYTES", "TIMEOUT_S"]
