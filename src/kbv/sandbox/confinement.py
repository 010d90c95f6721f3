"""Isolation of the candidate worker (taxonomy 26, sandbox tampering).

Worker side, :func:`apply_sandbox`, first thing in the worker and before torch is imported (the
process is still single-threaded, as ``unshare`` and per-thread credentials require). In order:

* own session (the parent kills the group) and ``PR_SET_PDEATHSIG`` (it dies with its parent);
* it joins the cgroup v2 its parent made for it (:class:`ProcessJail`), so that every process it
  starts, even one that calls ``setsid`` and double-forks, is killed with it;
* an empty network namespace (root on Linux);
* no core dumps, files of at most :data:`MAX_FILE_BYTES`; stdout/stderr to a pipe the parent drains
  into a capped log (:class:`kbv.processes.handles.CappedLog`), so printing never fills the disk or kills it;
* a read-only filesystem except its fresh workdir, its content-hash build directory and
  ``/dev/shm`` (torch's shared-memory tensors and CUDA IPC reference counts): a private mount
  namespace as root, else Landlock; ``/proc`` stays writable for the process's own files but
  ``/proc/sys``, ``/proc/sysrq-trigger`` & co. are read-only; device nodes on a read-only mount
  can still be opened read-write, so CUDA's ``/dev/nvidia*`` work;
* as root: every capability dropped (bounding, effective, permitted, ambient) and
  ``no_new_privs``, so it cannot remount, ``setns`` back into the host's namespaces, ptrace or
  read ``/proc/<pid>/environ`` of the reference worker, or write through ``/proc/<pid>/root``;
* a fresh working directory, no current directory on ``sys.path`` (no planted ``torch.py``) and
  the environment of :func:`worker_environment`.

Each step returns a note that goes into the verdict's evidence (``sandbox``), so a record says
which isolation a run actually had; a step the OS refuses is noted, not raised. Parent side:
:func:`worker_environment` is also the environment the worker is *spawned* with (its
``/proc/self/environ`` holds no secrets), and :class:`ProcessJail` kills whatever the worker started.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import re
import signal
import struct
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass

#: environment variables a candidate worker keeps (by name or prefix); everything else, API keys
#: and kbv's own settings included, is dropped. The prefixes keep CUDA/Triton toolchains working.
_KEEP_PREFIXES = ("CUDA_", "NVIDIA_", "TRITON_", "TORCH_CUDA_", "NCCL_", "LD_", "CPATH", "LIBRARY_PATH",
                  "CONDA_PREFIX", "VIRTUAL_ENV", "PYTORCH_", "NVSHMEM_")
_KEEP_ENV = (
    "PATH", "LANG", "LC_ALL", "USER", "LOGNAME",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CC", "CXX",
    "TRITON_INTERPRET", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
)

#: largest file the worker may write (bytes): extension builds need tens of MB, nothing needs more.
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
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
#: Landlock syscalls (the same number on every architecture) and its filesystem write rights.
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LL_WRITE_FILE, _LL_REFER, _LL_TRUNCATE = 1 << 1, 1 << 13, 1 << 14
_LL_WRITE_ABI1 = _LL_WRITE_FILE | sum(1 << b for b in range(4, 13))  # remove/make dir, file, node, link


@dataclass(frozen=True)
class WorkerSetup:
    """What the parent decides before the worker starts."""

    workdir: str  #: fresh temporary directory (cwd, ``HOME`` and ``TMPDIR`` of the worker).
    build_dir: str  #: content-hash build cache of this candidate (toolchain caches live here).
    log_path: str  #: stdout/stderr of the worker (compiler output, prints).
    device: str  #: ``cpu`` or ``cuda``.
    cgroup: str | None = None  #: cgroup v2 directory the worker joins (:class:`ProcessJail`).


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
    libc.syscall.restype = ctypes.c_long
    return libc


def _errno() -> str:
    return os.strerror(ctypes.get_errno())


def _prctl(option: int, arg: int = 0) -> bool:
    return _libc().prctl(option, arg, 0, 0, 0) == 0


def worker_environment(setup: WorkerSetup, environ: dict | None = None) -> dict[str, str]:
    """The candidate worker's whole environment: toolchain variables of ``environ`` (default
    ``os.environ``) only, ``HOME``/``TMPDIR`` in its workdir, and every cache a toolchain writes
    (torch extensions, Triton, inductor, the CUDA JIT cache, ``XDG_CACHE_HOME``) in its build
    directory: with ``/dev/shm``, the only places it can write."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)}
    build = setup.build_dir
    env.update(HOME=setup.workdir, TMPDIR=setup.workdir, PWD=setup.workdir,
               TORCH_EXTENSIONS_DIR=os.path.join(build, "torch_extensions"),
               TRITON_CACHE_DIR=os.path.join(build, "triton"), TRITON_HOME=build,
               TORCHINDUCTOR_CACHE_DIR=os.path.join(build, "inductor"),
               CUDA_CACHE_PATH=os.path.join(build, "cuda_cache"), XDG_CACHE_HOME=os.path.join(build, "cache"))
    return env


# Worker side --------------------------------------------------------------------------------

def die_with_parent(parent_pid: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and
    exit at once if the parent is already gone (it died before the request: this process was
    re-parented). ``parent_pid`` defaults to the spawning process
    (``multiprocessing.parent_process()``), else the current parent.

    Linux sends the signal when the parent *thread* that started this process exits, so start
    workers from a thread that lives as long as their owner (kbv starts them from the main thread).
    """
    if sys.platform != "linux":
        return
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if parent_pid is None:
        import multiprocessing

        parent = multiprocessing.parent_process()
        parent_pid = parent.pid if parent is not None and parent.pid else os.getppid()
    if os.getppid() != parent_pid:
        os._exit(1)


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


def _limit_resources() -> None:
    import resource

    for lim, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, MAX_FILE_BYTES)):
        try:
            soft, hard = resource.getrlimit(lim)
            new = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(lim, (new, hard))
        except (ValueError, OSError):
            pass


def _under(path: str, roots: tuple[str, ...] | list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _mounts() -> list[tuple[str, list[str], str]]:
    """(mount point, per-mount options, filesystem type) of every mount in /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields, fstype = line.split(" - ", 1)
            fields = fields.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            out.append((point, fields[5].split(","), fstype.split()[0]))
    return out


def _mount_readonly(writable: list[str]) -> list[str]:
    """Enter a private mount namespace in which every mount is read-only except ``writable`` and
    /proc (minus :data:`_PROC_READONLY`). Returns the mounts it could not make read-only.

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
    proc_ro = [p for p in _PROC_READONLY if os.path.exists(p)]
    for path in writable + proc_ro:  # own mounts, so that their flags can differ from their parent's
        if not mount(path, MS_BIND | MS_REC, source=path):
            raise OSError(ctypes.get_errno(), f"bind {path}: {_errno()}")
    left = []
    for point, opts, _ in _mounts():
        if _under(point, writable) or (_under(point, ["/proc"]) and not _under(point, proc_ro)):
            continue
        if not mount(point, MS_BIND | MS_REMOUNT | MS_RDONLY | sum(_MOUNT_FLAGS.get(o, 0) for o in opts)):
            left.append(f"{point} ({_errno()})")
    return left


def _landlock(writable: list[str]) -> str | None:
    """Landlock (unprivileged, Linux >= 5.13): no writes except beneath ``writable`` (everything)
    and /dev, /proc (writing existing files: device nodes, the process's own /proc files).
    Reading and executing stay allowed. Needs ``no_new_privs``. Returns None or why not."""
    libc = _libc()
    abi = libc.syscall(_LANDLOCK_CREATE_RULESET, None, 0, 1)  # 1 = LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return f"no Landlock ({_errno()})"
    everything = _LL_WRITE_ABI1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    attr = ctypes.c_uint64(everything)  # landlock_ruleset_attr.handled_access_fs
    ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if ruleset < 0:
        return f"landlock_create_ruleset: {_errno()}"
    try:
        files = everything & (_LL_WRITE_FILE | _LL_TRUNCATE)
        for path, access in [(p, everything) for p in writable] + [("/dev", files), ("/proc", files)]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access, fd))  # path_beneath_attr
                if libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, rule, 0) != 0:
                    return f"landlock_add_rule {path}: {_errno()}"
            finally:
                os.close(fd)
        if libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return f"landlock_restrict_self: {_errno()}"
    finally:
        os.close(ruleset)
    return None


def _drop_privileges() -> str:
    """``no_new_privs``; as root also every capability (a root without capabilities keeps file
    ownership but cannot mount, setns, ptrace privileged processes or raise limits)."""
    nnp = _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if os.geteuid() != 0:
        return "privileges: no_new_privs" if nnp else f"privileges: unchanged ({_errno()})"
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    if _libc().capset(header, (ctypes.c_uint32 * 6)()) != 0:
        return f"privileges: capabilities kept (capset: {_errno()})"
    threads = len(os.listdir("/proc/self/task"))  # credentials are per thread
    return "privileges: all capabilities dropped, no_new_privs" + (
        f" (in 1 of {threads} threads)" if threads > 1 else "")


def _isolate_filesystem_and_drop_privileges(setup: WorkerSetup) -> list[str]:
    """A private read-only mount namespace (root), then the privilege drop, then Landlock if there
    is no mount namespace (Landlock needs ``no_new_privs``). Returns the two notes."""
    if sys.platform != "linux":
        return ["filesystem: not isolated (not Linux)"]
    writable = [os.path.realpath(p) for p in (setup.workdir, setup.build_dir, "/dev/shm") if os.path.isdir(p)]
    what = "filesystem: read-only except workdir, build dir and /dev/shm"
    try:
        if os.geteuid() != 0:
            raise PermissionError("not root")
        left = _mount_readonly(writable)
        fs, mount_error = f"{what} (mount namespace)" + (f", left writable: {', '.join(left)}" if left else ""), None
    except OSError as exc:
        fs, mount_error = None, exc
    privileges = _drop_privileges()
    if fs is None:
        why = _landlock(writable)
        fs = (f"{what} (Landlock)" if why is None
              else f"filesystem: not isolated (mount namespace: {mount_error}; {why})")
    return [fs, privileges]


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
    die_with_parent()
    notes = [_join_cgroup(setup.cgroup), _isolate_network()]
    _limit_resources()
    if log_fd is None:  # else the write end of a pipe the parent drains into a capped log
        log_fd = os.open(setup.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    notes += _isolate_filesystem_and_drop_privileges(setup)
    parent_cwd = os.getcwd()
    os.chdir(setup.workdir)
    sys.path[:] = [p for p in sys.path if p not in ("", ".", parent_cwd) and not p.startswith(parent_cwd + os.sep + "tests")]
    env = worker_environment(setup)
    os.environ.clear()
    os.environ.update(env)
    # multiprocessing's sockets (torch passes CPU tensors' fds through them) go in a temp dir that
    # a spawned process inherits from its parent once the parent has one: use the workdir instead
    import multiprocessing

    multiprocessing.current_process()._config["tempdir"] = setup.workdir
    return notes


# Parent side ------------------------------------------------------------------------------

def _own_cgroup() -> str | None:
    """This process's cgroup v2 directory, or None (no cgroup2 mount, not listed)."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next(line.split("::", 1)[1].strip() for line in f if line.startswith("0::"))
        root = next(point for point, _, fstype in _mounts() if fstype == "cgroup2")
    except (OSError, StopIteration):
        return None
    return os.path.join(root, rel.lstrip("/"))


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


def _stopped(pid: int) -> bool:
    """``pid`` is stopped, frozen, a zombie or gone (state from /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"T", b"t", b"Z", b"X")


def _any_thread_stopped(pid: int) -> bool:
    """A thread of ``pid`` is still stopped or frozen (``T``/``t`` in /proc/<pid>/task/*/stat)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t"):
                    return True
        except (OSError, IndexError):
            continue
    return False


def _frozen(cgroup: str) -> bool:
    """``cgroup.events`` still says ``frozen 1``."""
    try:
        with open(os.path.join(cgroup, "cgroup.events")) as f:
            return "frozen 1" in f.read()
    except OSError:
        return False


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (from /proc/*/stat: /proc/*/task/*/children is optional)."""
    kids = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        kids.add(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def _kill_cgroup(path: str, timeout: float = 10.0) -> bool:
    """SIGKILL everything in cgroup ``path`` (``cgroup.kill``, else one by one) and remove it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(os.path.join(path, "cgroup.kill"), "w") as f:
                f.write("1")
        except FileNotFoundError:  # no such cgroup, or Linux < 5.14 (no cgroup.kill)
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except FileNotFoundError:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        except OSError:
            pass
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:  # still populated
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def kill_cgroups(owner_pid: int | None = None) -> None:
    """Kill and remove the cgroups :class:`ProcessJail` made in process ``owner_pid`` (a worker
    owner that died before it could close them), or by default in every process that no longer
    exists; looked up next to this process's own cgroup."""
    base = _own_cgroup()
    try:
        names = os.listdir(base) if base else []
    except OSError:
        return
    for name in names:
        owner = re.fullmatch(r"kbv-(\d+)-\d+", name)
        if owner and (int(owner[1]) == owner_pid if owner_pid is not None
                      else not os.path.exists(f"/proc/{owner[1]}")):
            _kill_cgroup(os.path.join(base, name))


class ProcessJail:
    """The parent side of process containment: :meth:`kill` ends every process a worker started.

    On Linux it makes a cgroup v2 ``kbv-<pid>-<n>`` next to this process's own cgroup when the
    hierarchy is writable (the worker joins it in :func:`apply_sandbox`; ``cgroup.kill`` reaches
    processes that left the session and were re-parented anywhere), after killing those of owners
    that no longer exist. In every case this process
    becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): orphans of its descendants are
    re-parented to it, and :meth:`kill` SIGKILLs and reaps each child it did not have when the
    worker started (:meth:`watch`). Both do nothing elsewhere.
    """

    _serial = itertools.count(1)

    def __init__(self, *, cgroup: bool = True):
        self.cgroup: str | None = None
        self._known: set[int] = set()
        self._linux = sys.platform == "linux"
        if not self._linux:
            return
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        base = _own_cgroup() if cgroup else None
        if base is not None:
            kill_cgroups()  # left by owners that died with their orchestrator
            path = os.path.join(base, f"kbv-{os.getpid()}-{next(self._serial)}")
            try:
                os.mkdir(path)
                self.cgroup = path
            except OSError:
                pass

    def watch(self) -> None:
        """Call right after the worker started: :meth:`kill` leaves this process's children of
        now alone (the worker included: its owner kills and reaps it)."""
        if self._linux:
            self._known = _children(os.getpid())

    def pause(self, pid: int, settle_s: float = 0.1) -> tuple[int, ...]:
        """Stop the worker ``pid`` and every process it started (its descendants, and orphans
        re-parented to this process): SIGSTOP, plus ``cgroup.freeze`` where the jail has a cgroup.
        Nothing of the candidate runs until :meth:`resume`. Used while the baselines are timed: a
        native thread that burned the CPU whenever forward was idle slowed the eager baselines
        3-4x and earned a cheat a PASS at 4-5x. Waits up to
        ``settle_s`` for the processes to show as stopped. Returns the pids to resume.
        """
        pids = {pid}
        if self._linux:
            todo = [pid, *(_children(os.getpid()) - self._known - {pid})]
            while todo:
                p = todo.pop()
                pids.add(p)
                todo.extend(_children(p) - pids)
        for p in pids:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        deadline = time.monotonic() + settle_s
        while self._linux and time.monotonic() < deadline and not all(_stopped(p) for p in pids):
            time.sleep(0.001)
        if self.cgroup is not None:  # anything else in the jail's cgroup (a process that left the tree)
            _write(os.path.join(self.cgroup, "cgroup.freeze"), "1")
        return tuple(sorted(pids))

    def resume(self, pids: Iterable[int], settle_s: float = 0.05) -> None:
        """Undo :meth:`pause`, and wait up to ``settle_s`` until every thread of ``pids`` runs
        again (thawing a cgroup is asynchronous: a timed call started before its threads thaw
        waits for them, and an honest multithreaded kernel measured 10x slower)."""
        pids = tuple(pids)
        if self.cgroup is not None:
            _write(os.path.join(self.cgroup, "cgroup.freeze"), "0")
        for p in pids:
            try:
                os.kill(p, signal.SIGCONT)
            except OSError:
                pass
        deadline = time.monotonic() + settle_s
        while self._linux and time.monotonic() < deadline and (
                any(_any_thread_stopped(p) for p in pids) or (self.cgroup is not None and _frozen(self.cgroup))):
            time.sleep(0.0005)

    def kill(self, timeout: float = 10.0) -> bool:
        """Kill everything the worker started. True when all of it is gone within ``timeout``."""
        if not self._linux:
            return True
        done = self.cgroup is None or _kill_cgroup(self.cgroup, timeout)
        deadline = time.monotonic() + timeout
        while strays := _children(os.getpid()) - self._known:
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, os.WNOHANG)
                except OSError:  # gone, or not ours any more
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return done
