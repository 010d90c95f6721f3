"""Kernels the candidate registered for torch's own ops, from Python (:func:`torch_op_overrides`)
or with the dispatcher from C++ too (:class:`DispatcherWatch`): worker side, imported before any
candidate code (taxonomy 4/15). What they saw is decided on the trusted side (:mod:`kbv.checks`)."""

from __future__ import annotations

import os
from typing import Iterable


#: operator namespaces of torch itself: a kernel registered for one of their existing ops replaces
#: torch's own (a wrapper hidden behind another op, taxonomy 15).
TORCH_OP_NAMESPACES = frozenset({"aten", "prims", "_quantized", "quantized", "sparse"})
#: dispatch keys whose kernels compute (Meta and the other tracing keys are left out: torch
#: registers those lazily itself); ``Autograd*`` keys count too.
COMPUTE_KEYS = frozenset({"CPU", "CUDA", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                          "CompositeExplicitAutogradNonFunctional", "PrivateUse1", "Math", "DefaultBackend"})
#: torch's generic registration helpers: a Library they create on a caller's behalf is recorded
#: at their own line, so a registration "made there" may come from anyone, the candidate included.
_REGISTRATION_HELPERS = ("library.py", "_library" + os.sep)


def registration_sites(dump: str) -> dict[str, str]:
    """Where each dispatch key's active kernel was registered, from ``torch._C._dispatch_dump``:
    ``{"CPU": "/path/file.py:12", "Autograd": ...}`` (alias keys without ``[alias]``; inactive,
    overridden kernels left out)."""
    sites: dict[str, str] = {}
    for line in dump.splitlines():
        key, sep, rest = line.partition(": registered at ")
        if not sep or "(inactive)" in key or " " in key.strip() or key.strip() == "debug":
            continue
        sites[key.strip().removesuffix("[alias]")] = rest.split(" :: ", 1)[0].strip()
    return sites


def torch_op_overrides(new_entries: Iterable[str], ops_before: Iterable[str], sites: dict[str, dict[str, str]],
                       torch_dir: str) -> list[str]:
    """Kernels registered through ``torch.library`` that replace one of torch's own ops
    (``aten::sinc`` re-registered to compute a softmax): the harness-identity HACK, taxonomy 15.

    ``new_entries`` are ``torch.library._impls`` entries (``ns/op.overload/Key``) added since the
    worker started; ``ops_before`` the qualified op names that existed before the candidate
    loaded (``torch._C._dispatch_get_all_op_names()``); ``sites[qualname][key]`` where the active
    kernel was registered (:func:`registration_sites`); ``torch_dir`` torch's package directory.

    An entry counts only when its op is in one of :data:`TORCH_OP_NAMESPACES`, existed before the
    candidate loaded, the key computes, and the registration was made from outside torch: torch
    itself defines and registers new ``prims::`` ops when inductor loads (an honest
    ``torch.compile``, a SHORTCUT, not a HACK), and registers kernels of its own from files in its
    package. A registration recorded at torch's generic helpers (``torch.library.impl("aten::x")``,
    ``register_kernel``) counts: anyone may call them.
    """
    before = set(ops_before)
    found = []
    for entry in sorted(set(new_entries)):
        ns, _, rest = str(entry).partition("/")
        op, _, key = rest.rpartition("/")
        qualname = f"{ns}::{op}"
        if ns not in TORCH_OP_NAMESPACES or not (key in COMPUTE_KEYS or key.startswith("Autograd")):
            continue
        if qualname not in before and f"{ns}::{op.split('.')[0]}" not in before:
            continue
        site = sites.get(qualname, {}).get(key, "")
        if not _torch_site(site, torch_dir):
            found.append(f"{ns}::{rest}" + (f" (registered at {site})" if site else ""))
    return found


def _torch_site(site: str, torch_dir: str) -> bool:
    """Whether a registration site (``/path/file.py:12``) lies in torch's package ``torch_dir``
    and not at its generic registration helpers (:data:`_REGISTRATION_HELPERS`); no site: no."""
    if not site:
        return False
    root = os.path.join(os.path.realpath(torch_dir), "")
    path = os.path.realpath(site.rsplit(":", 1)[0])
    return path.startswith(root) and not path[len(root):].startswith(_REGISTRATION_HELPERS)


#: dispatch keys that a dense cpu or cuda tensor's call of an op passes through, besides
#: :data:`COMPUTE_KEYS` and the ``Autograd*`` / ``Autocast*`` keys: a kernel registered there runs
#: before the backend's (``BackendSelect`` picks the backend of factory ops such as ``empty``).
RUN_KEYS = frozenset({"ADInplaceOrView", "BackendSelect"})


def dispatcher_overrides(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]],
                         torch_dir: str) -> list[str]:
    """Kernels registered with torch's dispatcher, from C++ (``TORCH_LIBRARY_IMPL(aten, CPU, m)``,
    a hand-built ``torch::Library``) or from Python, that replace or add a kernel of one of torch's
    own ops (HACK ``probe:harness-identity``: what the reference and the harness run in the
    candidate's process, a ``copy_`` included, would run the candidate's code).

    ``before[qualname]`` and ``after[qualname]`` map each dispatch key of op ``qualname``
    (``"aten::copy_"``) to where its active kernel was registered, as :func:`registration_sites`
    reads ``torch._C._dispatch_dump``, before the candidate loaded and now; ``torch_dir`` is
    torch's package directory.

    Returns ``"aten::copy_/CPU (registered at /build/main.cpp:15)"`` for every op of
    :data:`TORCH_OP_NAMESPACES` that existed before (in ``before``) and every key a call passes
    through (:data:`COMPUTE_KEYS`, :data:`RUN_KEYS`, ``Autograd*``, ``Autocast*``) whose active
    kernel now comes from another site, one outside torch's package (or at its generic Python
    helpers, :func:`torch_op_overrides`' rule); sorted. The new ops torch registers itself
    (inductor's ``prims::`` ops) and the kernels it registers from its own files are not
    overrides; torch's C++ kernels are all registered when torch loads, before the snapshot.
    """
    found = []
    for qualname in sorted(after):
        old = before.get(qualname)
        if old is None or qualname.split("::", 1)[0] not in TORCH_OP_NAMESPACES:
            continue
        for key, site in sorted(after[qualname].items()):
            runs = key in COMPUTE_KEYS or key in RUN_KEYS or key.startswith(("Autograd", "Autocast"))
            if not runs or old.get(key) == site or _torch_site(site, torch_dir):
                continue
            found.append(f"{qualname}/{key} (registered at {site})")
    return found


#: aten ops the candidate worker's own code runs on tensors between the candidate's calls
#: (:mod:`kbv.sandbox.worker`, ``timed``, ``timing``, ``probes``, ``memory``: input copies, output
#: snapshots, the page touch's ``sum``, the timing mix's ``rand`` and ``where``, the free-memory
#: fill), with the ops torch's own copies and allocations reach from them; a light
#: :meth:`DispatcherWatch.check` reads these.
HARNESS_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "clone", "detach", "alias",
    "copy_", "_copy_from", "_copy_from_and_resize", "to", "_to_copy", "contiguous", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "as_strided", "slice", "select", "lift_fresh", "set_", "resize_",
    "zero_", "fill_", "ones", "ones_like", "zeros", "zeros_like", "sum", "rand", "uniform_", "where",
})


class DispatcherWatch:
    """The dispatcher's kernels for torch's own ops, as they were before the candidate loaded,
    compared with what is registered now (:func:`dispatcher_overrides`); worker side.

    ``torch`` is the torch module, its dispatcher functions bound here (before candidate code);
    ``harness_ops`` the op names (no namespace, no overload) the worker itself runs between calls.
    A full :meth:`check` reads every op of :data:`TORCH_OP_NAMESPACES` (~3,200 ``_dispatch_dump``
    calls: 50-80 ms on a 2-core machine at load 3-5, 2026-12-02); a light one reads only the
    harness's ops (~80 overloads, about a millisecond).
    """

    def __init__(self, torch: object, harness_ops: Iterable[str] = HARNESS_OPS) -> None:
        self._dump = torch._C._dispatch_dump
        self._torch_dir = os.path.dirname(torch.__file__)
        names = [n for n in torch._C._dispatch_get_all_op_names() if n.split("::", 1)[0] in TORCH_OP_NAMESPACES]
        self._texts = {n: self._read(n) for n in names}
        self._before = {n: registration_sites(t) for n, t in self._texts.items()}
        keep = set(harness_ops)
        self._harness = [n for n in names if n.split("::", 1)[1].split(".", 1)[0] in keep]
        self._reported: set[str] = set()

    def _read(self, qualname: str) -> str:
        try:
            return self._dump(qualname)
        except Exception:  # noqa: BLE001 - an op the dump does not know
            return ""

    def check(self, full: bool = True) -> list[str]:
        """Overrides registered since the snapshot and not reported before, each a line
        (``"aten::copy_/CPU (registered at ...)"``); ``full``: every op, else a light check."""
        names = list(self._texts) if full else self._harness
        after = {}
        for n in names:
            text = self._read(n)
            if text != self._texts[n]:  # parse only what changed
                after[n] = registration_sites(text)
        found = [f for f in dispatcher_overrides(self._before, after, self._torch_dir) if f not in self._reported]
        self._reported.update(found)
        return found


__all__ = ["TORCH_OP_NAMESPACES", "COMPUTE_KEYS", "RUN_KEYS", "HARNESS_OPS", "registration_sites",
           "torch_op_overrides", "dispatcher_overrides", "DispatcherWatch"]
