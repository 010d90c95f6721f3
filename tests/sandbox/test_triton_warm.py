"""Triton's per-process start-up in a cuda candidate worker's start-up (kbv.sandbox.triton_warm)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kbv.sandbox.triton_warm import PARTS, start_triton

triton = pytest.importorskip("triton")


def test_every_part_is_reported_and_a_failing_one_does_not_raise(monkeypatch):
    import kbv.sandbox.triton_warm as tw

    def broken():
        raise OSError("no C compiler")

    monkeypatch.setattr(tw, "PARTS", (("triton_key", lambda: "k"), ("backend_hash", broken)))
    out = start_triton()
    assert isinstance(out["triton_key"], float)
    assert out["backend_hash"] == "OSError: no C compiler"


def test_the_parts_are_tritons_own_key_and_backend_hash():
    assert [name for name, _ in PARTS] == ["triton_key", "backend_hash"]


_NOTHING_FROM_THE_BUILD_DIR = r"""
import os, sys
build = sys.argv[1]
seen = []
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir", "ctypes.dlopen", "import", "os.exec", "subprocess.Popen"):
        if build in repr(args):
            seen.append((event, repr(args)[:200]))
sys.addaudithook(hook)
import torch, triton
from kbv.sandbox.triton_warm import start_triton
out = start_triton()
print(repr(out))
print("SEEN", seen)
"""


def _start_in_a_fresh_process(tmp_path) -> list[str]:
    import subprocess
    import sys

    build = tmp_path / "build"
    (build / "triton").mkdir(parents=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(build / "triton"), TRITON_HOME=str(build),
               PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    out = subprocess.run([sys.executable, "-c", _NOTHING_FROM_THE_BUILD_DIR, str(build)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_every_part_runs_and_reads_nothing_of_the_build_directory(tmp_path):
    lines = _start_in_a_fresh_process(tmp_path)
    parts = eval(lines[-2])  # noqa: S307 - this test's own child's repr of a dict of floats
    assert set(parts) == {"triton_key", "backend_hash"} and all(isinstance(v, float) for v in parts.values()), lines
    assert lines[-1] == "SEEN []"


def test_nothing_of_the_candidates_build_directory_is_read(tmp_path):
    """Regression (red-team helper, 2026-12-06): the start-up loaded Triton's driver utilities from
    ``TRITON_CACHE_DIR``, the candidate's build directory, where it can plant a library that then
    ran before the worker's snapshots of the harness. Only Triton's installed files are read (on a
    GPU host: the cuda row above)."""
    lines = _start_in_a_fresh_process(tmp_path)
    assert "triton_key" in lines[-2] and lines[-1] == "SEEN []", lines
