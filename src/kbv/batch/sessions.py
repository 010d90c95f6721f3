"""One :class:`~kbv.batch.evaluator.Evaluator` per device for :func:`kbv.verify`, each owned by a
thread of its own: the reference worker dies with the thread that started it
(``PR_SET_PDEATHSIG``), so it must not be the caller's, which may be a short-lived thread of a
pool. Calls for one device run one at a time on that thread; :func:`close` (also run at exit)
stops the workers."""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import queue
import threading
from typing import Any, Callable

from kbv.batch.evaluator import Evaluator


class Session:
    """An :class:`~kbv.batch.evaluator.Evaluator` for one device and the thread that owns it: every
    call runs there, so the reference worker (bound to its creating thread) lives until
    :meth:`close`."""

    def __init__(self, device: str):
        self.device = device
        self.evaluator: Evaluator = Evaluator(device)
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=f"kbv-api-{device}", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                self.evaluator.close()
                return
            fn, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(self.evaluator))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    future.set_exception(exc)

    def call(self, fn: Callable[["Evaluator"], Any]) -> Any:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.jobs.put((fn, future))
        try:
            return future.result()
        except KeyboardInterrupt:
            self.abort()  # Ctrl-C: end the job in flight instead of letting it run on
            raise

    def abort(self) -> None:
        """Kill the reference worker (its candidate workers die with it): the job in flight ends as
        an EVAL_ERROR nobody waits for, and the next call starts a fresh worker."""
        ref = getattr(self.evaluator, "_ref", None)
        proc = getattr(ref, "proc", None)
        if proc is not None and proc.is_alive():
            proc.kill()

    def close(self, timeout: float = 30.0) -> None:
        self.jobs.put(None)
        self.thread.join(timeout)
        if self.thread.is_alive():  # a job still running: stop its worker, then wait for the thread
            self.abort()
            self.thread.join(timeout)


_sessions: dict[str, Session] = {}


_sessions_lock = threading.Lock()


_atexit_registered = False


def session(device: str) -> Session:
    global _atexit_registered
    with _sessions_lock:
        s = _sessions.get(device)
        if s is None or not s.thread.is_alive():
            s = _sessions[device] = Session(device)
        if not _atexit_registered:
            # after multiprocessing's own exit hook (imported with the Evaluator), so that this one
            # runs first: that hook joins every non-daemon child, and the reference worker only
            # ends when told to, so exit would wait forever
            import multiprocessing.util  # noqa: F401 - registers its hook now if not yet

            atexit.register(close)
            _atexit_registered = True
        return s


def close() -> None:
    """Stop the reference workers :func:`verify` keeps alive (one per device used). The next
    :func:`verify` starts a fresh one. Also run at interpreter exit. A call still running is let
    finish for up to 30 s, then its workers are killed."""
    with _sessions_lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for s in sessions:
        s.close()


def _forget_after_fork() -> None:
    # a forked child inherits the dict but not the threads: the sessions are the parent's
    global _sessions_lock
    _sessions.clear()
    _sessions_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
