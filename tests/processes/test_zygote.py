"""kbv.processes.zygote and kbv.sandbox.forkserver: candidate workers forked from a preloaded
zygote are this process's children, sandboxed as spawned ones are, never hold the zygote's
socket, and a zygote that is gone or turned off leaves workers spawned as before."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import torch

from kbv.processes import zygote

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not zygote.enabled(), reason="needs Linux")]

CANDIDATE = '''
import json
import os
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        fds = {}
        for fd in os.listdir("/proc/self/fd"):
            try:
                fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                pass
        print("KBV_STATE " + json.dumps({"cwd": os.getcwd(), "home": os.environ.get("HOME"),
                                          "tmp": os.environ.get("TMPDIR"), "fds": fds, "ppid": os.getppid(),
                                          "uid": os.getuid(), "path0": sys.path[:1]}), flush=True)
        return x.clone()
'''


def _state(worker, deadline_s: float = 30.0) -> dict:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for line in worker.log_tail().splitlines():
            if line.startswith("KBV_STATE "):
                return json.loads(line[len("KBV_STATE "):])
        time.sleep(0.1)
    raise AssertionError(f"no state in the worker's log: {worker.log_tail()[-2000:]}")


def _run(tmp_path, name: str = "state"):
    from kbv.processes.candidate import CandidateProcess
    from kbv.reference.inputs import shared_clone
    from kbv.sandbox import protocol
    from kbv.sandbox.numeric_flags import flags_for

    cand = tmp_path / f"{name}.py"
    cand.write_text(CANDIDATE)
    (tmp_path / "build").mkdir(exist_ok=True)
    w = CandidateProcess(device="cpu", build_dir=tmp_path / "build")
    loaded = w.call(protocol.Load(str(cand), f"kbv_candidate_{name}", (), 42, "cpu", "fp32", flags_for("eager-fp32")),
                    phase="load", timeout=120)
    assert isinstance(loaded, protocol.Loaded), loaded
    out = w.call(protocol.Forward(tuple(shared_clone([torch.ones(8)])), buffers="fresh", probes=True),
                 phase="forward", timeout=120)
    assert isinstance(out, protocol.Outputs), out
    return w, _state(w)


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:"):
            out.add(link)
    return out


def test_a_forked_worker_is_a_sandboxed_child_of_this_process_without_the_zygotes_socket(tmp_path):
    w, state = _run(tmp_path)
    try:
        assert w.started_by == "zygote"
        assert isinstance(w.proc, zygote.AdoptedWorker)
        assert state["ppid"] == os.getpid()  # adopted: waited for, killed and reaped here
        assert state["cwd"] == w.setup.workdir and state["home"] == w.setup.workdir == state["tmp"]
        if os.geteuid() == 0 and w.setup.uid is not None:
            assert state["uid"] == w.setup.uid
        z = next(z for z in zygote._ZYGOTES.values() if z.alive())
        # the zygote's end of its request socket is nowhere in the worker
        theirs = _socket_inodes(z.proc.pid)
        assert theirs and not theirs & set(state["fds"].values())
    finally:
        w.close()
    assert w.proc.exitcode is not None and not w.proc.is_alive()


def test_a_killed_worker_reports_its_signal_and_a_killed_zygote_is_replaced(tmp_path):
    w, _ = _run(tmp_path, "first")
    z = next(z for z in zygote._ZYGOTES.values() if z.alive())
    os.kill(w.proc.pid, signal.SIGKILL)
    w.proc.join(10)
    assert w.proc.exitcode == -signal.SIGKILL
    w.close()
    os.kill(z.proc.pid, signal.SIGKILL)
    z.proc.join(10)
    w2, state = _run(tmp_path, "second")  # a new zygote, or a spawn: the worker works either way
    try:
        assert state["ppid"] == os.getpid()
    finally:
        w2.close()


def test_kbv_zygote_0_spawns(tmp_path, monkeypatch):
    monkeypatch.setenv("KBV_ZYGOTE", "0")
    w, state = _run(tmp_path, "spawned")
    try:
        assert w.started_by == "spawn" and not isinstance(w.proc, zygote.AdoptedWorker)
        assert state["ppid"] == os.getpid()
    finally:
        w.close()


def test_the_preload_starts_no_thread_and_cuda_and_a_thread_forbid_forking():
    """After :func:`preload` a fresh interpreter may fork (no Python thread, no CUDA); here, with
    threads of pytest's and one more, :func:`single_threaded` says why not."""
    import subprocess
    import sys
    import threading

    from kbv.sandbox import forkserver

    code = "from kbv.sandbox import forkserver as f; f.preload('cpu'); print(repr(f.single_threaded()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "''", out.stderr[-2000:]
    gate = threading.Event()
    t = threading.Thread(target=gate.wait)
    t.start()
    try:
        assert "Python threads" in forkserver.single_threaded()
    finally:
        gate.set()
        t.join()


def test_where_the_zygote_is_used(monkeypatch):
    """cpu and cuda by default (cuda confirmed on the H100, docs/gpu-runs.md 2026-12-05), neither
    with KBV_ZYGOTE=0."""
    monkeypatch.delenv("KBV_ZYGOTE", raising=False)
    assert zygote.enabled("cpu") and zygote.enabled("cuda")
    monkeypatch.setenv("KBV_ZYGOTE", "1")
    assert zygote.enabled("cpu") and zygote.enabled("cuda")
    monkeypatch.setenv("KBV_ZYGOTE", "0")
    assert not zygote.enabled("cpu") and not zygote.enabled("cuda")


def test_the_worker_knows_its_intermediate_parent_even_after_it_exited(monkeypatch):
    """The worker waits until its intermediate parent has exited; it must know that parent's pid
    from before the fork. Read after the fork, it was already the subreaper's when the
    intermediate child exited first, and the worker waited 60 s for a change that had happened:
    CRASH "worker died during load", 4 times in a full suite."""
    import select
    import socket
    import struct

    from kbv.sandbox import forkserver

    real_fork = os.fork

    def child_runs_late() -> int:
        pid = real_fork()
        if pid == 0:
            time.sleep(0.3)  # the intermediate child writes the pid and exits meanwhile
        return pid

    r, w = os.pipe()

    def fake_worker(setup, conn_fd, log_fd, middle):
        os.write(w, struct.pack("qq", middle, os.getppid()))
        os._exit(0)

    monkeypatch.setattr(forkserver, "_worker", fake_worker)
    monkeypatch.setattr(forkserver.os, "fork", child_runs_late)
    ours, theirs = socket.socketpair()
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        pid = forkserver._fork_worker(theirs, None, devnull, devnull)
        assert pid > 0
        assert select.select([r], [], [], 30)[0], "the worker wrote nothing"
        middle, parent_now = struct.unpack("qq", os.read(r, 16))
    finally:
        for fd in (r, w, devnull):
            os.close(fd)
        ours.close()
        theirs.close()
    assert middle != parent_now and middle != os.getpid()
    try:  # re-parented to this process when it is a subreaper: reaped here, not left a zombie
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def test_the_zygotes_folder_is_gone_once_it_is_ready(tmp_path):
    """Its HOME and TMPDIR serve its imports only: removed once it answers ready (a red-team helper
    found 137 of them left in /tmp)."""
    w, _ = _run(tmp_path, "tidy")
    try:
        z = next(z for z in zygote._ZYGOTES.values() if z.alive())
        assert not os.path.exists(z.home)
    finally:
        w.close()
