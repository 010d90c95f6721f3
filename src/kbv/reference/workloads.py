"""Declared workloads (issue 23): a problem verified and timed at several named shapes.

A problem file may declare, in the same ``KBV_METADATA`` dict as its input domains
(:mod:`kbv.reference.domains`)::

    batch_size = 16
    dim = 16384

    KBV_METADATA = {
        "workloads": {
            "small": {"batch_size": 4, "dim": 1024},
            "wide": {"dim": 65536},
        },
    }

Each workload names new values for some of the problem's size constants (module-level integer
literals that ``get_inputs`` or ``get_init_inputs`` read, :func:`kbv.intake.sizes.size_constants`);
the others keep theirs. kbv verifies the candidate at the problem's own sizes (the workload
``nominal``) and then at each declared workload in the order written, each as a whole verification
of its own (:func:`kbv.pipeline.workload_runs.verify_workloads`): the reference built at the
workload's sizes, ``ModelNew`` built from ``get_init_inputs()`` there, every correctness set and
probe, the timed rounds and the trusted bound. The verdict is the worst workload's; its speedup
against each baseline is the geometric mean over the workloads, and each workload's figures are
in ``evidence["workloads"]``.

Rules (kbv choices, each an error naming the problem file when broken):

* at most :data:`MAX_WORKLOADS` workloads; names of 1-32 letters, digits, ``_``, ``-`` or ``.``,
  not ``nominal`` (the problem's own sizes);
* each size a positive integer of at most :data:`MAX_SIZE`, named by a size constant;
* a workload identical to the nominal sizes or to an earlier workload is refused (it would be timed
  twice and counted twice in the geometric mean).

Runs in the reference worker (it reads the imported problem module, as the domains do).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from kbv.intake.sizes import MAX_WORKLOADS, size_constants

#: the keys ``KBV_METADATA`` may have (a misspelt key is an error, not silently ignored).
METADATA_KEYS = ("input_domains", "workloads", "config")
#: the largest size a workload may set (kbv choice: 2^31 - 1, an int32 index's reach).
MAX_SIZE = 2**31 - 1
NOMINAL = "nominal"
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,32}")


class WorkloadError(ValueError):
    """A malformed ``KBV_METADATA['workloads']`` (one line)."""


def check_metadata_keys(meta: Any) -> None:
    """Raise :class:`WorkloadError` for a ``KBV_METADATA`` key kbv does not read."""
    if isinstance(meta, Mapping):
        unknown = sorted(str(k) for k in meta if k not in METADATA_KEYS)
        if unknown:
            raise WorkloadError(f"unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(METADATA_KEYS)}")


def declared_workloads(meta: Any, source: str) -> dict[str, dict[str, int]]:
    """The workloads ``meta`` (a problem's ``KBV_METADATA``, or None) declares, in the order written:
    ``{name: {size constant: value}}``; ``{}`` when it declares none. ``source`` is the problem's
    text (its size constants are read from it, nothing executed).

    Raises:
        WorkloadError: any rule of the module doc broken.
    """
    if not isinstance(meta, Mapping) or "workloads" not in meta:
        return {}
    raw = meta["workloads"]
    if not isinstance(raw, Mapping):
        raise WorkloadError(f"'workloads' must be a dict of name -> {{size constant: value}}, not {type(raw).__name__}")
    if len(raw) > MAX_WORKLOADS:
        raise WorkloadError(f"{len(raw)} workloads declared; at most {MAX_WORKLOADS}")
    try:
        constants = size_constants(source)
    except SyntaxError as exc:
        raise WorkloadError(f"size constants not read: {exc}") from None
    seen = {tuple(sorted(constants.items())): NOMINAL}
    out: dict[str, dict[str, int]] = {}
    for name, sizes in raw.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name == NOMINAL:
            raise WorkloadError(f"workload name {name!r}: 1-32 letters, digits, '_', '-' or '.', not {NOMINAL!r}")
        if not isinstance(sizes, Mapping) or not sizes:
            raise WorkloadError(f"workload {name!r}: a non-empty dict of size constant -> value")
        for key, value in sizes.items():
            if key not in constants:
                known = ", ".join(constants) or "none: get_inputs/get_init_inputs read no module-level int literal"
                raise WorkloadError(f"workload {name!r}: {key!r} is not a size constant (size constants: {known})")
            if type(value) is not int or not 0 < value <= MAX_SIZE:
                raise WorkloadError(f"workload {name!r}: {key} = {value!r}; a size is an int in [1, {MAX_SIZE}]")
        full = tuple(sorted({**constants, **sizes}.items()))
        if full in seen:
            raise WorkloadError(f"workload {name!r} has the same sizes as {seen[full]!r}")
        seen[full] = name
        out[name] = dict(sizes)
    return out


__all__ = ["declared_workloads", "check_metadata_keys", "WorkloadError", "MAX_WORKLOADS", "NOMINAL", "METADATA_KEYS"]
