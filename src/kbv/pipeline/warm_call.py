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
  (:mod:`kbv.batch.executors.builds`), so none of its host work runs beside a timed call; GPU work it
  queued before the stop still runs, as the pool's construction of ``ModelNew`` on the device
  already could (docs/anti-cheat.md, Limits);
* a failure (raised, timed out, died) is the job's own first call's to meet and report in its lane;
  a worker killed while it held the calls' inputs leaves their device memory in the pool's
  reference worker, which is then replaced (:func:`kbv.pipeline.reference_worker._left_over_after_calls`);
* Triton's autotuner, asked to keep its choice on disk (``cache_results``, ``TRITON_CACHE_AUTOTUNING``),
  would keep one benchmarked in the pool, at idle priority, maybe stopped mid-benchmark while a lane
  timed: every autotuning file a call ahead wrote is removed once its worker is closed
  (:func:`drop_new_autotune`), so the job's worker benchmarks its own (red-team helper, 2026-12-06).

A second call follows at a decoy shape: the problem's size constants drawn as a secret shape is
(:func:`kbv.reference.shapes.secret_sizes`, odd sizes between a quarter and a half of each), under
a generator of its own. Triton specialises a kernel on whether each integer argument is 1 or a
multiple of 16, and candidates derive block sizes from the sizes (``next_power_of_2``): an odd size
drawn from the same range usually compiles the kernels the job's secret shape will need, in its
shape worker and in the late set after the timed calls. The decoy is not the job's shape (that is
drawn by the job, per verification, after its load) and says nothing the problem's source and
:mod:`kbv.reference.shapes` do not: that kbv tries odd sizes in that range.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import torch

from kbv.intake.sizes import size_constants, with_sizes
from kbv.reference import inputs as inp
from kbv.reference.build import import_problem
from kbv.reference.shapes import secret_sizes, size_patterns
from kbv.sandbox import protocol

#: candidate backends that compile at their first call rather than at import.
FIRST_CALL_BACKENDS = ("triton",)
#: inputs above this many bytes are not drawn for a first call ahead (kbv choice: the pool's draw
#: sits beside the lanes' workers on the device; a compile's second is small next to such a job).
MAX_INPUT_BYTES = 1 << 30
#: seconds the call ahead may take, wall time, the pool's stops while lanes time included (kbv
#: choice: a compile takes seconds; a call cut off here meets its compile in its lane, as without
#: the call ahead, and its worker's killed calls are what :func:`kbv.pipeline.reference_worker._left_over_after_calls` reads).
TIMEOUT_S = 60.0


#: what Triton's autotuner names the choices it keeps on disk (``triton.runtime.autotuner``).
AUTOTUNE_SUFFIX = ".autotune.json"


def autotune_files(build_dir: Path) -> dict[str, float]:
    """Each autotuning file under ``build_dir``'s Triton cache: path -> modification time (s)."""
    out = {}
    for f in (Path(build_dir) / "triton").rglob(f"*{AUTOTUNE_SUFFIX}"):
        try:
            out[str(f)] = f.stat().st_mtime
        except OSError:
            pass
    return out


def drop_new_autotune(build_dir: Path, before: dict[str, float]) -> list[str]:
    """Remove every autotuning file under ``build_dir``'s Triton cache that is not in ``before``
    (:func:`autotune_files` before the calls ahead) or changed since; returns their paths."""
    dropped = []
    for path, mtime in autotune_files(build_dir).items():
        if before.get(path) != mtime:
            with contextlib.suppress(OSError):
                os.unlink(path)
                dropped.append(path)
    return dropped


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


def decoy_inputs(rp: Any) -> list | None:
    """A draw of ``rp``'s problem at a decoy shape (module doc): every size constant of at least
    :data:`kbv.reference.shapes.MIN_SIZE` drawn as a secret shape's are, on ``rp``'s device; None
    when the problem has no such constant or does not draw at those sizes."""
    try:
        source = rp.source_text or Path(rp.ref.path).read_text(encoding="utf-8")
        constants = size_constants(source)
        patterns = size_patterns(constants)
        if not patterns:
            return None
        sizes = secret_sizes(constants, patterns[0], secrets.SystemRandom(), rp.shape_floors)
        module = import_problem(rp.ref, with_sizes(source, sizes))
        sys.modules.pop(module.__name__, None)  # one module per draw: not kept
        return inp.draw(module.get_inputs, inp.secret_seed(), rp.device)
    except Exception:  # noqa: BLE001 - then no decoy call
        return None


def first_call_ahead(worker: Any, rp: Any, config: Any, *, max_bytes: int = MAX_INPUT_BYTES,
                     timeout_s: float = TIMEOUT_S, decoy: bool = True) -> str:
    """Call ``worker``'s loaded ``ModelNew`` once on a fresh draw of ``rp``'s inputs (a
    :class:`~kbv.reference.build.ReferenceProblem`, on its device, in ``config.precision``), then,
    with ``decoy``, once at a decoy shape (:func:`decoy_inputs`); drop the outputs. Returns the
    first call's ``"ok"``, ``"skipped: ..."`` (inputs over ``max_bytes`` or not drawable on the
    meta device) or failure's one line, with ``"; decoy: "`` and the second's; never raises."""
    nbytes = _input_bytes(rp.module.get_inputs)
    if nbytes is None or nbytes > max_bytes:
        return f"skipped: inputs of {nbytes} bytes" if nbytes is not None else "skipped: no meta draw"
    first = _call(worker, lambda: inp.draw(rp.module.get_inputs, inp.secret_seed(), rp.device), rp, config, timeout_s)
    if first != "ok" or not decoy:
        return first
    return f"{first}; decoy: {_call(worker, lambda: decoy_inputs(rp), rp, config, timeout_s)}"


def _call(worker: Any, draw, rp: Any, config: Any, timeout_s: float) -> str:
    """One unjudged forward of ``worker`` on ``draw()``'s inputs (``"ok"``, ``"skipped: ..."`` or the failure)."""
    try:
        drawn = draw()
        if drawn is None:
            return "skipped: no draw"
        args = inp.to_device(drawn, rp.device, config.precision)
        del drawn
        worker.send(protocol.Forward(tuple(inp.shared_clone(args)), probes=False), phase="first call ahead")
        del args
        reply = worker.receive(phase="first call ahead", timeout=min(timeout_s, config.call_timeout_s))
    except Exception as exc:  # noqa: BLE001 - the job's own first call meets it
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if isinstance(reply, protocol.Outputs):
        del reply  # unread: the worker is closed next
        return "ok"
    return f"{getattr(reply, 'error_type', type(reply).__name__)}: {str(getattr(reply, 'message', ''))[:200]}"


__all__ = ["compiles_at_first_call", "first_call_ahead", "decoy_inputs", "autotune_files", "drop_new_autotune", "FIRST_CALL_BACKENDS", "MAX_INPUT_BYTES", "TIMEOUT_S"]
