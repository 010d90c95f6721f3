"""Landlock (unprivileged, Linux >= 5.13): the candidate worker's read-only filesystem where it
cannot have a private mount namespace (not root); :func:`kbv.sandbox.confinement.apply_sandbox`
calls it once ``no_new_privs`` is set."""

from __future__ import annotations

import ctypes
import os
import struct

#: Landlock syscalls (the same number on every architecture) and its filesystem write rights.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LL_WRITE_FILE, _LL_REFER, _LL_TRUNCATE = 1 << 1, 1 << 13, 1 << 14
_LL_WRITE_ABI1 = _LL_WRITE_FILE | sum(1 << b for b in range(4, 13))  # remove/make dir, file, node, link


def landlock(writable: list[str]) -> str | None:
    """Landlock (unprivileged, Linux >= 5.13): no writes except beneath ``writable`` (everything)
    and /dev, /proc (writing existing files: device nodes, the process's own /proc files).
    Reading and executing stay allowed. Needs ``no_new_privs``. Returns None or why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, 1)  # 1 = LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return f"no Landlock ({os.strerror(ctypes.get_errno())})"
    everything = _LL_WRITE_ABI1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    attr = ctypes.c_uint64(everything)  # landlock_ruleset_attr.handled_access_fs
    ruleset = libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if ruleset < 0:
        return f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        files = everything & (_LL_WRITE_FILE | _LL_TRUNCATE)
        for path, access in [(p, everything) for p in writable] + [("/dev", files), ("/proc", files)]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access, fd))  # path_beneath_attr
                if libc.syscall(LANDLOCK_ADD_RULE, ruleset, 1, rule, 0) != 0:
                    return f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(fd)
        if libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None
