"""kbv.processes.elf.Prefetched: the objects' symbols read in the background, used only for bytes
unchanged since."""

from __future__ import annotations

import shutil
import sys

import pytest

from kbv.processes import elf


def _object(tmp_path):
    nm = elf.reader()
    if nm is None or not sys.platform.startswith("linux"):
        pytest.skip("needs binutils' nm on Linux")
    path = tmp_path / "build" / "ext.so"
    path.parent.mkdir()
    shutil.copyfile(sys.executable, path)  # an ELF object of this machine
    return nm, path


def test_prefetched_symbols_are_nm_s_for_unchanged_bytes_and_read_again_after_a_write(tmp_path, monkeypatch):
    nm, path = _object(tmp_path)
    want = elf.symbols(path, nm)
    pre = elf.Prefetched([tmp_path / "build"], nm)
    pre.wait()
    reads: list = []
    real = elf.symbols
    monkeypatch.setattr(elf, "symbols", lambda p, n: reads.append(p) or real(p, n))
    assert pre.symbols(path, nm) == want and reads == []  # the background read, the same bytes
    with open(path, "r+b") as f:  # the candidate rewrites its object in place (size, times kept alike)
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    pre.symbols(path, nm)
    assert reads == [path]  # new bytes: read again
    other = tmp_path / "build" / "late.so"  # an object made after the prefetch
    shutil.copyfile(sys.executable, other)
    assert pre.symbols(other, nm) == want and reads == [path, other]
