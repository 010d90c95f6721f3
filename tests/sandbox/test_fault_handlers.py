"""kbv.sandbox.fault_handlers.FaultHandlerWatch: whose SIGSEGV/SIGBUS handlers a process runs, in a
fresh interpreter each (handlers are process-wide)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

SCRIPT = """
import faulthandler, signal, sys
sys.path.insert(0, {src!r})
from kbv.sandbox.fault_handlers import FaultHandlerWatch
w = FaultHandlerWatch()
seen = [w.faulthandler_only()]
faulthandler.enable()
seen.append(w.faulthandler_only())
faulthandler.disable()
seen.append(w.faulthandler_only())
signal.signal(signal.SIGSEGV, lambda *a: None)  # a handler of the process's own
seen.append(w.faulthandler_only())
faulthandler.enable()
signal.signal(signal.SIGBUS, lambda *a: None)  # faulthandler's on SIGSEGV, another on SIGBUS
seen.append(w.faulthandler_only())
print(seen)
"""


def test_only_faulthandlers_own_handlers_on_both_signals_read_as_faulthandler():
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(src=str(SRC))], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[False, True, False, False, False]"


def test_a_process_that_had_faulthandler_on_at_start_has_no_reference():
    script = SCRIPT.format(src=str(SRC)).replace("w = FaultHandlerWatch()", "faulthandler.enable()\nw = FaultHandlerWatch()")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[False, False, False, False, False]"
