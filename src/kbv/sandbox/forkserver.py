"""The candidate workers' zygote: a process that has imported torch and kbv's harness once, and
forks each new candidate worker from that state (issue 21: the start-up, 1.3-2.1 s on cpu and
more on cuda, off every job's critical path).

It is spawned by a trusted process (:class:`kbv.processes.zygote.Zygote`) with the candidate
worker's own environment, runs no candidate code, holds nothing of any job (it is given only each
worker's :class:`kbv.sandbox.confinement.WorkerSetup` and its two descriptors), never starts CUDA
(a forked CUDA context is unusable) and forks only while it is single-threaded at the Python level
(torch's OpenBLAS pool, idle, is the only native thread; glibc and OpenBLAS make fork safe for
both). It is not dumpable and dies with its parent.

Each request forks twice: the intermediate child forks the worker and exits at once, so the worker
is re-parented to the trusted process (a child subreaper, :class:`kbv.processes.jail.ProcessJail`)
and becomes its child as a spawned worker is: it waits for it, reads its exit status, and kills it
with its jail. The worker waits until that re-parenting has happened, then runs
:func:`kbv.sandbox.worker.candidate_main`, which applies the sandbox first, as in a spawned one.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import sys
import time
from typing import Any

#: modules imported before the first fork (the harness of kbv.sandbox.worker imports the rest).
PRELOAD = ("torch", "torch.multiprocessing", "kbv.sandbox.worker", "kbv.sandbox.call_probes",
           "kbv.sandbox.numeric_flags", "kbv.sandbox.peak_memory", "kbv.sandbox.kernels", "kbv.sandbox.pointers",
           "kbv.sandbox.profiling", "kbv.sandbox.protocol", "kbv.sandbox.timer", "kbv.sandbox.guard", "kbv.sandbox.op_kernels",
           "kbv.sandbox.pickling", "kbv.sandbox.rawcopy", "kbv.sandbox.timed", "multiprocessing.connection")
#: cuda workers also load Inductor's config before their snapshots (kbv.sandbox.worker._Server._warm_runtime).
PRELOAD_CUDA = ("torch._inductor.config",)
#: what candidates' own files import, where installed, for cpu workers: each load then starts without
#: the import (``torch.utils.cpp_extension`` brings setuptools, 0.105 s on the 2-core dev machine;
#: ``triton`` 0.107 s; a job loads its candidate twice, the second time for the secret shape). Not for
#: cuda workers: with these imported before the fork, every forked cuda worker died at its first CUDA
#: call ("Cannot re-initialize CUDA in forked subprocess", H100, 2026-12-05).
PRELOAD_CANDIDATE = ("torch.utils.cpp_extension", "triton", "triton.language")
#: bytes of one request (a pickled WorkerSetup) at most.
MAX_REQUEST = 1 << 16
#: seconds a forked worker waits to be re-parented before it gives up (exit 1, said on stderr): the
#: intermediate child only forks and exits, but on a loaded host it may wait for a core.
REPARENT_TIMEOUT_S = 60.0

READY = b"ready"


def preload(device: str) -> None:
    """Import what every candidate worker imports before candidate code (:data:`PRELOAD`), and what
    candidates commonly import (:data:`PRELOAD_CANDIDATE`)."""
    import importlib

    for name in PRELOAD + (PRELOAD_CUDA if device == "cuda" else ()):
        importlib.import_module(name)
    for name in PRELOAD_CANDIDATE if device == "cpu" else ():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - not installed or broken here: the candidate's own import says so
            pass


def single_threaded() -> str:
    """Empty when this process may fork a worker; else why not (a Python thread running, or CUDA
    started)."""
    import threading

    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised"
    return ""


def zygote_main(sock_fd: int, device: str) -> None:
    """The zygote's loop (its spawned process's target): preload, say :data:`READY`, then answer
    each request on ``sock_fd`` (a ``SOCK_SEQPACKET`` socket to its owner) with the new worker's
    pid as 8 bytes (or 0 on failure). Requests: a pickled ``WorkerSetup`` with two descriptors, the
    worker's end of its request pipe and its log's write end. Exits when the owner closes the
    socket."""
    from kbv.sandbox.confinement import PR_SET_DUMPABLE, die_with_parent, prctl

    die_with_parent()
    prctl(PR_SET_DUMPABLE, 0)
    sock = socket.socket(fileno=sock_fd)
    preload(device)
    why = single_threaded()
    sock.send(READY if not why else why.encode())
    if why:
        return
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 2)
        except OSError:
            return
        if not data:
            return
        pid = 0
        try:
            setup = pickle.loads(data)
            if len(fds) == 2 and not single_threaded():
                pid = _fork_worker(sock, setup, fds[0], fds[1])
        except Exception:  # noqa: BLE001 - a failed fork answers 0: the owner spawns instead
            pid = 0
        finally:
            for fd in fds:
                os.close(fd)
        try:
            sock.send(struct.pack("q", pid))
        except OSError:
            return


def _fork_worker(sock: socket.socket, setup: Any, conn_fd: int, log_fd: int) -> int:
    """Fork the intermediate child, which forks the worker and exits; the worker's pid."""
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:  # the intermediate child: nothing but the second fork
        try:
            sock.close()
            os.close(r)
            me = os.getpid()  # before the fork: once this process has exited the worker's parent is another
            worker = os.fork()
            if worker == 0:
                os.close(w)
                _worker(setup, conn_fd, log_fd, me)
            os.write(w, struct.pack("q", worker))
        finally:
            os._exit(0)
    os.close(w)
    try:
        raw = os.read(r, 8)
    finally:
        os.close(r)
        os.waitpid(middle, 0)
    return struct.unpack("q", raw)[0] if len(raw) == 8 else 0


def _worker(setup: Any, conn_fd: int, log_fd: int, middle: int) -> None:
    """In the forked worker: wait to be re-parented away from the intermediate child (the trusted
    owner adopts it), then run the candidate worker, which applies the sandbox first."""
    code = 1
    try:
        deadline = time.monotonic() + REPARENT_TIMEOUT_S
        while os.getppid() == middle and time.monotonic() < deadline:
            time.sleep(0.0002)
        if os.getppid() == middle:
            print(f"kbv zygote: worker {os.getpid()} not re-parented within {REPARENT_TIMEOUT_S:g} s", file=sys.stderr)
        else:
            from multiprocessing.connection import Connection

            from kbv.sandbox.worker import candidate_main

            candidate_main(Connection(conn_fd), setup, log_fd)  # exits the process itself
            code = 0
    except BaseException:  # noqa: BLE001 - said in the worker's log (or the zygote's stderr), as a spawned worker would
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)


__all__ = ["zygote_main", "preload", "single_threaded", "PRELOAD", "READY"]
