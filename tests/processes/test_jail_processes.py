"""kbv.processes.jail.uid_processes: which processes of a uid a jail's kill still waits for."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

#: a process whose main thread exits (pthread_exit) while a second thread keeps running: /proc reads
#: its state as Z though it runs
_HALF_DEAD = r"""
import ctypes, threading, time
threading.Thread(target=lambda: time.sleep(60), daemon=False).start()
print("ready", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_process_whose_main_thread_exited_while_another_runs_counts_as_live():
    """Regression (red-team helper, 2026-12-06): ``live`` left out every Z state, and a process whose
    main thread had called pthread_exit reads Z with its other thread running."""
    from kbv.processes.jail import uid_processes

    p = subprocess.Popen([sys.executable, "-c", _HALF_DEAD], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until its main thread is gone
            with open(f"/proc/{p.pid}/status") as f:
                state = next(ln for ln in f if ln.startswith("State:")).split()[1]
            if state == "Z":
                break
            time.sleep(0.01)
        assert state == "Z"
        assert p.pid in uid_processes(os.getuid(), live=True)
    finally:
        p.kill()
        p.wait()
    assert p.pid not in uid_processes(os.getuid(), live=True)
