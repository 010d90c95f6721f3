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
