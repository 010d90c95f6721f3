"""kbv.processes.gpushare: who else uses the GPU, from NVML or, without it, from /proc."""

from __future__ import annotations

import os
import sys

from kbv.processes import gpushare


def test_without_nvml_other_gpu_users_of_this_namespace_are_counted(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    me = os.getpid()
    monkeypatch.setattr(gpushare, "_proc_pids", lambda: [1, me, 4242, 4243])
    monkeypatch.setattr(gpushare, "_uses_gpu", lambda pid: pid in (me, 4242))
    share = gpushare.read(0)
    assert share.others == 1 and not share.available  # 4242; this process is kbv's own
    assert share.evidence()["source"] == "proc"


def test_without_nvml_and_without_other_users_the_gpu_reads_as_exclusive(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpushare, "_proc_pids", lambda: [os.getpid(), 7])
    monkeypatch.setattr(gpushare, "_uses_gpu", lambda pid: pid == os.getpid())
    assert gpushare.read(0).others == 0


def test_a_refusing_nvml_falls_back_to_proc(monkeypatch):
    class Refusing:
        class NVMLError(Exception):
            pass

        @staticmethod
        def nvmlInit():
            raise RuntimeError("no permission")

    monkeypatch.setitem(sys.modules, "pynvml", Refusing)
    monkeypatch.setattr(gpushare, "_proc_pids", lambda: [99])
    monkeypatch.setattr(gpushare, "_uses_gpu", lambda pid: True)
    share = gpushare.read(0)
    assert share.others == 1 and share.source == "proc"


def test_the_orchestrators_other_processes_are_kbvs_own():
    """A batch's build pool and other lanes are children of the orchestrator, not of the reference
    worker: they are kbv's own, not other work (a batch alone on the H200 read 9-17 of them as a
    shared GPU). This test process plays the orchestrator; a child plays the reference worker."""
    import subprocess

    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    probe = ("from kbv.processes import gpushare; "
             "print(' '.join(map(str, sorted(gpushare._descendants(gpushare.kbv_root())))))")
    try:
        def ours(env):
            out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                 check=True, timeout=60).stdout.split()
            return {int(x) for x in out}

        env = {k: v for k, v in os.environ.items() if k != gpushare.ORCHESTRATOR_ENV}
        assert sibling.pid not in ours(env)  # without the orchestrator named: only its own tree
        assert sibling.pid in ours({**env, gpushare.ORCHESTRATOR_ENV: str(os.getpid())})
    finally:
        sibling.kill()
        sibling.wait()


def test_an_orchestrator_pid_that_is_not_an_ancestor_is_ignored(monkeypatch):
    monkeypatch.setenv(gpushare.ORCHESTRATOR_ENV, "1" if os.getpid() != 1 else "2")
    monkeypatch.setattr(gpushare, "_parent", lambda pid: None)  # no ancestor chain
    assert gpushare.kbv_root() == os.getpid()
    monkeypatch.setenv(gpushare.ORCHESTRATOR_ENV, "not-a-pid")
    assert gpushare.kbv_root() == os.getpid()


def test_a_real_ancestor_is_found_through_proc():
    """The parent chain read from /proc/PID/stat reaches this process's parent."""
    env = {**os.environ, gpushare.ORCHESTRATOR_ENV: str(os.getpid())}
    import subprocess

    out = subprocess.run([sys.executable, "-c", "from kbv.processes import gpushare; print(gpushare.kbv_root())"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(os.getpid())


def test_children_started_from_a_thread_are_kbvs_own():
    """/proc lists a child under the thread that forked it: the batch's lanes start their workers
    from threads of the orchestrator, and a tree read through the main thread alone left them out
    (a batch alone on the H100 read 10-19 "other processes", 2026-12-05). Both the sibling and the
    probe are started here from a thread that stays alive."""
    import subprocess
    import threading

    started: dict = {}
    done = threading.Event()

    def lane():
        started["sibling"] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        started["probe"] = subprocess.run(
            [sys.executable, "-c", "from kbv.processes import gpushare; "
             "print(' '.join(map(str, sorted(gpushare._descendants(gpushare.kbv_root())))))"],
            env={**os.environ, gpushare.ORCHESTRATOR_ENV: str(os.getpid())}, capture_output=True, text=True,
            timeout=60).stdout
        done.wait(60)

    t = threading.Thread(target=lane)
    t.start()
    try:
        for _ in range(600):
            if "probe" in started:
                break
            threading.Event().wait(0.1)
        assert started["sibling"].pid in {int(x) for x in started["probe"].split()}
        assert started["sibling"].pid in gpushare._descendants(os.getpid())
    finally:
        done.set()
        t.join()
        started["sibling"].kill()
        started["sibling"].wait()
