"""Containment of the candidate (taxonomy 26, issue 19 class 5/6): its own uid, its task limit,
its quotas, the clean-up after its verdict, and who is charged when the reference worker dies.

Pure parts first (no worker): :mod:`kbv.sandbox.limits`, :mod:`kbv.processes.scratch`,
:mod:`kbv.processes.custody`, :func:`kbv.processes.jail.limit_cgroup`. The tests that start
workers are marked (the red-team rows of tests/e2e/test_redteam.py run the attacks themselves).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import EXPLOITS, problem
from kbv.processes import custody, scratch
from kbv.processes.jail import limit_cgroup
from kbv.sandbox import limits

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="Linux isolation")
root_only = pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="needs root on Linux")


# kbv.sandbox.limits -----------------------------------------------------------------------------

def test_uid_map_is_read_by_its_columns():
    assert limits.parse_uid_map("         0          0 4294967295\n") == [(0, 4294967295)]
    assert limits.parse_uid_map("0 100000 65536\n1 2\n") == [(0, 65536)]
    assert limits.parse_uid_map("") == []


def test_uid_is_far_from_users_below_2_31_and_differs_by_seed():
    full = [(0, 4294967295)]
    a, b = limits.pick_uid(full, seed=(1234 << 8) | 1), limits.pick_uid(full, seed=(1234 << 8) | 2)
    assert a != b and all(1 << 30 <= u < (1 << 31) - 1 for u in (a, b))
    # a container mapping 65536 ids: the upper half, never a listed user
    small = limits.pick_uid([(0, 65536)], seed=65534 - 32768, taken=frozenset({65534}))
    assert 32768 <= small < 65536 and small != 65534
    # a range that starts above the floor
    assert 1 << 30 < limits.pick_uid([((1 << 30) + 10, 1000)], seed=3) < (1 << 30) + 1010
    assert limits.pick_uid([], seed=1) is None and limits.pick_uid([(0, 2)], seed=1) is None


def test_uid_skips_taken_ids():
    low = 1 << 30
    assert limits.pick_uid([(0, 1 << 32)], seed=0, taken=frozenset({low, low + 1})) == low + 2


def test_quota_settings_are_positive_integers(monkeypatch):
    monkeypatch.setenv("KBV_CANDIDATE_SHM_BYTES", "4096")
    assert limits.shm_quota_bytes() == 4096
    monkeypatch.setenv("KBV_CANDIDATE_MAX_TASKS", "0")
    with pytest.raises(ValueError, match="KBV_CANDIDATE_MAX_TASKS='0': not a positive integer"):
        limits.max_tasks()
    monkeypatch.delenv("KBV_CANDIDATE_MAX_TASKS")
    assert limits.max_tasks() == limits.MAX_TASKS
    monkeypatch.delenv("KBV_CANDIDATE_TMP_BYTES", raising=False)
    assert limits.tmp_quota_bytes() > 0


def test_passwd_uids(tmp_path):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\nbroken\n")
    assert limits.passwd_uids(str(f)) == frozenset({0, 65534})
    assert limits.passwd_uids(str(tmp_path / "none")) == frozenset()


@linux_only
def test_task_limit_is_noted_where_it_does_not_bind():
    """Root without a uid of its own: RLIMIT_NPROC does not bind root, so nothing is set and the
    note says so; the user's task count (the base of the limit without root) counts this process."""
    if os.geteuid() == 0:
        assert limits.limit_tasks(64, switched=False).startswith("processes: no task limit of its own")
    assert limits.user_tasks(os.getuid()) >= threading.active_count()


def test_ipc_note_names_what_cuda_keeps():
    assert limits.isolate_ipc("cuda").startswith("System V IPC: the host's (cuda")


# kbv.processes.scratch --------------------------------------------------------------------------

def test_leftovers_are_new_entries_nobody_holds():
    before = {"kept": 1, "replaced": 2}
    after = {"kept": 1, "replaced": 3, "new": 4, "new-open": 5, "torch_1_2": 6}
    assert scratch.leftovers(before, after, frozenset({"new-open"})) == ["new", "replaced", "torch_1_2"]
    assert scratch.leftovers(after, after, frozenset()) == []


@linux_only
def test_sweep_removes_what_appeared_and_keeps_what_is_open(tmp_path):
    d = tmp_path / "shm"
    d.mkdir()
    (d / "old").write_bytes(b"x")
    before = scratch.shm_entries(str(d))
    (d / "left").write_bytes(b"x" * 10)
    (d / "dir").mkdir()
    with open(d / "open", "wb") as held:
        held.write(b"x")
        assert scratch.sweep_shm(before, directory=str(d)) == ["dir", "left"]
    assert sorted(os.listdir(d)) == ["old", "open"]
    assert scratch.sweep_shm(scratch.shm_entries(str(d)), directory=str(d)) == []


@root_only
def test_sweep_by_uid_removes_what_that_uid_owns(tmp_path):
    d = tmp_path / "shm"
    d.mkdir()
    for name in ("mine", "theirs"):
        (d / name).write_bytes(b"x")
    os.chown(d / "mine", 1 << 30, 0)
    assert scratch.sweep_shm({}, uid=1 << 30, directory=str(d)) == ["mine"]
    assert os.listdir(d) == ["theirs"]


def test_sysv_objects_by_creator_or_owner(tmp_path):
    (tmp_path / "shm").write_text(
        "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n"
        "         0         7   600                  4096   10    10      0  1234     0  1234     0          0          0          0                     0                     0\n"
        "         0         8   600                  4096   10    10      0     0     0     0     0          0          0          0                     0                     0\n")
    (tmp_path / "sem").write_text(
        "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n"
        "         0          3   600          1     0     0  1234     0          0          0\n")
    assert scratch.sysv_objects(1234, str(tmp_path)) == [("shm", 7), ("sem", 3)]
    assert scratch.sysv_objects(99, str(tmp_path)) == []


@linux_only
def test_stale_scratch_of_a_dead_owner_is_released(tmp_path, monkeypatch):
    """A scratch tmpfs whose owner died (its pid in the workdir's name) is unmounted and removed; a
    live owner's is kept."""
    dead = tmp_path / f"{scratch.WORKDIR_PREFIX}999999999-x" / scratch.SCRATCH_NAME
    live = tmp_path / f"{scratch.WORKDIR_PREFIX}{os.getpid()}-y" / scratch.SCRATCH_NAME
    for d in (dead, live):
        d.mkdir(parents=True)
    released = []
    monkeypatch.setattr(scratch, "mounts", lambda: [(str(dead), [], "tmpfs"), (str(live), [], "tmpfs"),
                                                    (str(tmp_path), [], "ext4")])
    monkeypatch.setattr(scratch, "release_scratch", released.append)
    scratch.release_stale()
    assert released == [str(dead)] and not dead.parent.exists() and live.exists()


@root_only
def test_scratch_tmpfs_refuses_writes_past_its_size(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    note = scratch.mount_scratch(str(d), 1 << 20)
    if "tmpfs of" not in note:
        pytest.skip(note)
    try:
        with pytest.raises(OSError, match="No space left"):
            (d / "big").write_bytes(b"x" * (2 << 20))
    finally:
        scratch.release_scratch(str(d))
    assert not os.path.ismount(d) and not (d / "big").exists()


# kbv.processes.jail ----------------------------------------------------------------------------

def test_cgroup_limits_are_written_or_named_as_missing(tmp_path):
    cg = tmp_path / "kbv-1-1"
    cg.mkdir()
    (cg / "memory.max").write_text("max\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    notes = limit_cgroup(str(cg), 3 << 30, 512)
    assert (cg / "memory.max").read_text() == str(3 << 30)
    assert notes[0] == "cgroup memory.max: 3.0 GiB"
    assert notes[1].startswith("cgroup pids.max: none (the pids controller is not enabled")
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+pids"  # asked for it first


@linux_only
def test_a_jail_without_an_own_uid_has_none_to_kill_or_sweep_by():
    """Regression (H200, t26-shm-flood-cuda): a cuda worker keeps kbv's uid (CUDA IPC maps no
    buffer across uids), so its jail must have no uid either: with one, /dev/shm was swept by a uid
    that owned none of the worker's files, and they stayed."""
    from kbv.processes.jail import ProcessJail

    jail = ProcessJail(cgroup=False, own_uid=False)
    try:
        assert jail.uid is None
    finally:
        jail.kill()


# kbv.processes.custody -------------------------------------------------------------------------

def test_reference_death_is_charged_only_while_candidate_code_runs_and_memory_explains_nothing():
    assert custody.charged(candidate_running=1, oom_killed=False, low_memory=False)
    assert not custody.charged(candidate_running=0, oom_killed=False, low_memory=False)  # kbv's own code alone
    assert not custody.charged(candidate_running=1, oom_killed=True, low_memory=False)  # the kernel named kbv's memory
    assert not custody.charged(candidate_running=2, oom_killed=False, low_memory=True)
    # the OOM killer picked it because its oom_score_adj was raised during the job: not kbv's doing
    assert custody.charged(candidate_running=1, oom_killed=True, low_memory=True, oom_adj_raised=True)
    assert not custody.charged(candidate_running=0, oom_killed=True, low_memory=False, oom_adj_raised=True)


def test_custody_counts_and_records_the_phase():
    import multiprocessing

    cell = custody.Cell.create(multiprocessing.get_context("spawn"))
    custody.install(cell)
    try:
        custody.running(+1)
        custody.phase("forward" * 20)
        custody.running(+1)
        custody.running(-1)
        assert cell.read() == (1, ("forward" * 20)[:custody.PHASE_BYTES - 1])
        custody.running(-1)
        custody.running(-1)  # never below zero
        assert cell.read()[0] == 0
    finally:
        custody.install(None)


SLOW_WRONG = '''
import time
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(0.5)
        return x.clone()
'''


@linux_only
@pytest.mark.e2e
def test_reference_worker_killed_while_candidate_code_runs_charges_the_candidate(tmp_path):
    """Whoever sends it (here the test: as if the candidate could), a SIGKILL of the reference
    worker while the candidate's code runs ends as CRASH with a WARNING naming entry 26, never
    EVAL_ERROR; the evaluator then works again."""
    import signal

    from kbv.batch.evaluator import Evaluator
    from kbv.intake.candidates import load_candidate
    from kbv.model.records import EvalConfig, Status

    cand = tmp_path / "slow_wrong.py"
    cand.write_text(SLOW_WRONG)
    config = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=60)
    with Evaluator("cpu") as ev:
        ref = ev._worker()
        out = {}
        t = threading.Thread(target=lambda: out.update(v=ev.evaluate(problem("level1/1_Small_ReLU.py"),
                                                                      load_candidate(cand), config)))
        t.start()
        deadline = time.monotonic() + 120
        while ref.custody.read()[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(ref.proc.pid, signal.SIGKILL)
        t.join(timeout=120)
        v = out["v"]
        assert v.status is Status.CRASH and "charged to the candidate" in v.message, v.message
        assert 26 in v.taxonomy and v.findings[0].check == "sandbox:reference-killed"
        assert v.evidence["phase"] == "reference worker"
        again = ev.evaluate(problem("level1/1_Small_ReLU.py"), load_candidate(cand), config)
        assert again.status is Status.INCORRECT, again.message


@root_only
def test_candidate_runs_as_its_own_uid_with_bounded_tmpfs(tmp_path, cpu_evaluator, fast_config):
    """As root: the worker's uid is its own, its ``kill(parent, 0)`` is refused, kbv's processes are
    not in its /proc (hidepid=2), its /dev/shm and cwd are tmpfs of bounded size, RLIMIT_NPROC is
    set; the right ReLU only if all hold."""
    from kbv.intake.candidates import load_candidate
    from kbv.model.records import Status

    cand = tmp_path / "ids.py"
    cand.write_text('''
import ctypes, os, resource
import torch.nn as nn

def _size(path):
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize

def _contained():
    uid = os.getresuid()
    refused = ctypes.CDLL(None, use_errno=True).kill(os.getppid(), 0) != 0 and ctypes.get_errno() == 1
    hidden = not os.path.exists(f"/proc/{os.getppid()}") and os.path.exists(f"/proc/{os.getpid()}")
    return (uid[0] == uid[1] == uid[2] != 0 and refused and hidden and resource.getrlimit(resource.RLIMIT_NPROC)[0] > 0
            and abs(_size("/dev/shm") - %d) < 8192 and abs(_size(os.getcwd()) - %d) < 8192)

class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0) if _contained() else x.clone()
''' % (limits.shm_quota_bytes(), limits.tmp_quota_bytes()))
    v = cpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), load_candidate(cand), fast_config)
    notes = v.evidence["sandbox"]
    assert v.status is not Status.INCORRECT, (v.message, notes)
    assert any(n.startswith("signals: own uid") for n in notes), notes
    assert any(n.startswith("/dev/shm: private tmpfs") for n in notes), notes
    assert any(n.startswith("scratch: tmpfs of") for n in notes), notes


@linux_only
@pytest.mark.e2e
def test_kill_of_the_reference_worker_without_an_own_uid_is_the_candidates_crash(tmp_path):
    """Where the candidate shares kbv's uid (not root, or ``KBV_CANDIDATE_UID=off`` as here), the
    red-team ctypes kill of the reference worker succeeds: the verdict is CRASH, the candidate's,
    with a WARNING naming entry 26, never EVAL_ERROR."""
    from kbv.batch.evaluator import Evaluator
    from kbv.intake.candidates import load_candidate
    from kbv.model.records import EvalConfig, Status

    config = EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=60)
    saved = os.environ.get("KBV_CANDIDATE_UID")
    os.environ["KBV_CANDIDATE_UID"] = "off"
    try:
        with Evaluator("cpu") as ev:
            v = ev.evaluate(problem("level1/1_Small_ReLU.py"),
                            load_candidate(EXPLOITS / "t26_kill_parent_ctypes.py"), config)
    finally:
        if saved is None:
            os.environ.pop("KBV_CANDIDATE_UID")
        else:
            os.environ["KBV_CANDIDATE_UID"] = saved
    assert v.status is Status.CRASH and "charged to the candidate" in v.message, (v.message, v.evidence.get("sandbox"))
    assert 26 in v.taxonomy and v.evidence["candidate_phase"]


def test_a_jail_kills_nothing_that_ran_before_it_existed():
    """Regression (a fresh clone's suite, 177 failures): a jail that was never given a worker to
    watch killed every child of its process on ``kill()``, the session's reference worker among them."""
    import subprocess
    import sys

    from kbv.processes.jail import ProcessJail

    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        jail = ProcessJail(cgroup=False, own_uid=False)
        jail.kill(timeout=1.0)
        assert before.poll() is None  # still running
    finally:
        before.kill()
        before.wait()
