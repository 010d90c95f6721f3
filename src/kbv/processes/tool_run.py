"""An external CUDA tool (compute-sanitizer, Nsight Compute) run over one forward in kbv's sandbox:
the trusted side's half (:mod:`kbv.sandbox.tool_target` is the target's).

The tool's host process is started here with the candidate worker's environment only (nothing of
kbv's own environment reaches it or its target: ``/proc/<pid>/environ`` keeps a process's first
environment) and no descriptor but 0-2; its report goes to a log file beside the target's spec,
outside the target's scratch and build directories (the only places the sandbox lets it write).
The target joins a :class:`kbv.processes.jail.ProcessJail` of its own, as a candidate worker does,
and everything it started is killed when the run ends; the tool's process group too. A run that
takes longer than ``timeout_s`` is killed: ``timed_out`` says so.

Its uid: its own (as root, :func:`kbv.sandbox.limits.choose_uid`) on cuda too, where a candidate
worker keeps kbv's for CUDA IPC: the target takes its inputs from a file, so it needs no IPC, and
then cannot signal the tool's host process (which would leave no report) or kbv's processes.
``own_uid=False`` runs it at kbv's uid (:func:`kbv.pipeline.diagnostics` retries so when a tool
left no report under a uid of the target's own).

Its namespaces (root on Linux, util-linux's ``setpriv`` and ``unshare``, :func:`namespace_wrapper`):
the tool and its target share new network, System V IPC, mount and PID namespaces made here. The
target cannot make network and IPC namespaces of its own as a candidate worker does: the tools reach
their target through abstract unix sockets, which are per network namespace (on the H200 of
2026-12-05 compute-sanitizer said "No attachable process found" and ncu waited until killed). In the
shared empty network namespace the target still reaches nothing of the host's (no kbv serve on
loopback). The PID namespace is the tool's lifetime: the wrapper dies with the process that started
it (``PR_SET_PDEATHSIG``), its child (the tool, the namespace's init) with it, and the kernel then
kills everything in the namespace (ncu's launcher and the target, which leave the tool's process
group) even when kbv was killed with no chance to clean up.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from kbv.processes import scratch
from kbv.processes.handles import tell_sentinel
from kbv.processes.jail import ProcessJail
from kbv.sandbox.confinement import WorkerSetup
from kbv.sandbox.worker_env import worker_environment
from kbv.sandbox.limits import max_tasks, shm_quota_bytes, tmp_quota_bytes
from kbv.sandbox.tool_target import RAISED_EXIT, ToolSpec

#: the tool's log file in the run's directory (``{log}`` in a command is replaced by its path).
LOG_NAME = "tool.log"
#: bytes of the tool's report and of the target's output kept (the rest is cut).
MAX_LOG_BYTES = 1 << 20


@dataclass(frozen=True)
class ToolRunResult:
    """How the run ended: the tool's exit code (None when killed at the time limit), the target's
    exit code when the tool passes it on, the tool's report, the target's own output (its last
    :data:`MAX_LOG_BYTES`), seconds, and whether the time limit ended it."""

    returncode: int | None
    report: str
    target_output: str
    seconds: float
    timed_out: bool
    own_uid: bool = False  #: the target ran at a uid of its own (root only; else kbv's)

    @property
    def target_raised(self) -> bool:
        """The target's own code raised (its exit code, as the tools pass it on)."""
        return self.returncode == RAISED_EXIT


def namespace_wrapper() -> list[str]:
    """The command prefix that runs the tool in the namespaces of the module doc: empty (the host's
    namespaces, the tool's process group killed by kbv only) when this process is not root or
    ``setpriv``/``unshare`` are missing."""
    setpriv, unshare = shutil.which("setpriv"), shutil.which("unshare")
    if sys.platform != "linux" or os.geteuid() != 0 or not setpriv or not unshare:
        return []
    return [setpriv, "--pdeathsig", "KILL", "--", unshare, "--fork", "--pid", "--mount-proc", "--net", "--ipc",
            "--kill-child=SIGKILL", "--"]


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _wait_gone(namespace: str, timeout_s: float = 10.0) -> bool:
    """Wait until no process is left in PID namespace ``namespace`` (a ``pid:[inode]`` link): its
    init's death has the kernel kill the rest, but not before the wrapper's wait returns (a
    process the target started was still alive when a run returned, full suite 2026-12-05).
    True when none is left within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_link(f"/proc/{p}/ns/pid") == namespace for p in os.listdir("/proc") if p.isdigit()):
            return True
        time.sleep(0.01)
    return False


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - MAX_LOG_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_tool(command: Sequence[str], *, device: str, build_dir: Path, module_path: str, module_name: str,
             class_name: str, init_args: Sequence[Any], init_seed: int, precision: str, inputs: Sequence[Any],
             calls: int, timeout_s: float, extra_env: dict[str, str] | None = None,
             own_uid: bool = True) -> ToolRunResult:
    """Run ``command`` (the tool and its options; ``{log}`` stands for its log file) over
    ``python3 -m kbv.sandbox.tool_target SPEC``: ``class_name`` of ``module_path`` built from
    ``init_args`` and called ``calls`` times on ``inputs`` (CPU tensors and plain values).
    ``extra_env``: variables added to the target's environment (the tool's settings).

    Raises:
        OSError: the tool could not be started (not installed: FileNotFoundError).
    """
    import torch

    base = Path(tempfile.mkdtemp(prefix=f"{scratch.WORKDIR_PREFIX}{os.getpid()}-tool-"))
    work = base / scratch.SCRATCH_NAME
    work.mkdir()
    note = scratch.mount_scratch(str(work), tmp_quota_bytes())
    jail = ProcessJail(own_uid=own_uid)
    # the host's /dev/shm is the target's on cuda (not a private one): what it leaves there is removed
    shm_before = scratch.shm_entries() if device != "cpu" or os.geteuid() != 0 else None
    proc = None
    t0 = time.perf_counter()
    timed_out = False
    try:
        # the target's output in its own scratch tmpfs: bounded by that mount's quota, off the host's disk
        wrapper = namespace_wrapper()
        setup = WorkerSetup(workdir=str(work), build_dir=str(build_dir), log_path=str(work / "target.log"),
                            device=device, cgroup=jail.cgroup, uid=jail.uid, shm_bytes=shm_quota_bytes(),
                            max_tasks=max_tasks(), parent_notes=(*jail.notes, note),
                            namespaces_from_parent=bool(wrapper))
        env = worker_environment(setup)
        src = str(Path(__file__).resolve().parents[2])  # the directory that holds the kbv package
        env["PYTHONPATH"] = src
        env.update(extra_env or {})
        inputs_path = base / "inputs.pt"
        torch.save([a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in inputs], inputs_path)
        spec = ToolSpec(setup, module_path, module_name, class_name, tuple(init_args), init_seed, precision,
                        str(inputs_path), calls, dict(env))
        spec_path = base / "spec.pkl"
        spec_path.write_bytes(pickle.dumps(spec))
        os.chmod(base, 0o755)  # the target reads its spec and inputs (a worker of its own uid on cpu)
        for p in (spec_path, inputs_path):
            os.chmod(p, 0o644)
        log = base / LOG_NAME
        argv = wrapper + [a.replace("{log}", str(log)) for a in command] + [sys.executable, "-m", "kbv.sandbox.tool_target",
                                                                  str(spec_path)]
        with open(base / "tool.out", "wb") as out:
            proc = subprocess.Popen(argv, env=env, cwd=str(work), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, close_fds=True, start_new_session=True)
        jail.watch()
        tell_sentinel(proc.pid)
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode, timed_out = None, True
        report = _tail(log) or _tail(base / "tool.out")
        target = _tail(work / "target.log")
        return ToolRunResult(returncode, report, target, time.perf_counter() - t0, timed_out, jail.uid is not None)
    finally:
        namespace = None
        if proc is not None:
            if proc.poll() is None:  # the run's PID namespace, while its wrapper lives
                namespace = _link(f"/proc/{proc.pid}/ns/pid_for_children")
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            tell_sentinel(-proc.pid)
        jail.kill()
        if namespace is not None:
            _wait_gone(namespace)
        scratch.release_scratch(str(work))
        shutil.rmtree(base, ignore_errors=True)
        if jail.uid is not None or shm_before is not None:  # by its uid, else what appeared
            scratch.sweep_shm(shm_before or {}, jail.uid)


__all__ = ["ToolRunResult", "run_tool", "namespace_wrapper", "LOG_NAME"]
