"""Isolation of the candidate worker (taxonomy 26, sandbox tampering).

Worker side, :func:`apply_sandbox`, first thing in the worker and before torch is imported (the
process is still single-threaded, as ``unshare`` and per-thread credentials require). In order:

* own session (the parent kills the group) and ``PR_SET_PDEATHSIG`` (it dies with its parent);
* not dumpable (``PR_SET_DUMPABLE`` 0): no other candidate worker of the same user ptraces it or
  reads its ``/proc/<pid>/mem``; kbv's trusted processes are undumpable too
  (:func:`kbv.processes.procfs.undumpable`), and a candidate may make only itself dumpable again;
* it joins the cgroup v2 its parent made for it (:class:`kbv.processes.jail.ProcessJail`), so that every process it
  starts, even one that calls ``setsid`` and double-forks, is killed with it;
* an empty network namespace (root on Linux), and on cpu its own IPC namespace (System V shared
  memory, semaphores and message queues die with it; on cuda the host's is kept);
* no core dumps, files of at most :data:`MAX_FILE_BYTES` (on cpu its /dev/shm's size, if larger); stdout/stderr to a pipe the parent drains
  into a capped log (:class:`kbv.processes.logs.CappedLog`), so printing never fills the disk or kills it;
* a read-only filesystem except its fresh workdir (a tmpfs of bounded size that the parent
  mounted, :mod:`kbv.processes.scratch`), its content-hash build directory and ``/dev/shm``
  (torch's shared-memory tensors and CUDA IPC reference counts; on cpu a private tmpfs of bounded
  size, :func:`kbv.sandbox.limits.private_shm`): a private mount namespace as root, else Landlock; ``/proc`` stays writable for the process's own files but
  ``/proc/sys``, ``/proc/sysrq-trigger`` & co. are read-only; device nodes on a read-only mount
  can still be opened read-write, so CUDA's ``/dev/nvidia*`` work;
* as root: a uid of its own (:func:`kbv.sandbox.limits.switch_uid`: kbv's processes refuse its
  signals, ``RLIMIT_NPROC`` bounds its tasks), then every capability dropped (bounding, effective, permitted, ambient) and
  ``no_new_privs``, so it cannot remount, ``setns`` back into the host's namespaces, ptrace or
  read ``/proc/<pid>/environ`` of the reference worker, or write through ``/proc/<pid>/root``;
* a fresh working directory, no current directory on ``sys.path`` (no planted ``torch.py``) and
  the environment of :func:`kbv.sandbox.worker_env.worker_environment`.

Each step returns a note that goes into the verdict's evidence (``sandbox``), so a record says
which isolation a run actually had; a step the OS refuses is noted, not raised. Parent side:
:func:`kbv.sandbox.worker_env.worker_environment` is also the environment the worker is *spawned* with (its
``/proc/self/environ`` holds no secrets), and :class:`kbv.processes.jail.ProcessJail` kills whatever the worker started.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import signal
import sys
from dataclasses import dataclass
from typing import Any

from kbv.sandbox.landlock import LANDLOCK_CREATE_RULESET as _LANDLOCK_CREATE_RULESET  # noqa: F401 - tests ask it
from kbv.sandbox.landlock import landlock as _landlock
from kbv.sandbox.worker_env import worker_environment

#: largest file the worker may write (bytes), at the least: extension builds need tens of MB. On cpu
#: the limit is the larger of this and the worker's private /dev/shm (``WorkerSetup.shm_bytes``):
#: the output slot buffer kbv asks the worker to share there holds twice one call's outputs, over
#: 1 GiB for an output of 512 MiB or more, and no file in that tmpfs can outgrow it anyway.
MAX_FILE_BYTES = 1 << 30

#: under /proc, read-only although the rest of /proc stays writable (as in Docker's default).
_PROC_READONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 0x400, 0x800, 0x1000, 0x4000, 0x40000
MS_RELATIME, MS_STRICTATIME = 0x200000, 0x1000000
#: per-mount flags kept when a mount is made read-only (clearing one can be refused).
_MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 24, 36
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 2, 4
PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class WorkerSetup:
    """What the parent decides before the worker starts."""

    workdir: str  #: fresh temporary directory (cwd, ``HOME`` and ``TMPDIR`` of the worker).
    build_dir: str  #: content-hash build cache of this candidate (toolchain caches live here).
    log_path: str  #: stdout/stderr of the worker (compiler output, prints).
    device: str  #: ``cpu`` or ``cuda``.
    cgroup: str | None = None  #: cgroup v2 directory the worker joins (:class:`kbv.processes.jail.ProcessJail`).
    uid: int | None = None  #: the worker's own uid (root only, :func:`kbv.sandbox.limits.choose_uid`).
    shm_bytes: int = 1 << 30  #: size of its private /dev/shm on cpu (:func:`kbv.sandbox.limits.shm_quota_bytes`).
    max_tasks: int = 4096  #: its RLIMIT_NPROC margin (:func:`kbv.sandbox.limits.max_tasks`).
    #: what the parent set up for it (cgroup limits, scratch quota), one note each, for the evidence.
    parent_notes: tuple[str, ...] = ()
    #: the network and System V IPC namespaces were made by the parent for this worker and the process
    #: that started it together (an external tool's run, :mod:`kbv.processes.tool_run`: the tool reaches its
    #: target through abstract unix sockets, which a network namespace of the target's own would cut): the
    #: worker keeps them instead of making its own.
    namespaces_from_parent: bool = False
    #: modules the worker imports once its runtime is up, before any candidate code (cuda: after CUDA
    #: starts): what the candidate's backend imports (:func:`kbv.intake.candidates.backend_modules`), so a
    #: worker started ahead of its job has them before the job's load.
    preload: tuple[str, ...] = ()


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
    libc.syscall.restype = ctypes.c_long
    return libc


def _errno() -> str:
    return os.strerror(ctypes.get_errno())


def prctl(option: int, arg: int = 0) -> bool:
    return _libc().prctl(option, arg, 0, 0, 0) == 0


# Worker side --------------------------------------------------------------------------------

def die_with_parent(parent_pid: int | None = None) -> int:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and
    exit at once if the parent is already gone (it died before the request: this process was
    re-parented). ``parent_pid`` defaults to the spawning process
    (``multiprocessing.parent_process()``), else the current parent. Returns the parent's pid.

    Linux sends the signal when the parent *thread* that started this process exits, so start
    workers from a thread that lives as long as their owner (kbv starts them from the main thread).
    """
    if sys.platform != "linux":
        return os.getppid()
    prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if parent_pid is None:
        import multiprocessing

        parent = multiprocessing.parent_process()
        parent_pid = parent.pid if parent is not None and parent.pid else os.getppid()
    if os.getppid() != parent_pid:
        os._exit(1)
    return parent_pid


def _join_cgroup(cgroup: str | None) -> str:
    if cgroup is None:
        return "processes: no cgroup; orphans go to the parent (subreaper), which kills them with the worker"
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError as exc:
        return f"processes: not in a cgroup ({exc.strerror}); orphans go to the parent (subreaper)"
    return f"processes: all in cgroup {cgroup}, killed with the worker"


def _isolate_network() -> str:
    """Move into a new, empty network namespace (Linux, root only). CUDA does not use the network."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "network: not isolated (needs root on Linux)"
    if _libc().unshare(CLONE_NEWNET) != 0:
        return f"network: not isolated (unshare: {_errno()})"
    return "network: isolated (empty namespace)"


def _limit_resources(max_file_bytes: int) -> None:
    import resource

    for lim, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, max_file_bytes)):
        try:
            soft, hard = resource.getrlimit(lim)
            new = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(lim, (new, hard))
        except (ValueError, OSError):
            pass


def _under(path: str, roots: tuple[str, ...] | list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def mounts() -> list[tuple[str, list[str], str]]:
    """(mount point, per-mount options, filesystem type) of every mount in /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields, fstype = line.split(" - ", 1)
            fields = fields.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            out.append((point, fields[5].split(","), fstype.split()[0]))
    return out


def _mount_readonly(writable: list[str], hide_proc: bool) -> tuple[list[str], str]:
    """Enter a private mount namespace in which every mount is read-only except ``writable`` and
    /proc (minus :data:`_PROC_READONLY`). ``hide_proc`` (cpu): /proc is a fresh instance with
    ``hidepid=2``, where a process it may not ptrace is invisible (kbv's processes are
    undumpable, and the candidate has no ``CAP_SYS_PTRACE``), so it can neither read their /proc
    files nor write the few that a non-owner with ``CAP_DAC_OVERRIDE`` could (``oom_score_adj``,
    ``autogroup``); on cuda the host's stays (whether the driver's IPC looks up the other worker
    there is unverified); with it, /run and /var/run are an empty tmpfs
    (:func:`kbv.sandbox.limits.hide_runtime_dirs`). Returns the mounts it could not make read-only
    and the note on /proc.

    Raises:
        OSError: no private mount namespace (not root, multi-threaded, or refused).
    """
    libc = _libc()

    def mount(target: str, flags: int, source: str | None = None) -> bool:
        return libc.mount(source and source.encode(), target.encode(), None, flags, None) == 0

    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), f"unshare: {_errno()} ({len(os.listdir('/proc/self/task'))} threads)")
    if not mount("/", MS_REC | MS_PRIVATE):  # nothing propagates to the host
        raise OSError(ctypes.get_errno(), f"private mounts: {_errno()}")
    # gid=: the group that would see everything anyway (its default, 0, is the worker's own group)
    if not hide_proc:
        proc = "/proc: kbv's processes visible (cuda)"
    elif libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"hidepid=2,gid=2147483646") == 0:
        proc = "/proc: kbv's processes hidden (hidepid=2)"
    else:
        proc = f"/proc: kbv's processes visible (proc hidepid=2: {_errno()})"
    from kbv.sandbox import limits

    hidden = limits.hide_runtime_dirs(writable) if hide_proc else []
    if hidden:
        proc += f"; {', '.join(hidden)}: hidden (an empty tmpfs: the host's unix sockets and secrets there)"
    proc_ro = [p for p in _PROC_READONLY if os.path.exists(p)]
    for path in writable + proc_ro:  # own mounts, so that their flags can differ from their parent's
        if not mount(path, MS_BIND | MS_REC, source=path):
            raise OSError(ctypes.get_errno(), f"bind {path}: {_errno()}")
    left = []
    for point, opts, _ in mounts():
        if _under(point, writable) or (_under(point, ["/proc"]) and not _under(point, proc_ro)) \
                or any(_under(point, [h]) and point != h for h in hidden):  # under a hiding tmpfs
            continue
        if not mount(point, MS_BIND | MS_REMOUNT | MS_RDONLY | sum(_MOUNT_FLAGS.get(o, 0) for o in opts)):
            left.append(f"{point} ({_errno()})")
    return left, proc


def _drop_privileges(root: bool | None = None, keep: int | None = None) -> str:
    """``no_new_privs``; when the worker started as root (``root``; default: its euid is 0) also
    every capability but ``keep`` (one capability number, kept effective and ambient, so that the
    programs it runs have it too): it cannot mount, setns, ptrace privileged processes, signal
    another uid, change uid back or raise limits. :func:`kbv.sandbox.limits.switch_uid` keeps
    ``CAP_DAC_OVERRIDE``: the files its own uid does not own open as they did for root."""
    nnp = prctl(PR_SET_NO_NEW_PRIVS, 1)
    if not (os.geteuid() == 0 if root is None else root):
        return "privileges: no_new_privs" if nnp else f"privileges: unchanged ({_errno()})"
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap != keep:
            prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable of caps 0-31, then 32-63
    if keep is not None:
        data[3 * (keep // 32)] = data[3 * (keep // 32) + 1] = data[3 * (keep // 32) + 2] = 1 << (keep % 32)
    if _libc().capset(header, data) != 0:
        return f"privileges: capabilities kept (capset: {_errno()})"
    kept = ""
    if keep is not None:
        ok = _libc().prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, keep, 0, 0) == 0
        kept = f" but capability {keep}" + ("" if ok else f" (not ambient: {_errno()})")
    threads = len(os.listdir("/proc/self/task"))  # credentials are per thread
    return f"privileges: all capabilities dropped{kept}, no_new_privs" + (
        f" (in 1 of {threads} threads)" if threads > 1 else "")


def _isolate_filesystem_and_drop_privileges(setup: WorkerSetup, parent_pid: int) -> list[str]:
    """A private read-only mount namespace (root) with, on cpu, a private ``/dev/shm``; then the
    worker's own uid and task limit (:mod:`kbv.sandbox.limits`), the privilege drop, and Landlock
    if there is no mount namespace (Landlock needs ``no_new_privs``). Returns the notes."""
    from kbv.sandbox import limits

    if sys.platform != "linux":
        return ["filesystem: not isolated (not Linux)"]
    writable = [os.path.realpath(p) for p in (setup.workdir, setup.build_dir, "/dev/shm") if os.path.isdir(p)]
    what = "filesystem: read-only except workdir, build dir and /dev/shm"
    root = os.geteuid() == 0
    shm = "/dev/shm: the host's; its files are removed after the verdict"
    try:
        if not root:
            raise PermissionError("not root")
        left, proc = _mount_readonly(writable, hide_proc=setup.device == "cpu")
        fs, mount_error = f"{what} (mount namespace)" + (f", left writable: {', '.join(left)}" if left else ""), None
        fs += f"; {proc}"
        if setup.device == "cpu":
            shm = limits.private_shm(setup.shm_bytes)
    except OSError as exc:
        fs, mount_error = None, exc
    why_not = ("not root" if not root else "cuda: CUDA IPC maps no buffer across uids" if setup.device != "cpu"
               else "KBV_CANDIDATE_UID=off or no free uid")
    uid = limits.switch_uid(setup.uid if root else None, parent_pid, why_not)
    switched = root and setup.uid is not None and os.getuid() == setup.uid
    tasks = limits.limit_tasks(setup.max_tasks, switched=switched)
    privileges = _drop_privileges(root, keep=limits.CAP_DAC_OVERRIDE if switched else None)
    if fs is None:
        why = _landlock(writable)
        fs = (f"{what} (Landlock)" if why is None
              else f"filesystem: not isolated (mount namespace: {mount_error}; {why})")
    return [fs, shm, uid, tasks, privileges]


def apply_sandbox(setup: WorkerSetup, log_fd: int | None = None) -> list[str]:
    """Isolate this process before any candidate code runs (see the module docstring).

    ``log_fd``: where stdout/stderr go (default: ``setup.log_path`` opened for appending).
    Returns one note per step saying what it achieved (``"network: isolated (empty namespace)"``,
    ``"filesystem: not isolated (...)"``, ...); a step that fails is noted, never raised.
    """
    try:
        os.setsid()
    except OSError:
        pass
    from kbv.sandbox import limits

    parent_pid = die_with_parent()
    # not dumpable: another candidate worker of the same user cannot ptrace this one or read its
    # /proc/<pid>/mem (kbv.processes.procfs.undumpable does the same for the trusted processes)
    dumpable = "ptrace: not dumpable" if prctl(PR_SET_DUMPABLE, 0) else f"ptrace: dumpable ({_errno()})"
    if setup.namespaces_from_parent:
        isolated = ["network and System V IPC: the namespaces the parent made for the tool and this process"]
    else:
        isolated = [_isolate_network(), limits.isolate_ipc(setup.device)]
    notes = [_join_cgroup(setup.cgroup), *setup.parent_notes, *isolated, dumpable]
    # on cpu the output slot buffer lives in its private /dev/shm; on cuda on the device
    _limit_resources(max(MAX_FILE_BYTES, setup.shm_bytes) if setup.device == "cpu" else MAX_FILE_BYTES)
    if log_fd is None:  # else the write end of a pipe the parent drains into a capped log
        log_fd = os.open(setup.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    notes += _isolate_filesystem_and_drop_privileges(setup, parent_pid)
    parent_cwd = os.getcwd()
    os.chdir(setup.workdir)
    sys.path[:] = [p for p in sys.path if p not in ("", ".", parent_cwd) and not p.startswith(parent_cwd + os.sep + "tests")]
    env = worker_environment(setup)
    os.environ.clear()
    os.environ.update(env)
    if setup.uid is not None and os.getuid() == setup.uid:  # no passwd entry: getpass.getuser() reads these
        os.environ.setdefault("USER", f"kbv-{setup.uid}")
        os.environ.setdefault("LOGNAME", os.environ["USER"])
    # multiprocessing's sockets (torch passes CPU tensors' fds through them) go in a temp dir that
    # a spawned process inherits from its parent once the parent has one: use the workdir instead
    import multiprocessing

    multiprocessing.current_process()._config["tempdir"] = setup.workdir
    return notes


class InheritedFd:
    """The worker's log pipe, handed to it at spawn (defined on the sandbox side: the worker
    unpickles it and so imports its module). A file descriptor handed to a spawned process (``multiprocessing.reduction.DupFd``: passed
    at spawn time, a plain int in the child)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self):
        from multiprocessing import reduction

        return (_inherited_fd, (reduction.DupFd(self.fd),))


def _inherited_fd(dup: Any) -> int:
    return dup.detach()
