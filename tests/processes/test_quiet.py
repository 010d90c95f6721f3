"""Quiet timing (kbv.processes.quiet): build process trees stopped while a timing flag is up, and
continued after; stale flags ignored. Real processes, no kbv worker (a second or two)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kbv.processes.quiet import BuildPauser, TimingFlag, stop_trees, continue_all, timing_now

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")

#: a parent that starts a busy child and then waits (a build: ninja and its compiler).
TREE = ("import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "print(c.pid, flush=True)\n"
        "c.wait()\n")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0].decode()


def _wait_state(pid: int, states: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while (s := _state(pid)) not in states and time.monotonic() < deadline:
        time.sleep(0.01)
    return s


@pytest.fixture
def tree():
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    yield proc.pid, child
    continue_all([proc.pid, child])
    for pid in (child, proc.pid):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    proc.wait()


def test_stop_trees_stops_the_root_and_its_descendants(tree):
    root, child = tree
    stopped = stop_trees([root])
    assert set(stopped) == {root, child}
    assert _wait_state(child, "T") == "T" and _wait_state(root, "T") == "T"
    continue_all(stopped)
    assert _wait_state(child, "R") in "RS"


def test_builds_stop_while_a_flag_is_up_and_continue_after(tmp_path, tree):
    root, child = tree
    with BuildPauser(tmp_path / "q", lambda: [root]) as pauser:
        with TimingFlag(tmp_path / "q") as flag:
            assert flag.acknowledged is True  # the first timed call starts with the builds stopped
            assert _wait_state(child, "T") == "T"
            cpu0 = _cpu(child)
            time.sleep(0.3)
            assert _cpu(child) == cpu0  # not one tick while the flag is up
        assert _wait_state(child, "RS") in "RS"
        time.sleep(0.3)
        assert _cpu(child) > cpu0
        assert pauser.pauses == 1 and pauser.paused_s > 0.25
    assert not (tmp_path / "q" / "pool").exists()


def test_a_flag_without_a_pool_does_not_wait(tmp_path):
    (tmp_path / "q").mkdir()
    t0 = time.monotonic()
    with TimingFlag(tmp_path / "q") as flag:
        assert flag.acknowledged is None
        assert timing_now(tmp_path / "q")
    assert time.monotonic() - t0 < 0.2 and not timing_now(tmp_path / "q")
    with TimingFlag(None) as off:  # no directory: nothing at all
        assert off.acknowledged is None


def test_a_dead_owner_s_flag_is_stale(tmp_path):
    """A reference worker killed while timing leaves its flag: the builds must not stay stopped."""
    (tmp_path / "q").mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "q" / f"timing-{dead.pid}-1").write_text("0")
    assert not timing_now(tmp_path / "q")
    assert not (tmp_path / "q" / f"timing-{dead.pid}-1").exists()


def test_close_continues_what_a_flag_left_stopped(tmp_path, tree):
    root, child = tree
    pauser = BuildPauser(tmp_path / "q", lambda: [root])
    flag = TimingFlag(tmp_path / "q").__enter__()
    assert _wait_state(child, "T") == "T"
    pauser.close()  # the batch ends (or is interrupted) while a lane still times
    assert _wait_state(child, "RS") in "RS"
    flag.__exit__(None, None, None)


def _cpu(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
