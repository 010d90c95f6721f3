"""kbv.processes.procfs.undumpable and what it must leave working in the process that calls it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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
