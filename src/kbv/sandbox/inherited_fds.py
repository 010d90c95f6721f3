"""File descriptors a candidate worker inherits and must not keep (the untrusted side).

A worker is forked from its zygote or spawned by multiprocessing, and either way inherits
descriptors that are the trusted side's: the write end of multiprocessing's resource-tracker pipe
(the tracker, kbv's process in the host's mount namespace, unlinks every name registered on it
when kbv exits: a candidate that wrote ``REGISTER:/name:shared_memory`` to it had kbv delete a file
of the host's ``/dev/shm``; red-team helper, 2026-12-05), the zygote's spawn sentinel and the
pipes of its start-up. Before any candidate code runs the worker closes every descriptor but its
standard streams and the ones it serves on (its request connection), and forgets the tracker, so
that a later use starts one of its own, inside the sandbox.
"""

from __future__ import annotations

import os

PROC_FDS = "/proc/self/fd"


def open_fds() -> list[int]:
    """This process's open descriptors (from /proc; empty where /proc cannot be read)."""
    try:
        return sorted(int(n) for n in os.listdir(PROC_FDS) if n.isdigit())
    except OSError:
        return []


def close_inherited(keep: set[int] | frozenset[int]) -> list[int]:
    """Close every descriptor above 2 not in ``keep``; returns those closed. Multiprocessing's
    resource tracker is forgotten (its descriptor is one of them)."""
    closed = []
    for fd in open_fds():
        if fd <= 2 or fd in keep:
            continue
        try:
            os.close(fd)
            closed.append(fd)
        except OSError:  # the listing's own descriptor, already closed
            pass
    try:
        from multiprocessing import resource_tracker

        tracker = resource_tracker._resource_tracker
        tracker._fd, tracker._pid = None, None  # a later register starts this worker's own tracker
    except (ImportError, AttributeError):
        pass
    return closed


__all__ = ["close_inherited", "open_fds"]
