"""The process an external CUDA tool (compute-sanitizer, Nsight Compute) runs: the candidate's, or the
reference's, forward on one input set, inside kbv's sandbox (untrusted side).

    <tool> [tool options] python3 -m kbv.sandbox.tool_target SPEC

``SPEC`` is a pickle of :class:`ToolSpec` written by the trusted side (:mod:`kbv.processes.tool_run`)
outside anything this process can write. Before any candidate code runs this process keeps what the
tool added to its environment (its injection library and settings, which the CUDA driver reads when
the context starts), applies :func:`kbv.sandbox.confinement.apply_sandbox` (the candidate worker's
sandbox: session, cgroup, rlimits, read-only filesystem, dropped privileges). Its descriptors above 2
are the tool's own channel (the trusted side starts the tool with none of its own but 0-2) and stay
open. It then imports the module, builds the model with the problem's init
inputs under the init seed and the eager-fp32 flags, loads the input set, makes ``calls`` forward
calls (on cuda the last inside the NVTX range :data:`PROFILED_RANGE`), synchronises and exits 0 (3 when the module or the call raised, the traceback on stderr).
Nothing comes back to kbv from this process but its exit code and output: what the tool reports
is written by the tool's own host process.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from dataclasses import dataclass

#: exit code when the module, the constructor or a forward call raised.
RAISED_EXIT = 3
#: the NVTX range round the last forward call on cuda (what ``ncu --nvtx-include`` profiles).
PROFILED_RANGE = "kbv-profiled"


@dataclass(frozen=True)
class ToolSpec:
    """What the tool's target runs. ``module_path``: the candidate's file (``class_name`` ``ModelNew``)
    or the problem's (``Model``); ``inputs_path``: a ``torch.save`` of the input set's CPU tensors;
    ``env_before``: the environment the trusted side started the tool with (what the tool added is
    kept through the sandbox's reset)."""

    setup: object  #: :class:`kbv.sandbox.confinement.WorkerSetup`
    module_path: str
    module_name: str
    class_name: str
    init_args: tuple
    init_seed: int
    precision: str
    inputs_path: str
    calls: int
    env_before: dict


def _tool_environment(before: dict) -> dict[str, str]:
    """The variables the tool set or changed when it started this process."""
    return {k: v for k, v in os.environ.items() if before.get(k) != v}


def run(spec: ToolSpec) -> int:
    """The target's whole life (module doc); its exit code."""
    from kbv.sandbox.confinement import apply_sandbox

    added = _tool_environment(spec.env_before)
    apply_sandbox(spec.setup)
    os.environ.update(added)
    import importlib.util

    import torch

    from kbv.sandbox import numeric_flags

    numeric_flags.apply_flags(numeric_flags.flags_for("eager-fp32"))
    try:
        device = torch.device("cuda", 0) if spec.setup.device == "cuda" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        loader = importlib.util.spec_from_file_location(spec.module_name, spec.module_path)
        if loader is None or loader.loader is None:
            raise ImportError(f"cannot import {spec.module_path}")
        module = importlib.util.module_from_spec(loader)
        sys.modules[spec.module_name] = module
        loader.loader.exec_module(module)
        torch.manual_seed(spec.init_seed)
        model = getattr(module, spec.class_name)(*spec.init_args).to(device)
        if spec.precision != "fp32":
            model = model.to({"bf16": torch.bfloat16, "fp16": torch.float16}[spec.precision])
        args = [a.to(device) if isinstance(a, torch.Tensor) else a
                for a in torch.load(spec.inputs_path, weights_only=True)]
        with torch.no_grad():
            for k in range(spec.calls):
                last = k == spec.calls - 1 and device.type == "cuda"
                if last:
                    torch.cuda.synchronize(device)
                    torch.cuda.nvtx.range_push(PROFILED_RANGE)
                model(*args)
                if last:
                    torch.cuda.nvtx.range_pop()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except BaseException:  # noqa: BLE001 - the candidate may raise anything
        traceback.print_exc()
        sys.stderr.flush()
        return RAISED_EXIT
    print("kbv-tool-target: done", flush=True)
    return 0


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], "rb") as f:
        spec = pickle.load(f)  # written by the trusted side (kbv.processes.tool_run), not the candidate
    code = run(spec)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
