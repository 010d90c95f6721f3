"""kbv.processes.procfs.undumpable and what it must leave working in the process that calls it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_RESET_AFTER_UNDUMPABLE = r'''
import ctypes, os
from kbv.processes import footprint, procfs
if os.getuid() == 0:  # as a user's run: another uid, no capabilities, dumpable as a fresh process is
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
assert procfs.undumpable()
try:
    open("/proc/self/clear_refs", "w").close()
    reopen = "ok"
except OSError as exc:
    reopen = type(exc).__name__
b = bytearray(b"\x01") * (256 << 20)
del b
before = footprint.host_peak_bytes()
footprint.reset_host_peak()
print(reopen, before, footprint.host_peak_bytes())
'''


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc only")
def test_host_peak_resets_in_an_undumpable_process_of_a_non_root_user():
    """Regression: once undumpable, a process's /proc files belong to root, and a non-root
    reference worker could no longer open its clear_refs: every job's reference host peak was the
    worker's lifetime peak. The descriptor is opened before and kept."""
    out = subprocess.run([sys.executable, "-c", _RESET_AFTER_UNDUMPABLE], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr[-3000:]
    reopen, before, after = out.stdout.split()
    assert reopen == "PermissionError"  # what made the kept descriptor needed
    assert int(after) < int(before) - (128 << 20), out.stdout


def test_workers_get_no_expandable_segments():
    """Undumpable workers cannot take each other's file descriptors (pidfd_getfd needs ptrace
    access), which is how torch shares a tensor of an expandable segment: the setting is dropped
    from both workers' allocator configuration, the rest of it kept."""
    from kbv.sandbox.confinement import WorkerSetup
    from kbv.sandbox.worker_env import shared_worker_env, worker_environment

    user = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:512",
            "PYTORCH_ALLOC_CONF": " expandable_segments : True ", "PATH": "/usr/bin"}
    env = shared_worker_env(user)
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:512" and env["PYTORCH_ALLOC_CONF"] == ""
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "PYTORCH_CUDA_ALLOC_CONF" not in shared_worker_env({"PATH": "/usr/bin"})
    setup = WorkerSetup(workdir="/tmp/w", build_dir="/tmp/b", log_path="/tmp/w/log", device="cpu")
    cand = worker_environment(setup, user)
    assert cand["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:512" and cand["PYTORCH_ALLOC_CONF"] == ""


def _send_alloc_conf(conn, device):
    conn.send_bytes(os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "(unset)").encode())


@pytest.mark.e2e
def test_reference_worker_gets_no_expandable_segments(monkeypatch):
    from kbv.processes.reference import ReferenceProcess

    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,garbage_collection_threshold:0.6")
    proc = ReferenceProcess("cpu", _send_alloc_conf)
    try:
        assert proc.conn.poll(60)
        assert proc.conn.recv_bytes().decode() == "garbage_collection_threshold:0.6"
    finally:
        proc.close(abort=True)
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"].startswith("expandable_segments")  # the parent's own is kept


def test_elf_files_lists_a_hard_linked_object_once(tmp_path):
    """An object hard-linked under many names is read once (the read has a budget per candidate)."""
    import os
    import shutil
    import sys

    from kbv.processes import elf

    exe = os.path.realpath(sys.executable)
    first = tmp_path / "a.so"
    shutil.copyfile(exe, first)
    for k in range(5):
        os.link(first, tmp_path / f"link{k}.so")
    assert elf.elf_files([tmp_path]) == [first]
