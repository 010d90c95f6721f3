"""The handle of one candidate worker (untrusted): spawned sandboxed, every call with a deadline,
stopped while the baselines run, killed with everything it started."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from kbv.processes.handles import (WorkerDied, WorkerTimeout, deadline, environ_set, kill_group, plain_main,
    spawn_context, tell_sentinel, wait_readable)
from kbv.processes.jail import ProcessJail
from kbv.processes.logs import CappedLog
from kbv.processes.reply_decoding import decode_reply
from kbv.processes import custody, request_trace, scratch, zygote
from kbv.sandbox import protocol
from kbv.sandbox.confinement import InheritedFd, WorkerSetup
from kbv.sandbox.worker_env import worker_environment
from kbv.sandbox.limits import max_tasks, shm_quota_bytes, tmp_quota_bytes
from kbv.sandbox.worker import candidate_main


#: candidate workers of this process not yet closed: a worker started while another is open is
#: spared by the other's jail (each jail kills only what its own worker started).
_OPEN: set = set()


def start_zygote(device: str) -> "zygote.Zygote | None":
    """This process's candidate-worker zygote for ``device`` (:mod:`kbv.processes.zygote`), started
    now if there is none: it preloads while the caller goes on (call it from the main thread, the
    zygote dies with the thread that started it). The open workers' jails spare a new one."""
    return zygote.zygote_for(device, on_start=lambda pid: [w.jail.spare(pid) for w in list(_OPEN)])


class CandidateProcess:
    """A fresh spawned candidate worker. Use as a context manager; on exit it is killed with every
    process it started, even ones that left its session (:class:`kbv.processes.jail.ProcessJail`: this
    process becomes a child subreaper), and its scratch tmpfs and what it left in ``/dev/shm`` are
    removed (:mod:`kbv.processes.scratch`). Several may be open at once (the build pool's parallel
    loads, the next job's worker started early): none of their jails kills another's worker."""

    def __init__(self, *, device: str, build_dir: Path, preload: tuple[str, ...] = ()):
        # the zygote exists before this worker's jail, which leaves this process's children of now
        # alone; one started now is spared by the other open workers' jails too
        z = start_zygote(device)
        # the log here, the worker's cwd in a tmpfs of bounded size below it (kbv.processes.scratch)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{scratch.WORKDIR_PREFIX}{os.getpid()}-"))
        self.scratch = self.workdir / scratch.SCRATCH_NAME
        self.scratch.mkdir()
        scratch_note = scratch.mount_scratch(str(self.scratch), tmp_quota_bytes())
        self.log_path = self.workdir / "worker.log"
        self.log = CappedLog(self.log_path)
        self.last_pause_ms = self.last_resume_ms = float("nan")  # the last stop's and resume's cost (ms)
        # a uid of its own on cpu only: CUDA IPC maps no buffer across uids ("mapping of buffer
        # object failed" on the H200, both ways), so on cuda the worker keeps kbv's uid and the
        # jail has none to kill by or sweep /dev/shm by (its sweep takes what appeared instead)
        self.jail = ProcessJail(own_uid=device == "cpu")
        #: /dev/shm before the worker started: without a uid of its own, what appears is the
        #: worker's (it writes the host's /dev/shm unless it is on cpu as root: a private one)
        self._shm_before = scratch.shm_entries() if device != "cpu" or os.geteuid() != 0 else None
        self._live = self._paused = False  #: candidate code loaded / its tree stopped (custody)
        self.setup = WorkerSetup(workdir=str(self.scratch), build_dir=str(build_dir),
                                 log_path=str(self.log_path), device=device, cgroup=self.jail.cgroup,
                                 uid=self.jail.uid,
                                 shm_bytes=shm_quota_bytes(), max_tasks=max_tasks(), preload=tuple(preload),
                                 parent_notes=(*self.jail.notes, scratch_note))
        ctx = spawn_context()
        self.conn, child = ctx.Pipe(duplex=True)
        #: how the worker started: forked from this process's zygote (torch and the harness already
        #: imported, kbv.processes.zygote) or spawned fresh where there is none
        self.started_by = "spawn"
        try:
            self.proc: Any = None
            if z is not None:
                try:
                    self.proc = z.fork(self.setup, child.fileno(), self.log.write_fd)
                    self.started_by = "zygote"
                except RuntimeError:
                    zygote.give_up(z)
            if self.proc is None:
                self.proc = ctx.Process(target=candidate_main, args=(child, self.setup, InheritedFd(self.log.write_fd)),
                                        daemon=False, name="kbv-candidate")
                # /proc/<worker>/environ holds no secrets; the worker never runs the parent's script
                with environ_set(worker_environment(self.setup)), plain_main():
                    self.proc.start()
        except BaseException:
            self.jail.kill()
            self.log.close()
            scratch.release_scratch(str(self.scratch))
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        os.close(self.log.write_fd)  # the worker holds the only write end: EOF when it is gone
        self.log.write_fd = -1
        self.jail.watch()
        for other in _OPEN:
            other.jail.spare(self.proc.pid)
        _OPEN.add(self)
        tell_sentinel(self.proc.pid)
        child.close()

    def log_tail(self) -> str:
        """The end of the worker's output, with a line naming the log cap when output was dropped."""
        return self.log.tail()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing of the candidate runs inside (:meth:`kbv.processes.jail.ProcessJail.pause`): wrap the
        timing of the baselines, so the candidate's own threads or processes cannot slow them."""
        pids = self._pause() if self.proc.is_alive() and self.proc.pid else ()
        try:
            yield
        finally:
            self._resume(pids)

    def tree_cpu(self) -> tuple[dict, dict]:
        """CPU time (ms) of the worker and every process it started (its jail's tree,
        :meth:`kbv.processes.jail.ProcessJail.tree`): per live thread ``{(pid, tid): ms}``
        (``/proc/<pid>/task/<tid>/schedstat``, ns resolution), and per process (its threads and its
        waited-for children) ``{pid: ms}`` plus ``"worker"`` (the worker process's own figure, None
        when /proc does not say) and ``"cgroup"`` (the jail's cgroup, every process that ran in it;
        None without one). :func:`cpu_spent_ms` of two readings is what the tree ran in between."""
        from kbv.processes import procfs

        pid = self.proc.pid
        threads, procs = {}, {}
        for p in sorted(self.jail.tree(pid)) if pid else ():
            threads.update({(p, tid): ms for tid, ms in procfs.thread_cpu_ms(p).items()})
            ms = procfs.process_and_children_cpu_ms(p)
            if ms is not None:
                procs[p] = ms
        procs["worker"] = procs.get(pid)
        procs["cgroup"] = procfs.cgroup_cpu_ms(self.jail.cgroup)
        return threads, procs

    def call(self, request: Any, *, phase: str, timeout: float) -> Any:
        """Send a request and return the decoded reply.

        Raises:
            WorkerTimeout: no reply within ``timeout`` seconds (the worker is killed).
            WorkerDied: the worker exited or was killed by a signal.
            protocol.ProtocolError: the reply is not a well-formed protocol message.
        """
        self.send(request, phase=phase)
        return self.receive(phase=phase, timeout=timeout)

    @contextmanager
    def held_call(self, request: Any, *, phase: str, timeout: float) -> Iterator[Any]:
        """:meth:`call`, with the worker and everything it started stopped from the moment its
        reply is decoded until the block ends: what the reply shares (output memory, CUDA IPC
        handles) is read by the trusted side with nothing of the candidate's running to change it.
        (Decoding needs the worker: shared cpu memory comes through its file-descriptor sharer;
        between its reply and the stop it runs for the time of one decode.) Same errors as
        :meth:`call`."""
        self.send(request, phase=phase)
        pids: tuple = ()
        try:
            yield self.receive(phase=phase, timeout=timeout, hold=True)
        finally:
            pids, self._held = getattr(self, "_held", ()), ()
            if pids:
                self._resume(pids)

    def send(self, request: Any, *, phase: str) -> None:
        """The first half of :meth:`call` (several workers can then work at once).

        Raises:
            WorkerDied: the worker exited or was killed by a signal.
        """
        if not self.proc.is_alive():
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note())
        if isinstance(request, protocol.Load):  # from here on the candidate's code runs in it
            self._custody(True, self._paused)
        if self._live:
            custody.phase(phase)
        request_trace.record("send", pid=self.proc.pid, req=type(request).__name__, phase=phase)
        try:
            protocol.send(self.conn, request)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self.proc.join(timeout=5)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note()) from None

    def receive(self, *, phase: str, timeout: float, hold: bool = False) -> Any:
        """The second half of :meth:`call`: the decoded reply to the request :meth:`send` sent
        (same errors as :meth:`call`). ``hold``: stop the worker's tree once the reply is decoded,
        before it is used (:meth:`held_call` resumes it)."""
        if not wait_readable(self.conn, self.proc, timeout):
            if self.proc.is_alive():
                kill_group(self.proc)
                raise WorkerTimeout(phase, timeout, self.log_tail())
            self.proc.join(timeout=5)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note())
        t_readable = time.monotonic()
        try:
            data = self.conn.recv_bytes(protocol.MAX_REPLY_BYTES)
        except (EOFError, ConnectionResetError, OSError):
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                kill_group(self.proc)
            raise WorkerDied(phase, self.proc.exitcode, self.log_tail(), self.log.note()) from None
        # shared cpu memory arrives through the worker's fd sharer, a listener in the candidate's
        # process: the decode has the call's deadline (a connection the candidate holds open to its
        # own sharer made the fetch wait forever, row t26-jam-fd-sharer)
        with deadline(timeout, lambda: kill_group(self.proc)) as expired:
            try:
                reply = decode_reply(data)
            except Exception:
                if not expired.is_set():
                    raise
                reply = None
        if expired.is_set():
            self.proc.join(timeout=5)
            raise WorkerTimeout(f"{phase} (fetching the reply's shared memory)", timeout, self.log_tail())
        if request_trace.enabled():
            request_trace.record("reply", pid=self.proc.pid, reply=type(reply).__name__, t_readable=t_readable,
                                 **request_trace.resident(self.proc.pid))
        if hold and self.proc.is_alive() and self.proc.pid:
            self._held = self._pause()
        return reply

    def _custody(self, live: bool, paused: bool) -> None:
        """Tell :mod:`kbv.processes.custody` whether this worker's candidate code can run now."""
        before = self._live and not self._paused
        self._live, self._paused = live, paused
        if (live and not paused) != before:
            custody.running(-1 if before else +1)

    def _pause(self) -> tuple[int, ...]:
        self._custody(self._live, True)
        t0 = time.perf_counter()
        pids = self.jail.pause(self.proc.pid)
        self.last_pause_ms = (time.perf_counter() - t0) * 1e3  # what a stop costs (the bound pass's evidence)
        return pids

    def _resume(self, pids: tuple[int, ...]) -> None:
        t0 = time.perf_counter()
        self.jail.resume(pids)
        self.last_resume_ms = (time.perf_counter() - t0) * 1e3
        self._custody(self._live, False)

    def close(self) -> None:
        _OPEN.discard(self)
        if self.proc.is_alive():
            try:
                protocol.send(self.conn, protocol.Shutdown())
            except OSError:
                pass
            self.proc.join(timeout=5)
        kill_group(self.proc)
        self.jail.kill()
        self._custody(False, False)
        tell_sentinel(-self.proc.pid if self.proc.pid else None)
        self.log.close()
        self.conn.close()
        scratch.release_scratch(str(self.scratch))
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.jail.uid is not None or self._shm_before is not None:  # by its uid, else what appeared
            # reaped first: the sweep by what appeared leaves alone names a live process maps.
            # (t26-shm-flood-cuda left its files on the H200 while the jail had a uid the cuda
            # worker did not take: the sweep by uid matched none of them)
            self.proc.join(timeout=5)
            scratch.sweep_shm(self._shm_before or {}, self.jail.uid)

    def __enter__(self) -> "CandidateProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cpu_spent_ms(before: tuple[dict, dict], after: tuple[dict, dict]) -> float:
    """What the tree ran between two :meth:`CandidateProcess.tree_cpu` readings (ms): the greater of
    its live threads' and its cgroup's differences (a thread that ended in between leaves the sum of
    live threads; the cgroup keeps it)."""
    threads = max(0.0, sum(after[0].values()) - sum(before[0].values()))
    g0, g1 = before[1].get("cgroup"), after[1].get("cgroup")
    return max(threads, g1 - g0 if g0 is not None and g1 is not None else 0.0)
