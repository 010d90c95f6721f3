"""What a candidate worker writes outside its processes, bounded and removed with its verdict
(taxonomy 26, parent half; the worker half is :mod:`kbv.sandbox.limits`).

* Its scratch directory (cwd, ``HOME``, ``TMPDIR``, multiprocessing's sockets) is a tmpfs of
  :func:`kbv.sandbox.limits.tmp_quota_bytes` that this process mounts (root): a write past it
  fails with ``ENOSPC``, and unmounting it frees everything. It is mounted in the host's mount
  namespace, not the worker's, because the reference worker connects to the worker's socket in
  it to receive output tensors. Mounts of owners that died are released by the next owner
  (:func:`release_stale`, called by :func:`kbv.processes.jail.kill_cgroups`). Without root it is
  a plain directory, removed after the verdict; only ``RLIMIT_FSIZE`` bounds each file.
* ``/dev/shm``: on cpu as root the worker has a private tmpfs there. Elsewhere (cuda: torch opens
  the other worker's CUDA IPC reference counters by name; no root) it writes into the host's, and
  :func:`sweep_shm` removes, once the worker and what it started are dead, every entry its own
  uid owns, or without one every entry made since it started (:func:`shm_entries`) that no live
  process has open or mapped (:func:`leftovers`).
* System V shared memory, semaphores and message queues: the cpu worker has its own IPC namespace;
  elsewhere :func:`remove_sysv` removes those made by the candidate's uid.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import sys

from kbv.sandbox.confinement import MS_NODEV, MS_NOSUID, _libc, mounts

SHM = "/dev/shm"
#: the workdir of a candidate worker: ``kbv-cand-<owner pid>-<random>`` (:class:`kbv.processes.candidate.CandidateProcess`),
#: holding its log and its scratch directory :data:`SCRATCH_NAME` (the worker's cwd).
WORKDIR_PREFIX = "kbv-cand-"
SCRATCH_NAME = "kbv-cand-scratch"
_OWNED = re.compile(rf"/{WORKDIR_PREFIX}(\d+)-[^/]+/{SCRATCH_NAME}$")
MNT_DETACH = 2
IPC_RMID = 0


def mount_scratch(path: str, size_bytes: int) -> str:
    """Mount a tmpfs of ``size_bytes`` on directory ``path`` (root on Linux). Returns the note for
    the verdict's evidence (why not, where it is not mounted)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "scratch: a plain directory, no size limit (needs root), removed after the verdict"
    # open to every uid, as /tmp is: the worker's own uid checks access() with it (a compiler
    # picks its temporary directory so), while its files are made with filesystem uid 0
    # (kbv.sandbox.limits); the directory above is traversable for the same reason
    os.chmod(path, 0o1777)
    os.chmod(os.path.dirname(path), 0o711)
    opts = f"size={size_bytes},mode=1777".encode()
    if _libc().mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        return (f"scratch: a plain directory, no size limit (tmpfs: {os.strerror(ctypes.get_errno())}), "
                "removed after the verdict")
    return f"scratch: tmpfs of {size_bytes / 2**20:.0f} MiB"


def release_scratch(path: str) -> None:
    """Unmount ``path`` if it is a mount point (lazily: open files do not keep it), else nothing."""
    if sys.platform == "linux" and os.path.ismount(path):
        libc = _libc()
        libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
        libc.umount2(path.encode(), MNT_DETACH)


def release_stale(owner_pid: int | None = None) -> None:
    """Unmount and remove the scratch tmpfs of candidate workers of ``owner_pid``, or by default of
    every owner that no longer exists (an owner killed before it could close them)."""
    try:
        points = [p for p, _, fstype in mounts() if fstype == "tmpfs"]
    except OSError:
        return
    for point in points:
        m = _OWNED.search(point)
        if m and (int(m[1]) == owner_pid if owner_pid is not None else not os.path.exists(f"/proc/{m[1]}")):
            release_scratch(point)
            shutil.rmtree(os.path.dirname(point), ignore_errors=True)


def shm_entries(directory: str = SHM) -> dict[str, int]:
    """Name -> inode of every entry of ``directory`` (empty where it cannot be listed)."""
    try:
        with os.scandir(directory) as it:
            return {e.name: e.inode() for e in it}
    except OSError:
        return {}


def leftovers(before: dict[str, int], after: dict[str, int], in_use: frozenset[str]) -> list[str]:
    """Entries of ``after`` that are not in ``before`` (a name, or the same name with another
    inode) and not in ``in_use`` (names some live process has open or mapped), sorted.

    ``before`` / ``after``: :func:`shm_entries` when the worker started and once it is dead."""
    return sorted(n for n, ino in after.items() if before.get(n) != ino and n not in in_use)


def open_names(directory: str = SHM) -> frozenset[str]:
    """Names under ``directory`` that a process this one can inspect has open (/proc/*/fd) or
    mapped (/proc/*/maps)."""
    prefix = directory.rstrip("/") + "/"
    names = set()

    def add(path: str) -> None:
        if path.startswith(prefix):
            names.add(path[len(prefix):].removesuffix(" (deleted)").split("/", 1)[0])

    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    add(os.readlink(f"/proc/{pid}/fd/{fd}"))
                except OSError:
                    continue
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) == 6:
                        add(parts[5].rstrip("\n"))
        except OSError:
            continue
    return frozenset(names)


def sweep_shm(before: dict[str, int], uid: int | None = None, directory: str = SHM) -> list[str]:
    """Remove what a dead candidate left in ``directory``: with its own ``uid``, every entry that
    uid owns; else the :func:`leftovers` of ``before`` (what appeared since it started and no live
    process holds). Returns the names removed."""
    after = shm_entries(directory)
    if uid is not None:
        names = []
        for name in after:
            try:
                if os.lstat(os.path.join(directory, name)).st_uid == uid:
                    names.append(name)
            except OSError:
                continue
    elif any(before.get(n) != ino for n, ino in after.items()):
        names = leftovers(before, after, open_names(directory))
    else:
        return []
    removed = []
    for name in sorted(names):
        path = os.path.join(directory, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(name)
        except OSError:
            continue
    return removed


def sysv_objects(uid: int, proc: str = "/proc/sysvipc") -> list[tuple[str, int]]:
    """(kind ``shm``/``sem``/``msg``, id) of each System V object whose creator or owner uid is
    ``uid`` (from /proc/sysvipc/*: the header names the columns)."""
    out = []
    for kind, id_col in (("shm", "shmid"), ("sem", "semid"), ("msg", "msqid")):
        try:
            with open(os.path.join(proc, kind)) as f:
                header = f.readline().split()
                rows = [line.split() for line in f]
        except OSError:
            continue
        try:
            i_id, i_uid, i_cuid = header.index(id_col), header.index("uid"), header.index("cuid")
        except ValueError:
            continue
        out += [(kind, int(r[i_id])) for r in rows
                if len(r) == len(header) and uid in (int(r[i_uid]), int(r[i_cuid]))]
    return out


def remove_sysv(uid: int | None) -> int:
    """Remove (``IPC_RMID``) the System V objects of ``uid`` (:func:`sysv_objects`); segments
    still attached go once the last process detaches. Returns how many were removed."""
    if uid is None or sys.platform != "linux":
        return 0
    libc = _libc()
    done = 0
    for kind, ident in sysv_objects(uid):
        if kind == "shm":
            rc = libc.shmctl(ident, IPC_RMID, None)
        elif kind == "sem":
            rc = libc.semctl(ident, 0, IPC_RMID)
        else:
            rc = libc.msgctl(ident, IPC_RMID, None)
        done += rc == 0
    return done
