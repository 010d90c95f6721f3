"""The candidate's own user id, its process count and its quotas (taxonomy 26, worker half).

Signals: Linux lets a process signal another only when its real or effective uid is the target's
real or saved uid, or with ``CAP_KILL`` (kill(2)). A candidate that runs as kbv's user can kill
the reference worker (its parent) or the orchestrator, and stop them; on cpu as root kbv therefore
moves the candidate worker to a uid of its own (:func:`pick_uid`, chosen by the parent) before any
candidate code runs (:func:`switch_uid`): its ``kill()`` of a kbv process fails with ``EPERM``.
The uid switch is chosen over a PID namespace because legacy CUDA IPC needs both workers in one
PID namespace; but CUDA IPC maps no buffer across uids either (the H200, 2026-12-02), so a cuda
worker keeps kbv's uid (docs/architecture.md, "Trust boundary details" and "Known gaps").

All its uids change (real, effective, saved and filesystem: the programs it runs, a compiler
say, get them all at ``execve``), and it keeps one capability, ``CAP_DAC_OVERRIDE``, with
``SECBIT_NO_SETUID_FIXUP`` so that ``access()`` honours it too: files open as they did for root
(the toolchain under a 0700 home, the build cache, the reference worker's CUDA IPC
reference-count files in ``/dev/shm``, which torch creates with mode 0600 and the candidate must
open), the read-only mounts stay what stops writes, and kbv's processes stay out of reach:
signals need ``CAP_KILL``, ptrace and ``/proc/<pid>/mem`` need ``CAP_SYS_PTRACE``. Every other
capability is dropped (:func:`kbv.sandbox.confinement._drop_privileges`), so the candidate cannot
change its uids back.

Process count: ``RLIMIT_NPROC`` counts the tasks (processes and threads) of the real uid and is
not enforced for root, so it bounds a fork bomb once the uid is the candidate's own
(:data:`MAX_TASKS`); without the switch it is set to the user's task count plus that margin. The
parent's cgroup adds ``pids.max`` where the pids controller is delegated
(:class:`kbv.processes.jail.ProcessJail`).

``/dev/shm``: on cpu the candidate gets a private tmpfs of :func:`shm_quota_bytes` there (its
mount namespace: the files die with it). Torch shares cpu tensors between the workers by passing
file descriptors, so no name has to be seen by both. On cuda the host's ``/dev/shm`` stays: torch
opens the CUDA IPC reference counters of the other worker by name; what the candidate leaves
there is removed after its verdict (:mod:`kbv.processes.scratch`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

#: tasks (processes + threads) a candidate may have at once (``RLIMIT_NPROC``, ``pids.max``).
#: Torch starts a thread per core, a C++ build ``MAX_JOBS`` compilers, Triton and Inductor a few
#: workers; 4096 leaves room for all of them on a 256-core host and stops a fork bomb long before
#: a host's ``pid_max`` (32768 at the least). kbv choice; ``KBV_CANDIDATE_MAX_TASKS`` overrides it.
MAX_TASKS = 4096
#: the candidate's tmpfs sizes (``/dev/shm`` on cpu, its scratch directory) as a share of host
#: memory: tmpfs lives in memory, a quarter of it leaves the host working. Honest candidates write
#: their cpu outputs there (/dev/shm) and compiler temporaries (scratch), well below this.
#: ``KBV_CANDIDATE_SHM_BYTES`` / ``KBV_CANDIDATE_TMP_BYTES`` override them (tests use small ones).
TMPFS_SHARE = 0.25
#: where :func:`pick_uid` starts looking in the largest range of ``/proc/self/uid_map``: far from
#: the uids a distribution hands out (below 60000) and from ``nobody`` (65534).
_UID_FLOOR = 1 << 30

PR_SET_SECUREBITS = 28
#: ``SECBIT_NO_SETUID_FIXUP``: the capabilities survive the uid change (all but
#: :data:`CAP_DAC_OVERRIDE` are dropped right after), and ``access()`` keeps them (access(2)).
SECBIT_NO_SETUID_FIXUP = 1 << 2
CAP_DAC_OVERRIDE = 1
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
CLONE_NEWIPC = 0x08000000


def env_int(name: str, default: int) -> int:
    """A positive integer from environment variable ``name``, else ``default``.

    Raises:
        ValueError: the variable is set but not a positive integer (one line naming it).
    """
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{name}={raw!r}: not a positive integer")
    return value


def host_memory_bytes() -> int:
    """``MemTotal`` of /proc/meminfo in bytes (0 where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def max_tasks() -> int:
    """:data:`MAX_TASKS`, or ``KBV_CANDIDATE_MAX_TASKS`` (ValueError when that is not a positive integer)."""
    return env_int("KBV_CANDIDATE_MAX_TASKS", MAX_TASKS)


def shm_quota_bytes() -> int:
    """Size of the candidate's private ``/dev/shm`` (bytes): :data:`TMPFS_SHARE` of host memory
    (1 GiB where that cannot be read), or ``KBV_CANDIDATE_SHM_BYTES``."""
    return env_int("KBV_CANDIDATE_SHM_BYTES", int(host_memory_bytes() * TMPFS_SHARE) or 1 << 30)


def tmp_quota_bytes() -> int:
    """Size of the candidate's scratch directory (its cwd, ``HOME`` and ``TMPDIR``), bytes: as
    :func:`shm_quota_bytes`, or ``KBV_CANDIDATE_TMP_BYTES``."""
    return env_int("KBV_CANDIDATE_TMP_BYTES", int(host_memory_bytes() * TMPFS_SHARE) or 1 << 30)


def parse_uid_map(text: str) -> list[tuple[int, int]]:
    """``(first uid, count)`` of each line of a ``/proc/<pid>/uid_map`` (its first and third
    columns: the ids this user namespace can use). Lines that are not three integers are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            out.append((int(parts[0]), int(parts[2])))
    return out


def pick_uid(uid_map: list[tuple[int, int]], seed: int, taken: frozenset[int] = frozenset()) -> int | None:
    """A uid for one candidate worker: in the largest range of ``uid_map`` (:func:`parse_uid_map`),
    from :data:`_UID_FLOOR` (or the upper half of a range that ends below it) to below 2**31 (some
    tools read uids as signed), not in ``taken`` (the uids of /etc/passwd), chosen by ``seed``
    (the parent's pid and a serial: two workers alive at once get different uids unless the range
    is smaller than their seeds). None when the range has fewer than 2 ids to offer."""
    if not uid_map:
        return None
    first, count = max(uid_map, key=lambda r: r[1])
    end = min(first + count, (1 << 31) - 1)
    low = max(first, _UID_FLOOR)
    if end - low < 2:
        low = first + (end - first) // 2
    span = end - low
    if span < 2:
        return None
    for step in range(min(span, 64)):
        uid = low + (seed + step) % span
        if uid not in taken:
            return uid
    return None


def passwd_uids(path: str = "/etc/passwd") -> frozenset[int]:
    """The uids named in ``path`` (empty where it cannot be read)."""
    try:
        with open(path) as f:
            return frozenset(int(p[2]) for line in f if len(p := line.split(":")) > 2 and p[2].isdigit())
    except OSError:
        return frozenset()


def choose_uid(seed: int) -> int | None:
    """:func:`pick_uid` for this host (this process's uid map and /etc/passwd); None where the
    process is not root on Linux (it cannot change uid) or ``KBV_CANDIDATE_UID=off`` (an operator's
    way out should a driver refuse the candidate's uid; the verdict's sandbox notes say so)."""
    if sys.platform != "linux" or os.geteuid() != 0 or os.environ.get("KBV_CANDIDATE_UID", "").lower() == "off":
        return None
    try:
        with open("/proc/self/uid_map") as f:
            uid_map = parse_uid_map(f.read())
    except OSError:
        uid_map = [(0, 1 << 32)]
    return pick_uid(uid_map, seed, passwd_uids())


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
    return libc


def switch_uid(uid: int | None, parent_pid: int, why_not: str = "not root") -> str:
    """Become ``uid`` (real, effective, saved and filesystem uid), keeping the capabilities for
    :func:`kbv.sandbox.confinement._drop_privileges`, then restore what a credential change resets:
    not dumpable and the parent-death signal (prctl(2)); exits at once if the parent died
    meanwhile. Call while root and single-threaded. ``uid`` None: nothing changes, ``why_not``
    says why in the note. Returns the note for the verdict's evidence."""
    if uid is None:
        return f"signals: same uid as kbv ({why_not}): the candidate can signal kbv's processes"
    libc = _libc()
    if libc.prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) != 0:
        return f"signals: same uid as kbv (securebits: {os.strerror(ctypes.get_errno())})"
    try:
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        return f"signals: same uid as kbv (setresuid {uid}: {exc.strerror})"
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    import signal

    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)
    return f"signals: own uid {uid} (kbv's processes refuse its signals)"


def limit_tasks(tasks: int, switched: bool) -> str:
    """Set ``RLIMIT_NPROC`` (see the module doc) and return the note. ``switched``: the process
    runs as its own uid (:func:`switch_uid`), so the limit is ``tasks`` (:func:`max_tasks`); else
    the tasks its user has now plus that (root ignores the limit: noted)."""
    import resource

    limit = tasks
    if not switched:
        if os.geteuid() == 0:
            return "processes: no task limit of its own (root ignores RLIMIT_NPROC; cgroup pids.max if delegated)"
        limit += user_tasks(os.getuid())
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    except (ValueError, OSError) as exc:
        return f"processes: no task limit (RLIMIT_NPROC: {exc})"
    return f"processes: at most {limit} tasks (RLIMIT_NPROC" + (")" if switched else ", shared with its user)")


def user_tasks(uid: int) -> int:
    """Tasks (threads included) whose real uid is ``uid``, from /proc/*/status."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return total


#: runtime folders hidden from a cpu candidate under an empty tmpfs: the host's unix sockets (a
#: read-only mount does not stop a ``connect()``, and ``CAP_DAC_OVERRIDE`` passes a socket's mode)
#: and the secrets a container runtime puts there (red team, 2026-12-05).
RUNTIME_DIRS = ("/run", "/var/run")


def hide_runtime_dirs(writable: list[str]) -> list[str]:
    """In the worker's private mount namespace (root): an empty, read-only tmpfs mounted on each of
    :data:`RUNTIME_DIRS` that exists (its real path, once) and holds none of ``writable``. Returns
    the folders hidden."""
    hidden: list[str] = []
    for d in RUNTIME_DIRS:
        real = os.path.realpath(d)
        if real in hidden or not os.path.isdir(real) or any(w == real or w.startswith(real + "/") for w in writable):
            continue
        if _libc().mount(b"tmpfs", real.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                         b"size=4k,mode=755") == 0:
            hidden.append(real)
    return hidden


def private_shm(size_bytes: int) -> str:
    """Mount a tmpfs of ``size_bytes`` on ``/dev/shm`` (this process's private mount namespace,
    root): the candidate's shared-memory files are bounded and die with the namespace. Returns the
    note."""
    libc = _libc()
    opts = f"size={size_bytes},mode=1777".encode()
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        return (f"/dev/shm: the host's (tmpfs: {os.strerror(ctypes.get_errno())}); the files of the candidate's "
                "uid are removed after the verdict")
    return f"/dev/shm: private tmpfs of {size_bytes / 2**20:.0f} MiB"


def isolate_ipc(device: str) -> str:
    """On cpu, a new IPC namespace (Linux, root): System V segments, semaphores and message queues
    the candidate makes are freed with it. On cuda the host's stays (whether CUDA IPC works across
    IPC namespaces is unverified); the parent removes the System V objects of the candidate's uid
    after its verdict (:func:`kbv.processes.scratch.remove_sysv`)."""
    if device != "cpu":
        return ("System V IPC: the host's (cuda); the objects of the candidate's uid are removed after the verdict"
                if os.geteuid() == 0 else "System V IPC: the host's (cuda, not root)")
    if sys.platform != "linux" or os.geteuid() != 0:
        return "System V IPC: the host's (needs root on Linux)"
    if _libc().unshare(CLONE_NEWIPC) != 0:
        return f"System V IPC: the host's (unshare: {os.strerror(ctypes.get_errno())})"
    return "System V IPC: own namespace (freed with it)"

