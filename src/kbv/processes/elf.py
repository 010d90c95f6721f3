"""The native objects a candidate built, and the symbols they import (trusted side).

Read by the reference worker after the candidate worker loaded and ran the candidate: every ELF
file under the candidate's content-hash build directory and its worker's working directory
(where ``load_inline`` / ``load`` and Triton put what they compile: shared objects and their
object files, whatever their names), and the demangled names of their symbols, through binutils'
``nm -C`` (binutils comes with the compiler that built the extension). Nothing of the candidate's
runs here: the files are read as data.
What the imports mean is decided by :mod:`kbv.checks.native`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable

#: the first bytes of every ELF file.
ELF_MAGIC = b"\x7fELF"
#: at most this many ELF files are read per candidate (a build directory holds an object file and
#: a shared object per extension, Triton a launcher per kernel: tens at most; kbv choice). More
#: are not read: the caller is told how many there were.
MAX_OBJECTS = 256
#: seconds one ``nm`` may take (a 50 MB CUDA extension reads in well under a second).
NM_TIMEOUT_S = 30
#: seconds reading and matching all of a candidate's objects may take, and symbols they may hold
#: (kbv choices: an honest build's objects read in about a second and import hundreds of
#: symbols). Past either the imports are unknown: not credited, not accused
#: (:func:`kbv.checks.profile_rules.unreadable_objects`), so a candidate cannot hold the trusted
#: side up with the objects it leaves.
SCAN_BUDGET_S = 60.0
MAX_SYMBOLS = 1_000_000


class ElfError(Exception):
    """One file's imports could not be read (``nm`` refuses it, or takes too long)."""


def reader() -> str | None:
    """The path of binutils' ``nm``, or ``None`` when it is not on ``PATH`` (kbv's limit then,
    not the candidate's)."""
    return shutil.which("nm")


def _machine(header: bytes) -> bytes:
    """The ``e_machine`` field of an ELF header (its first 20 bytes; the byte order is the
    header's own, either way compared as raw bytes)."""
    return header[18:20]


def host_machine() -> bytes:
    """``e_machine`` of the running interpreter's own executable: the architecture whose objects
    can be loaded into a Python process on this host."""
    with open(os.path.realpath("/proc/self/exe") if os.path.exists("/proc/self/exe") else sys.executable, "rb") as f:
        return _machine(f.read(20))


def elf_files(roots: Iterable[str | os.PathLike]) -> list[Path]:
    """Every regular ELF file for the host's architecture (:func:`host_machine`) under ``roots``
    (missing roots skipped; links neither followed nor listed; GPU code such as CUDA cubins, ELF
    files of another machine, left out; a file hard-linked under several names listed once),
    sorted by path; all of them, however many (the caller caps what it reads)."""
    machine = host_machine()
    found: set[Path] = set()
    inodes: set[tuple[int, int]] = set()
    for root in roots:
        if not os.path.isdir(root):
            continue
        for dirpath, dirnames, files in os.walk(root):
            dirnames.sort()  # in name order: of a file's hard links, the first by name is listed
            for name in sorted(files):
                path = Path(dirpath) / name
                try:
                    if path.is_symlink() or not path.is_file():
                        continue
                    with open(path, "rb") as f:
                        header = f.read(20)
                    if header[:4] != ELF_MAGIC or _machine(header) != machine:
                        continue
                    st = path.stat()
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) in inodes:
                    continue
                inodes.add((st.st_dev, st.st_ino))
                found.add(path)
    return sorted(found)


def _run_nm(nm: str, path: str | os.PathLike, flags: list[str]) -> tuple[list[str], list[str]]:
    try:
        out = subprocess.run([nm, *flags, "-C", os.fspath(path)], capture_output=True, text=True, errors="replace",
                             timeout=NM_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ElfError(f"{path}: nm failed: {type(exc).__name__}") from None
    if out.returncode != 0:
        why = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        raise ElfError(f"{path}: nm failed: {why}")
    undefined, defined = [], []
    for line in out.stdout.splitlines():
        if line[:1].isspace():  # no address: undefined ("<spaces>U name", "<spaces>w name")
            kind, _, name = line.strip().partition(" ")
            target = undefined if kind in ("U", "w", "v") else None
        else:  # "<address> <kind> <name>"
            _, _, rest = line.partition(" ")
            kind, _, name = rest.partition(" ")
            target = defined
        if target is not None and name.strip():
            target.append(name.split("@", 1)[0].strip())
    return undefined, defined


def symbols(path: str | os.PathLike, nm: str) -> tuple[list[str], list[str]]:
    """The demangled symbols of the ELF file at ``path`` as ``nm -C`` prints them, without
    versions (``@GLIBC_2.2.5``): ``(undefined, defined)``. Undefined are the imports
    (``"at::cpu::mm(at::Tensor const&, at::Tensor const&)"``), defined include the file's local
    symbols (``TORCH_LIBRARY_IMPL_static_init_aten_CPU_1``); a stripped shared object has only its
    dynamic table (``nm -D``): its imports and exports. ``nm`` is :func:`reader`'s path.

    Raises:
        ElfError: ``nm`` fails on the file (not an object it can read) or takes over
            :data:`NM_TIMEOUT_S`.
    """
    undefined, defined = _run_nm(nm, path, [])
    if not undefined and not defined:  # stripped: the dynamic table is what the loader reads
        undefined, defined = _run_nm(nm, path, ["-D"])
    return undefined, defined


def _digest(path: str | os.PathLike) -> str | None:
    """SHA-256 of the file's bytes, or None when it cannot be read."""
    import hashlib

    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


class Prefetched:
    """:func:`symbols` of the objects found under some directories now, read by ``nm`` in a
    background thread of the trusted process while the job goes on (the profile stage reads them
    after the timed rounds: 80 ms an object on the H100 host). Each object is copied first into a
    private temporary file, whose bytes are hashed and read by ``nm``; :meth:`symbols` gives that
    result only for a file whose bytes still hash the same, else reads it then (the candidate may
    write its build directory at any time). The caller waits (:meth:`wait`) before anything is
    timed, so no ``nm`` runs beside a timed call."""

    def __init__(self, roots: Iterable[str | os.PathLike], nm: str) -> None:
        import threading

        self._nm, self._roots = nm, [os.fspath(r) for r in roots]
        self._found: dict[str, tuple] = {}  # path -> (sha256, (undefined, defined) or ElfError)
        self._thread = threading.Thread(target=self._read, name="kbv-elf-prefetch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        import tempfile
        import time

        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="kbv-elf-") as tmp:
            for k, path in enumerate(elf_files(self._roots)[:MAX_OBJECTS]):
                if time.monotonic() - t0 > SCAN_BUDGET_S:
                    return
                copy = os.path.join(tmp, f"{k}.so")
                try:
                    shutil.copyfile(path, copy)
                except OSError:
                    continue
                digest = _digest(copy)
                try:
                    got: object = symbols(copy, self._nm)
                except ElfError as exc:
                    got = ElfError(str(exc).replace(copy, os.fspath(path)))
                os.unlink(copy)
                if digest is not None:
                    self._found[os.fspath(path)] = (digest, got)

    def wait(self, timeout: float = SCAN_BUDGET_S) -> None:
        """Until the background reads end (at most ``timeout`` seconds)."""
        self._thread.join(timeout)

    def symbols(self, path: str | os.PathLike, nm: str) -> tuple[list[str], list[str]]:
        """:func:`symbols` of ``path``: the prefetched result where the file's bytes are the ones read
        then, else read now.

        Raises:
            ElfError: as :func:`symbols`.
        """
        self.wait()
        hit = self._found.get(os.fspath(path))
        if hit is not None and nm == self._nm and _digest(path) == hit[0]:
            if isinstance(hit[1], ElfError):
                raise hit[1]
            return hit[1]
        return symbols(path, nm)
