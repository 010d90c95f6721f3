"""kbv's lock on one content-hash build directory, held by the trusted side while a candidate
worker loads (and so builds) into it.

Why kbv locks at all: ``torch.utils.cpp_extension`` guards ``<TORCH_EXTENSIONS_DIR>/<name>`` with
a plain ``lock`` file that it deletes when the build ends. A build killed in between (Ctrl-C of
``kbv run`` or ``kbv eval``, a ``kill -9``, a compile timeout) leaves that file behind, and every
later build of the same file waits for it to vanish, which it never does, until kbv's compile
limit (900 s) kills the worker. Whoever holds kbv's lock is the only kbv process building in the
directory, so any torch ``lock`` found there is stale and is deleted.

The lock is ``flock(2)`` on ``<build dir>.lock``, beside the directory (a candidate worker may
write its build directory, not its parent). The kernel releases a ``flock`` when its holder dies,
by any signal, so a dead holder never blocks anyone and there is no pid to misjudge (a reused
pid, another host's pid); the file also names the holder (pid and its start time, host) for the
line a waiting build prints. Its first word is ``building`` while a build is in progress and
``done`` once it ended with the worker still answering: a holder that finds ``building`` knows the
previous build was cut off (its objects may be half written) and deletes ``torch_extensions``
first, so a rerun rebuilds from scratch instead of loading a truncated ``.so``, unless nothing
there changed since that holder took the lock (``at=``: it was cut off while loading a finished
build, which stays).

Several candidate workers of one process may build into one directory at once (two samples of one
file in one build job): the lock is counted per process and taken from the kernel once; torch's
own lock then orders those builds, and both die with this process if it dies.

Only ``kbv.pipeline.load`` and the build jobs of ``kbv.pipeline.reference_worker`` take it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

#: seconds between two tries for a lock another process holds.
POLL_S = 0.25

BUILDING, DONE = "building", "done"


class BuildLockTimeout(RuntimeError):
    """Another live kbv process held the build directory's lock for the whole wait."""


class _Held:
    """This process's hold on one directory: the open lock file, how many holds, whether every
    one of them ended cleanly."""

    def __init__(self, fd: int):
        self.fd = fd
        self.count = 0
        self.clean = True


_HELD: dict[str, _Held] = {}
_HELD_LOCK = threading.Lock()


def lock_path(build_dir: Path) -> Path:
    """The lock file of ``build_dir``: ``<build_dir>.lock`` beside it."""
    return build_dir.with_name(build_dir.name + ".lock")


def _start_time(pid: int) -> str:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks after boot), or ``"?"``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "?"


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 4096).decode(errors="replace")


def _write(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def holder(build_dir: Path) -> str:
    """What the lock file of ``build_dir`` says of its last holder (``"building pid=… start=…
    host=…"`` or ``"done …"``), empty when there is none."""
    try:
        return lock_path(build_dir).read_text().strip()
    except OSError:
        return ""


def describe_holder(line: str) -> str:
    """A lock line (:func:`holder`) as a reader wants it: ``pid 9333 on host, since 14:02:11``;
    the line as it is when it does not parse."""
    fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
    try:
        since = time.strftime("%H:%M:%S", time.localtime(float(fields["at"])))
        return f"pid {int(fields['pid'])} on {fields.get('host', '?')}, since {since}"
    except (KeyError, ValueError, OverflowError, OSError):
        return line or "holder unknown"


def _reset(build_dir: Path, interrupted: bool) -> None:
    """First hold of this process: delete torch's stale ``lock`` files; after an interrupted build,
    all of ``torch_extensions`` (the compiler's and linker's outputs; Triton and the other caches
    replace their files atomically and are kept)."""
    extensions = build_dir / "torch_extensions"
    if interrupted:
        shutil.rmtree(extensions, ignore_errors=True)
        return
    for stale in extensions.glob("**/lock"):
        stale.unlink(missing_ok=True)


def _wrote_since(build_dir: Path, previous: list[str]) -> bool:
    """Whether a cut-off holder (its lock line ``previous``, split) may have written build outputs:
    a file under ``torch_extensions`` modified since it took the lock (``at=``, epoch seconds; 1 s
    of slack for file-system timestamps), or no ``at=`` to tell. A holder cut off while it only
    loaded a finished build wrote nothing there, and the build is kept."""
    at = next((f[3:] for f in previous if f.startswith("at=")), None)
    try:
        since = float(at) - 1.0
    except (TypeError, ValueError):
        return True
    for root, _dirs, files in os.walk(build_dir / "torch_extensions"):
        for name in files:
            try:
                if os.stat(os.path.join(root, name)).st_mtime >= since:
                    return True
            except OSError:
                continue
    return False


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Hold:
    """One hold of a build directory's lock: set :attr:`answered` once the build's worker replied
    (the build ran to its end, built or failed); a hold left False marks the build cut off."""

    answered: bool = False


@contextmanager
def build_lock(build_dir: Path, *, timeout_s: float, what: str = "",
               say: Callable[[str], None] = _say) -> Iterator[Hold]:
    """Hold kbv's lock on ``build_dir`` for the block (see the module doc).

    Waiting on another live process is said once through ``say`` (one line on stderr: what waits,
    the holder's pid). Inside, set ``hold.answered = True`` when the worker replied to its load;
    otherwise (it timed out, died, or the block raised first) the build counts as cut off and the
    next holder rebuilds from scratch.

    Args:
        build_dir: the candidate's build directory (:func:`kbv.intake.candidates.build_dir`).
        timeout_s: the longest wait for a live holder, in seconds (kbv's compile limit: the holder's
            own build is killed by then).
        what: the candidate's file name, for the waiting line.

    Raises:
        BuildLockTimeout: another live process held the lock for ``timeout_s`` seconds.
    """
    key = str(build_dir)
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is not None:
            held.count += 1
    if held is None:
        held = _acquire(build_dir, timeout_s, what, say)
    hold = Hold()
    try:
        yield hold
    finally:
        held.clean = held.clean and hold.answered
        _release(key, held)


def _acquire(build_dir: Path, timeout_s: float, what: str, say: Callable[[str], None]) -> _Held:
    path = lock_path(build_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        with _HELD_LOCK:  # another thread of this process may have taken it meanwhile
            held = _HELD.get(str(build_dir))
            if held is not None:
                held.count += 1
                os.close(fd)
                return held
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass
            else:
                previous = _read(fd).split()
                _reset(build_dir, interrupted=bool(previous) and previous[0] == BUILDING
                       and _wrote_since(build_dir, previous))
                pid = os.getpid()
                _write(fd, f"{BUILDING} pid={pid} start={_start_time(pid)} host={socket.gethostname()} "
                           f"at={time.time():.3f}\n")
                held = _HELD[str(build_dir)] = _Held(fd)
                held.count = 1
                return held
        if time.monotonic() >= deadline:
            os.close(fd)
            raise BuildLockTimeout(f"{build_dir}: another kbv process ({holder(build_dir) or 'unknown'}) "
                                   f"kept building it for {timeout_s:g} s")
        if not told:
            told = True
            # the holder may be this run's own build pool building a file of the same content
            say(f"kbv: {what + ': ' if what else ''}waiting for another build of the same source "
                f"({describe_holder(holder(build_dir))}) in {build_dir}")
        time.sleep(POLL_S)


def _release(key: str, held: _Held) -> None:
    with _HELD_LOCK:
        held.count -= 1
        if held.count > 0:
            return
        _HELD.pop(key, None)
        try:
            if held.clean:
                _write(held.fd, f"{DONE} pid={os.getpid()}\n")
            fcntl.flock(held.fd, fcntl.LOCK_UN)
        finally:
            os.close(held.fd)


__all__ = ["build_lock", "Hold", "BuildLockTimeout", "holder", "lock_path", "BUILDING", "DONE"]
