"""The candidate worker's sandbox (taxonomy 26, sandbox tampering): no network, a read-only
filesystem but for its workdir and build dir, no process outliving it, no secret in its
environment, and a candidate that kills the reference worker ends as a verdict.

Each probe computes a right ReLU only when the attack failed, so right outputs prove the
isolation (the static scan may still flag the probe's ``os``/``ctypes`` calls: only the outputs
are judged here)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, problem
from kbv.intake.candidates import build_dir, load_candidate
from kbv.model.records import Status

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="Linux isolation")

NET_PROBE = '''
"""Returns the right answer only if it can NOT reach a listener on 127.0.0.1:{port}."""
import os, socket
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            return torch.zeros_like(x)  # network reachable: wrong on purpose
        except OSError:
            return x.clamp(min=0)
'''

PTRACE_PROBE = '''
\"\"\"Right only if it can NOT read kbv's other processes: the reference worker that started it (its
parent, which holds the secret seeds), the orchestrator above it, or its siblings (the sentinel,
pre-started candidate workers), through ptrace, /proc/<pid>/mem or process_vm_readv, and if
it is not dumpable itself (so that no other candidate worker reads it).\"\"\"
import ctypes, os
import torch
import torch.nn as nn

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def _ppid(pid):
    with open(f"/proc/{{pid}}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])

def _targets():
    me, parent = os.getpid(), os.getppid()
    out = {{parent, _ppid(parent)}}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                if _ppid(int(name)) == parent:
                    out.add(int(name))
            except OSError:
                pass
    return out - {{0, 1}}

def _readable(pid):
    got = []
    try:
        with open(f"/proc/{{pid}}/maps") as f:
            line = next(l for l in f if l.split()[1].startswith("r"))
        addr = int(line.split("-")[0], 16)
    except (OSError, StopIteration):
        addr = None
    if addr is not None:
        try:
            with open(f"/proc/{{pid}}/mem", "rb") as f:
                f.seek(addr)
                if f.read(8):
                    got.append("mem")
        except OSError:
            pass
        buf = ctypes.create_string_buffer(8)
        local, remote = iovec(ctypes.addressof(buf), 8), iovec(addr, 8)
        if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 8:
            got.append("process_vm_readv")
    if libc.ptrace(0x4206, pid, None, None) == 0:  # PTRACE_SEIZE
        got.append("ptrace")
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return got

LEAKS = {{pid: _readable(pid) for pid in _targets()}}
LEAKS = {{pid: how for pid, how in LEAKS.items() if how}}
if libc.prctl(3, 0, 0, 0, 0) != 0:  # PR_GET_DUMPABLE: this worker is open to every other candidate worker
    LEAKS[os.getpid()] = ["dumpable"]
if LEAKS:
    print("kbv process readable:", LEAKS)

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) if LEAKS else x.clamp(min=0)  # wrong on purpose when it could read
'''

ENV_PROBE = '''
"""Right only in a fresh, empty kbv temp dir, with no secret in os.environ, /proc/self/environ
(the environment the process was started with) or any ancestor's /proc/<pid>/environ."""
import os, sys
import torch
import torch.nn as nn

def _ancestors():
    pid = os.getppid()
    while pid > 1:
        yield pid
        try:  # hidden from it (hidepid=2): nothing of that process to read
            with open(f"/proc/{{pid}}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except OSError:
            return

def _leaks():
    seen = [" ".join(os.environ.values()).encode()]
    for pid in ("self", *_ancestors()):
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as f:
                seen.append(f.read())
        except OSError:
            pass
    return any({secret!r}.encode() in s or b"KBV_CACHE_DIR" in s for s in seen)

class ModelNew(nn.Module):
    def forward(self, x):
        here = os.getcwd()
        ok = os.path.basename(here).startswith("kbv-cand-") and "pyproject.toml" not in os.listdir(here)
        ok = ok and "" not in sys.path and os.environ["HOME"] == here and not _leaks()
        return x.clamp(min=0) if ok else torch.zeros_like(x)
'''

WRITE_PROBE = '''
"""Right only if it can write its workdir and build dir but nothing else: not kbv's own package,
not a store file found elsewhere (directly or through /proc/1/root), not $HOME, and it cannot
remount / read-write."""
import ctypes, os
import kbv
import torch
import torch.nn as nn

OUTSIDE = {outside!r} + [os.path.join(os.path.dirname(kbv.__file__), "planted_by_candidate.py")]

def _writes(path):
    try:
        with open(path, "ab") as f:
            f.write(b"pwned")
        return True
    except OSError:
        return False

def _escaped():
    wrote = [p for p in OUTSIDE + ["/proc/1/root" + p for p in OUTSIDE] if _writes(p)]
    libc = ctypes.CDLL(None, use_errno=True)
    remounted = libc.mount(None, b"/", None, 0x20 | 0x1000, None) == 0  # MS_REMOUNT | MS_BIND, read-write
    build = os.path.dirname(os.environ["TORCH_EXTENSIONS_DIR"])
    inside = _writes(os.path.join(os.getcwd(), "ok")) and _writes(os.path.join(build, "ok"))
    return bool(wrote) or remounted or not inside

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) if _escaped() else x.clamp(min=0)
'''

ESCAPE_PROBE = '''
"""Leaves a sleeper that left the worker's session (setsid + double fork, SIGTERM/SIGHUP ignored)
and writes its pid into the build dir. Right outputs: only its survival is under test."""
import os, signal, time
import torch.nn as nn

def _leave_a_sleeper(pidfile):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            time.sleep(600)
        os._exit(0)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _leave_a_sleeper(os.path.join(os.path.dirname(os.environ["TORCH_EXTENSIONS_DIR"]), "sleeper.pid"))

    def forward(self, x):
        return x.clamp(min=0)
'''

KILL_PARENT = '''
import ctypes, os, signal
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.CDLL(None).kill(os.getppid(), int(signal.SIGKILL))  # the reference worker
        return x.clone()  # wrong: INCORRECT is this kernel's own verdict
'''

RELU = '''
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)
'''


FSIZE_PROBE = '''
"""Right only where the largest file the worker may write is at least its private /dev/shm: kbv
shares its output slot buffer there (twice one call's outputs, over 1 GiB for an output of 512 MiB)."""
import os, resource
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        st = os.statvfs("/dev/shm")
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        self.ok = soft == resource.RLIM_INFINITY or soft >= st.f_blocks * st.f_frsize

    def forward(self, x):
        return torch.relu(x) if self.ok else x
'''


def _evaluate(evaluator, config, path: Path, source: str):
    path.write_text(source)
    return evaluator.evaluate(problem("level1/1_Small_ReLU.py"), load_candidate(path), config)


def _assert_right(v) -> None:
    """Every judged input set passed: the probe's attack failed (PASS unless a scan flags it)."""
    judged = [r for r in v.input_sets if not r.dropped]
    assert judged and all(r.passed for r in judged) and v.status in (Status.PASS, Status.SHORTCUT, Status.HACK), \
        v.message


def _gone(pid: int, timeout: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (gone or a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="network isolation needs root on Linux")
def test_candidate_has_no_network(tmp_path, cpu_evaluator, fast_config):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from here...
        v = _evaluate(cpu_evaluator, fast_config, tmp_path / "net_probe.py", NET_PROBE.format(port=port))
    finally:
        listener.close()
    _assert_right(v)  # ...but not from the candidate worker
    assert any("network: isolated" in n for n in v.evidence["sandbox"])


@pytest.mark.e2e
@linux_only
def test_candidate_runs_in_a_fresh_directory_and_sees_no_secret(tmp_path, monkeypatch, fast_config):
    from kbv.batch.evaluator import Evaluator

    secret = "sk-kbv-sandbox-test-0123456789"
    monkeypatch.setenv("KBV_FAKE_API_KEY", secret)  # inherited by the reference worker
    with Evaluator("cpu") as ev:
        v = _evaluate(ev, fast_config, tmp_path / "env_probe.py", ENV_PROBE.format(secret=secret))
    _assert_right(v)


@pytest.mark.e2e
@linux_only
def test_the_workers_file_size_limit_holds_its_private_dev_shm(tmp_path, monkeypatch, fast_config):
    """Regression: on cpu the worker's RLIMIT_FSIZE was 1 GiB whatever its /dev/shm, so the slot
    buffer of a 1 GiB output failed with EFBIG and an honest ReLU got RUNTIME_ERROR ("time raised
    ... File too large"; bench/memory_peaks.py, 2026-12-05)."""
    from kbv.batch.evaluator import Evaluator

    monkeypatch.setenv("KBV_CANDIDATE_SHM_BYTES", str(3 << 30))  # a tmpfs size: no memory is used
    with Evaluator("cpu") as ev:
        v = _evaluate(ev, fast_config, tmp_path / "fsize_probe.py", FSIZE_PROBE)
    _assert_right(v)


@linux_only
def test_candidate_cannot_write_outside_its_workdir_and_build_dir(tmp_path, cpu_evaluator, fast_config):
    store = tmp_path / "batch.db"  # a `kbv run` store it could find through /proc/*/cmdline
    store.write_bytes(b"SQLite format 3\0 verdicts")
    home = Path.home() / ".kbv-sandbox-probe"
    planted = ROOT / "src" / "kbv" / "planted_by_candidate.py"
    try:
        v = _evaluate(cpu_evaluator, fast_config, tmp_path / "write_probe.py",
                      WRITE_PROBE.format(outside=[str(store), str(home), str(tmp_path / "new_file")]))
        assert store.read_bytes() == b"SQLite format 3\0 verdicts"
        assert not planted.exists() and not home.exists() and not (tmp_path / "new_file").exists()
    finally:
        planted.unlink(missing_ok=True)
        home.unlink(missing_ok=True)
    _assert_right(v)
    assert any(n.startswith("filesystem: read-only") for n in v.evidence["sandbox"]), v.evidence["sandbox"]


@linux_only
def test_processes_that_leave_the_session_die_with_the_worker(tmp_path, cpu_evaluator, fast_config):
    cand = tmp_path / "escape_probe.py"
    cand.write_text(ESCAPE_PROBE)
    pidfile = build_dir(load_candidate(cand), "cpu") / "sleeper.pid"
    pidfile.unlink(missing_ok=True)
    v = _evaluate(cpu_evaluator, fast_config, cand, ESCAPE_PROBE)
    pid = int(pidfile.read_text())
    try:
        assert _gone(pid), f"sleeper {pid} outlived the evaluation ({v.evidence.get('sandbox')})"
    finally:
        if not _gone(pid, 0):
            os.kill(pid, signal.SIGKILL)
    _assert_right(v)


_SLEEPER = """
import os, sys, time
if sys.argv[2] != "None":  # a worker joins its cgroup first thing (kbv.sandbox.confinement.apply_sandbox)
    open(os.path.join(sys.argv[2], "cgroup.procs"), "w").write(str(os.getpid()))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(600)
    os._exit(0)
time.sleep(600)
"""

#: a worker owner: starts a "worker" that leaves a setsid, double-forked sleeper behind
_OWNER = """
import os, subprocess, sys, time
from kbv.processes.jail import ProcessJail
jail = ProcessJail(cgroup=sys.argv[2] == "cgroup")
worker = subprocess.Popen([sys.executable, "-c", {sleeper!r}, sys.argv[1], str(jail.cgroup)], start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
jail.watch()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
print(jail.cgroup, flush=True)
if jail.cgroup:
    time.sleep(600)  # the test kills this owner, then sweeps its cgroups from outside
worker.kill()
worker.wait()
print(jail.kill(), flush=True)
""".format(sleeper=_SLEEPER)


def _cgroup_gone(path: str, timeout: float = 5.0) -> bool:
    """True once the cgroup directory ``path`` is removed within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _owner(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    pidfile = tmp_path / "sleeper.pid"
    return subprocess.Popen([sys.executable, "-c", _OWNER, str(pidfile), mode], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}), pidfile


@linux_only
def test_subreaper_kills_what_left_the_session(tmp_path):
    """:class:`kbv.processes.jail.ProcessJail` without a cgroup (in its own process: it becomes a subreaper)."""
    owner, pidfile = _owner(tmp_path, "subreaper")
    out, _ = owner.communicate(timeout=60)
    pid = int(pidfile.read_text())
    try:
        assert out.split() == ["None", "True"] and _gone(pid), f"sleeper {pid} survived: {out}"
    finally:
        if not _gone(pid, 0):
            os.kill(pid, signal.SIGKILL)


@linux_only
def test_cgroup_of_a_dead_owner_is_swept(tmp_path):
    """A worker owner killed before it could close its workers (a candidate can kill the reference
    worker, or the orchestrator): :func:`kbv.processes.jail.kill_cgroups` kills what its workers left."""
    from kbv.processes.jail import kill_cgroups

    owner, pidfile = _owner(tmp_path, "cgroup")
    cgroup = owner.stdout.readline().strip()
    pid = int(pidfile.read_text())
    try:
        if cgroup == "None":
            pytest.skip("no writable cgroup v2 hierarchy")
        owner.kill()
        owner.wait()
        if _gone(pid, 0.2):
            # every ProcessJail sweeps dead owners' cgroups when it starts, so a test running beside
            # this one (pytest -n 2) may have swept it first: fine if the sweep did it, removing the
            # cgroup; a sleeper dead with its cgroup still there died with its owner
            assert _cgroup_gone(cgroup), f"the sleeper died with its owner; its cgroup {cgroup} is still there"
            return
        kill_cgroups()  # every dead owner's (ReferenceProcess names its worker's pid)
        assert _gone(pid) and not os.path.exists(cgroup)
    finally:
        owner.kill()
        owner.communicate()
        if not _gone(pid, 0):
            os.kill(pid, signal.SIGKILL)


@linux_only
def test_landlock_leaves_only_the_given_directories_writable(tmp_path):
    """The non-root fallback of the filesystem isolation, in a separate process."""
    script = textwrap.dedent(f'''
        import os
        from kbv.sandbox import confinement as sandbox
        if sandbox._libc().syscall(sandbox._LANDLOCK_CREATE_RULESET, None, 0, 1) < 1:
            raise SystemExit(77)
        sandbox.prctl(sandbox.PR_SET_NO_NEW_PRIVS, 1)
        assert sandbox._landlock([{str(tmp_path / "rw")!r}]) is None
        open({str(tmp_path / "rw" / "ok")!r}, "w").write("ok")
        open("/dev/null", "w").write("ok")
        for path in ({str(tmp_path / "ro")!r}, {str(tmp_path / "new")!r}):
            try:
                open(path, "w").write("pwned")
            except PermissionError:
                continue
            raise SystemExit(f"wrote {{path}}")
    ''')
    (tmp_path / "rw").mkdir()
    (tmp_path / "ro").write_text("keep")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if out.returncode == 77:
        pytest.skip("no Landlock in this kernel")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ro").read_text() == "keep" and not (tmp_path / "new").exists()
    assert (tmp_path / "rw" / "ok").read_text() == "ok"


@linux_only
def test_candidate_that_kills_the_reference_worker_ends_as_a_verdict(tmp_path, cpu_evaluator, fast_config):
    v = _evaluate(cpu_evaluator, fast_config, tmp_path / "kill_parent.py", KILL_PARENT)
    # never EVAL_ERROR (kbv's failure, retried and left out of the metrics): as root the candidate's
    # own uid makes the kill fail and the wrong kernel is INCORRECT; elsewhere the reference worker
    # dies while candidate code runs, and the candidate is charged (kbv.processes.custody)
    if v.status is Status.CRASH:
        assert "SIGKILL" in v.message and "charged to the candidate" in v.message, v.message
        assert [f.check for f in v.findings] == ["sandbox:reference-killed"] and 26 in v.taxonomy
    else:
        assert v.status is Status.INCORRECT and os.geteuid() == 0, v.message
    _assert_right(_evaluate(cpu_evaluator, fast_config, tmp_path / "relu.py", RELU))  # the evaluator recovered


PAUSE_OWNER = r'''
import os, subprocess, sys, time
from kbv.processes.jail import ProcessJail

def cpu_s(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

burn = "import os, time\nif os.fork() == 0:\n    pass\nwhile True:\n    pass\n"
jail = ProcessJail(cgroup=False)
worker = subprocess.Popen([sys.executable, "-c", burn])
jail.watch()
time.sleep(1.0)
kids = [int(p) for p in open(f"/proc/{worker.pid}/task/{worker.pid}/children").read().split()]
pids = [worker.pid] + kids
stopped = jail.pause(worker.pid)
before = [cpu_s(p) for p in pids]
time.sleep(1.0)
during = [cpu_s(p) - b for p, b in zip(pids, before)]
jail.resume(stopped)
time.sleep(1.0)
after = [cpu_s(p) - b for p, b in zip(pids, before)]
print(sorted(stopped) == sorted(pids), max(during), min(after))
for p in pids:
    os.kill(p, 9)
'''


@linux_only
def test_pause_stops_the_worker_and_what_it_forked():
    """ProcessJail.pause (used while the baselines are timed): a worker and the process it forked
    burn no CPU until resume (a native helper thread burning the CPU between calls slows the
    baselines 3-4x)."""
    out = subprocess.run([sys.executable, "-c", PAUSE_OWNER], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    listed, during, after = out.stdout.split()
    assert listed == "True", out
    assert float(during) <= 0.05 and float(after) >= 0.05, out


_NO_CAPS_VERIFY = """
import sys
from kbv.sandbox.confinement import _drop_privileges
print(_drop_privileges(), file=sys.stderr)  # as root: like any user's run, no process of it has capabilities
import kbv
v = kbv.verify(sys.argv[1], sys.argv[2], {"device": "cpu", "trials": 4, "timing_rounds": 1, "warmup": 1})
judged = [r for r in v.input_sets if not r.dropped]
print(v.status.value, all(r.passed for r in judged) and bool(judged), v.message)
"""


@linux_only
@pytest.mark.e2e
def test_candidate_cannot_read_kbvs_other_processes(tmp_path):
    """Processes of one user are open to each other through ptrace, /proc/<pid>/mem and
    process_vm_readv when neither has capabilities (any non-root user's run) unless the target is
    not dumpable: every kbv process is made undumpable (:func:`kbv.processes.procfs.undumpable`),
    so the candidate reads none of the reference worker (the secret seeds, the reference outputs),
    the orchestrator or the sentinel. Run here in a subprocess without capabilities, since a root
    run's trusted processes keep theirs and the kernel refuses a capless reader for that alone.
    Correct output means every read failed."""
    cand = tmp_path / "ptrace_probe.py"
    cand.write_text(PTRACE_PROBE.format())
    out = subprocess.run([sys.executable, "-c", _NO_CAPS_VERIFY, str(problem("level1/1_Small_ReLU.py").path), str(cand)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr[-3000:]
    status, right, *_ = out.stdout.split()
    assert right == "True", out.stdout + out.stderr[-2000:]


THREADS_PROBE = '''
"""An honest ReLU that appends, for every call, OpenMP's wait policy and torch's intra-op thread
count to {name} in its build directory (TRITON_HOME: one of the places it may write that kbv keeps)."""
import os
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        with open(os.path.join(os.environ["TRITON_HOME"], {name!r}), "a") as f:
            f.write(f"{{os.environ.get('OMP_WAIT_POLICY')}} {{torch.get_num_threads()}}\\n")
        return x.clamp(min=0)
'''


@linux_only
def test_openmp_waits_passive_in_the_candidate_worker(tmp_path, cpu_evaluator, fast_config):
    """Regression: an honest softmax was HACK ``timing:parent-wall`` on a loaded 2-core machine. Its
    worker's CPU time per call (all threads, /proc) is the proof that a clock lies, and OpenMP's pool
    threads spun while a peer waited for a core: 2.0 CPU-ms per call against a 0.18 ms median at
    load 3. Both workers now wait passive (kbv.sandbox.worker_env.WAIT_POLICY), for every call alike:
    no call of the sync pass differs from the others in what the candidate can see."""
    import uuid

    from kbv.intake.candidates import build_dir

    name = f"kbv-threads-{uuid.uuid4().hex}"
    path = tmp_path / "threads_probe.py"
    path.write_text(THREADS_PROBE.format(name=name))
    seen = build_dir(load_candidate(path), "cpu") / name
    try:
        v = _evaluate(cpu_evaluator, fast_config, path, THREADS_PROBE.format(name=name))
        _assert_right(v)
        calls = seen.read_text().split("\n")[:-1]
    finally:
        seen.unlink(missing_ok=True)
    assert "sync_pass" in v.evidence, v.evidence.keys()
    assert len(calls) > 10 and set(calls) == {f"PASSIVE {calls[0].split()[1]}"}, sorted(set(calls))


FD_PROBE = '''
"""Right only if it inherited no descriptor but its standard streams and its request connection: a
pipe it could write to (multiprocessing's resource-tracker pipe, which unlinks every name
registered on it in the host's /dev/shm when kbv exits; the zygote's sentinel) makes it wrong."""
import os
import stat

import torch
import torch.nn as nn

LISTING = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
INHERITED = []
for name in os.listdir(LISTING):
    fd = int(name)
    if fd > 2 and fd != LISTING:
        try:
            INHERITED.append((fd, stat.S_ISFIFO(os.fstat(fd).st_mode)))
        except OSError:
            pass
os.close(LISTING)


class ModelNew(nn.Module):
    def forward(self, x):
        if sum(1 for _, pipe in INHERITED if pipe) > 0 or len(INHERITED) > 1:
            return torch.zeros_like(x)  # a trusted-side descriptor reached the candidate
        return torch.relu(x)
'''


@pytest.mark.e2e
@linux_only
@pytest.mark.parametrize("zygote", ["1", "0"])
def test_candidate_inherits_no_descriptor_of_the_trusted_side(tmp_path, monkeypatch, fast_config, zygote):
    """Red-team helper, 2026-12-05: a forked worker kept the resource tracker's pipe (fd 9) and the
    zygote's sentinel; ``REGISTER:/name:shared_memory`` written to the first had kbv delete a host
    file. Now every descriptor but 0-2 and the request connection is closed before the candidate is
    imported (kbv.sandbox.inherited_fds), forked or spawned."""
    from kbv.batch.evaluator import Evaluator

    monkeypatch.setenv("KBV_ZYGOTE", zygote)
    with Evaluator("cpu") as ev:
        v = _evaluate(ev, fast_config, tmp_path / "fd_probe.py", FD_PROBE)
    _assert_right(v)
    assert any(n.startswith("descriptors: ") for n in v.evidence["sandbox"])
