"""The shared objects a candidate built, and the symbols they import (trusted side).

Read by the reference worker after the candidate worker loaded the candidate: every ELF shared
object under the candidate's content-hash build directory and its worker's working directory
(where ``load_inline`` / ``load`` and Triton put what they compile), and the demangled names of
their undefined dynamic symbols, through binutils' ``nm -D --undefined-only -C`` (binutils comes
with the compiler that built the extension). Nothing of the candidate's runs here: the files are
read as data. What the imports mean is decided by :mod:`kbv.checks.native`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable

#: the first bytes of every ELF file.
ELF_MAGIC = b"\x7fELF"
#: at most this many shared objects are read per candidate, in path order (a build directory
#: holds one per extension, Triton a launcher per kernel: tens at most; kbv choice).
MAX_OBJECTS = 64
#: seconds one ``nm`` may take (a 50 MB CUDA extension reads in well under a second).
NM_TIMEOUT_S = 30


class ElfError(Exception):
    """The imports could not be read (no ``nm``, a file it refuses): kbv's failure, not the candidate's."""


def shared_objects(roots: Iterable[str | os.PathLike]) -> list[Path]:
    """ELF files named ``*.so`` (or ``*.so.<n>``) under ``roots`` (missing roots skipped; links
    not followed), sorted, at most :data:`MAX_OBJECTS`."""
    found: set[Path] = set()
    for root in roots:
        if not os.path.isdir(root):
            continue
        for dirpath, _, files in os.walk(root):
            for name in files:
                if not (name.endswith(".so") or ".so." in name):
                    continue
                path = Path(dirpath) / name
                try:
                    if path.is_symlink() or not path.is_file():
                        continue
                    with open(path, "rb") as f:
                        if f.read(4) != ELF_MAGIC:
                            continue
                except OSError:
                    continue
                found.add(path)
    return sorted(found)[:MAX_OBJECTS]


def undefined_symbols(path: str | os.PathLike) -> list[str]:
    """Demangled names of the undefined dynamic symbols of the ELF file at ``path``
    (``"at::cpu::mm(at::Tensor const&, at::Tensor const&)"``), as ``nm -D --undefined-only -C``
    prints them, without versions (``@GLIBC_2.2.5``).

    Raises:
        ElfError: ``nm`` is not on ``PATH``, fails on the file or takes over :data:`NM_TIMEOUT_S`.
    """
    nm = shutil.which("nm")
    if nm is None:
        raise ElfError("binutils' nm is not on PATH: cannot read the extension's imports")
    try:
        out = subprocess.run([nm, "-D", "--undefined-only", "-C", os.fspath(path)], capture_output=True,
                             text=True, errors="replace", timeout=NM_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ElfError(f"{path}: nm failed: {type(exc).__name__}") from None
    if out.returncode != 0:
        why = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        raise ElfError(f"{path}: nm failed: {why}")
    names = []
    for line in out.stdout.splitlines():
        kind, _, name = line.strip().partition(" ")
        if kind in ("U", "w", "v") and name:
            names.append(name.split("@", 1)[0].strip())
    return names
