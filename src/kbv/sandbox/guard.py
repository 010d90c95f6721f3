"""The harness's own callables kept as they were before the candidate loaded (:class:`HarnessGuard`),
and torch op kernels the candidate registered from Python (:func:`torch_op_overrides`): worker
side, imported before any candidate code (taxonomy 4/24/25). What they saw is decided on the
trusted side (:mod:`kbv.checks`)."""

from __future__ import annotations

import gc
import operator
import os
import sys
from itertools import chain
from typing import Any, Iterable


def _lookup(owner: Any, attr: str) -> Any:
    """``owner.attr`` without binding: a class's own namespace (then its bases), else getattr."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in vars(klass):
                return vars(klass)[attr]
        return None
    return getattr(owner, attr, None)


class HarnessGuard:
    """Identities of the harness's callables, taken before any candidate code runs.

    Covers every function and class (and the functions in each class's namespace) defined in
    the given modules, every module-level name one of them imported from another of them (the
    worker calls ``probes.torch_op_overrides`` and its own ``_flatten``, both defined elsewhere:
    replacing that name, not the original, is what changes what runs), plus named attributes of
    other objects (``time.perf_counter``, CUDA events, the pipe's ``send_bytes``...). For a
    function the object, its ``__code__`` and
    copies of its ``__defaults__`` / ``__kwdefaults__`` are kept, so an in-place edit of a
    defaults dict is seen too. Every other module-level name of the given modules is kept by
    identity as well (the torch entry points a probe bound at import, ``profiling._profile``; its
    tables, ``profiling.NO_MATH_OPS``: rebinding one through ``sys.modules`` changes what the probe
    does without touching a function), and a ``dict``/``list``/``set`` among them by its items too
    (``sys.modules`` itself excepted, which every import changes). :meth:`check` lists what changed
    and puts the originals back (taxonomy 4/24/25): the worker calls it before every reply, so the
    reply itself goes out through unpatched code.
    """

    def __init__(self, modules: Iterable[Any], attributes: Iterable[tuple[Any, str, str]] = ()):
        self._entries: list[tuple[str, Any, str, Any, tuple]] = []
        self._contents: list[tuple[str, Any, Any]] = []  #: (label, container, copy of its items)
        self._subset: tuple = (None, [], [])  #: check(only)'s key and its entries and containers
        modules = list(modules)
        names = {m.__name__ for m in modules}
        #: per module (not a package, whose submodules' names arrive as they are imported): its names
        #: then. A name added later shadows a builtin for every function of the module (``type`` bound
        #: in ``kbv.sandbox.timed`` finished a call's output when the harness read its layout after
        #: the clock; red-team helper, 2026-12-06), or a global the module's code looks up.
        self._names = [(m, frozenset(vars(m))) for m in modules if not hasattr(m, "__path__")]
        for m in modules:
            prefix = m.__name__
            for name, obj in list(vars(m).items()):
                home = getattr(obj, "__module__", None)
                if home != m.__name__:
                    if not (name.startswith("__") and name.endswith("__")):  # imported, or a table
                        self._add(f"{prefix}.{name}", m, name, obj, code=home in names and callable(obj))
                        if type(obj) in (dict, list, set) and obj is not sys.modules:
                            self._contents.append((f"{prefix}.{name} items", obj, type(obj)(obj)))
                    continue
                if isinstance(obj, type):
                    self._add(f"{prefix}.{name}", m, name, obj)
                    for attr, member in list(vars(obj).items()):
                        if callable(member) and hasattr(member, "__code__"):
                            self._add(f"{prefix}.{name}.{attr}", obj, attr, member)
                        elif isinstance(member, (staticmethod, classmethod, property)):
                            self._add(f"{prefix}.{name}.{attr}", obj, attr, member, code=False)
                            for part in ("__func__", "fget", "fset", "fdel"):
                                if getattr(member, part, None) is not None:  # its function's code
                                    self._add(f"{prefix}.{name}.{attr}", member, part, getattr(member, part))
                else:  # a function, or an instance of one of the module's own classes
                    self._add(f"{prefix}.{name}", m, name, obj, code=callable(obj))
        #: the given modules and the classes defined there, with their types as now: a module's or a
        #: class's type swapped for one whose property answers a name (``module.__class__ = M``, an
        #: Enum's metaclass) changes what the harness reads with its namespace untouched (red-team
        #: helper, 2026-12-06); their namespaces are what :meth:`_unchanged` compares
        self._owners = [*modules, *(obj for m in modules for name, obj in list(vars(m).items())
                                    if isinstance(obj, type) and getattr(obj, "__module__", None) == m.__name__)]
        self._owner_types = [type(o) for o in self._owners]
        for owner, attr, label in attributes:
            self.watch(owner, attr, label)
        self._fast: tuple = ()

    def watch(self, owner: Any, attr: str, label: str) -> None:
        """Add ``owner.attr`` as it is now (e.g. a hook installed after construction)."""
        obj = _lookup(owner, attr)
        if obj is not None:
            self._add(label, owner, attr, obj)
            self._fast = ()

    def _view(self) -> tuple[list, list]:
        """(what :meth:`_unchanged` compares, the entries looked up one by one) for the entries and
        containers as they are now: every name and value of the guarded namespaces (a module's, a
        class's) and the type of each, every item of the watched containers and of the functions'
        keyword-defaults dicts, what every closure cell holds (an empty one as a marker), and,
        through one ``gc.get_referents`` call, what every watched function holds (its code, globals,
        defaults, keyword defaults, closure...)."""
        guarded = {id(o) for o in self._owners}
        live, lone, funcs, cells = [], [], [], []
        for o in self._owners:
            d = vars(o)
            live += (d.keys(), d.values())
        for _label, owner, attr, obj, (code, _defaults, _kw, _cells) in self._entries:
            if id(owner) not in guarded:
                lone.append((owner, attr, obj))
            if code is not None:
                funcs.append(obj)
                cells += getattr(obj, "__closure__", None) or ()
                kw = getattr(obj, "__kwdefaults__", None)
                if kw:
                    live += (kw.keys(), kw.values())
        for _label, obj, _items in self._contents:
            live += (obj.keys(), obj.values()) if isinstance(obj, dict) else (obj,)
        return [live, funcs, cells], lone

    def _now(self, parts: list) -> list | None:
        """The objects of :meth:`_view`'s ``parts`` now; None when the collector's read is refused
        (the frame watch blames its caller on the candidate once ``sys.modules`` is forged): the
        full walk then runs every time."""
        live, funcs, cells = parts
        try:
            held = gc.get_referents(*funcs)
        except RuntimeError:
            return None
        return [*chain.from_iterable(live), *map(type, self._owners), *map(_cell, cells), *held]

    def _unchanged(self) -> bool:
        """Whether nothing any entry or container watches can have changed since the last full
        check: every object of :meth:`_view` is the one seen then (compared by identity in C, no
        Python code of anyone's runs, and one audit event instead of one a function), and every
        entry outside the guarded namespaces still looks up to its object. Cheaper than
        :meth:`check`'s walk (whose ``__code__`` reads are each an audit event the worker's hooks
        see, ~1.6 ms for 1,080 entries): a false here only sends :meth:`check` down the full walk,
        which decides what changed; a change this misses would have to leave every one of those
        objects in place, and the full walk reads nothing else."""
        if not self._fast:
            return False
        parts, lone, before = self._fast
        now = self._now(parts)
        return (now is not None and len(now) == len(before) and all(map(operator.is_, now, before))
                and all(_lookup(o, a) is x for o, a, x in lone))

    def _snapshot(self) -> None:
        parts, lone = self._view()
        now = self._now(parts)
        self._fast = (parts, lone, now) if now is not None else ()

    def _add(self, label: str, owner: Any, attr: str, obj: Any, code: bool = True) -> None:
        """Keep ``owner.attr`` (``obj``); ``code``: also its code and defaults where it has them."""
        code = getattr(obj, "__code__", None) if code else None
        cells = tuple(_cell(c) for c in (getattr(obj, "__closure__", None) or ())) if code is not None else ()
        state = (code, getattr(obj, "__defaults__", None), dict(getattr(obj, "__kwdefaults__", None) or {}), cells)
        self._entries.append((label, owner, attr, obj, state))

    def check(self, only: tuple[str, ...] = ()) -> list[str]:
        """Labels of the entries that changed since construction, and of names added to a guarded
        module (``module.name (added)``); each is restored, each added name removed. ``only``: just
        the entries and containers whose label holds one of these strings (no added names), a
        check that costs a few of the whole one's ~1,100 entries (a few ms in the worker, whose
        audit hooks see every ``__code__`` read)."""
        if not only and self._unchanged():
            return []
        changed = []
        entries, contents = self._entries, self._contents
        if only:
            key = (only, len(entries), len(contents))
            if self._subset[0] != key:
                self._subset = (key, [e for e in entries if any(s in e[0] for s in only)],
                                [c for c in contents if any(s in c[0] for s in only)])
            entries, contents = self._subset[1], self._subset[2]
        for o, kind in () if only else zip(self._owners, self._owner_types):
            if type(o) is not kind:
                changed.append(f"{getattr(o, '__module__', '') + '.' if isinstance(o, type) else ''}"
                               f"{getattr(o, '__qualname__', None) or o.__name__} (type changed)")
                try:
                    o.__class__ = kind
                except TypeError:
                    pass
        for m, before in () if only else self._names:
            now = vars(m)
            # every name, not only when the count grew: one deleted and another added keeps it
            for name in [k for k in now if k not in before and not (k.startswith("__") and k.endswith("__"))]:
                changed.append(f"{m.__name__}.{name} (added)")
                now.pop(name, None)
        for label, owner, attr, obj, (code, defaults, kwdefaults, cells) in entries:
            if _lookup(owner, attr) is not obj:
                changed.append(label)
                try:
                    setattr(owner, attr, obj)
                except (AttributeError, TypeError):
                    pass
            if code is not None:
                # each read below is an audit event the worker's hooks see (~0.6 µs): defaults are read
                # only where the function had them (defaults added to a function that had none change
                # no call the harness makes: it passes every argument), compared by identity (an
                # equality test would run a stand-in's __eq__ inside the check)
                internals = obj.__code__ is not code
                if not internals and defaults is not None:
                    now_defaults = obj.__defaults__
                    internals = now_defaults is not defaults and (
                        now_defaults is None or len(now_defaults) != len(defaults)
                        or any(a is not b for a, b in zip(now_defaults, defaults)))
                if not internals and kwdefaults:
                    kw = getattr(obj, "__kwdefaults__", None) or {}
                    internals = kw.keys() != kwdefaults.keys() or any(kw[k] is not v for k, v in kwdefaults.items())
                if internals:
                    changed.append(f"{label} internals")
                    try:
                        obj.__code__ = code
                        obj.__defaults__ = defaults
                        obj.__kwdefaults__ = dict(kwdefaults) or None
                    except (AttributeError, TypeError, ValueError):
                        pass
                closure = getattr(obj, "__closure__", None) or ()
                if len(closure) == len(cells) and any(_cell(c) is not v for c, v in zip(closure, cells)):
                    # a closure's cell rebound (a wrapper's wrapped function): what the function calls
                    changed.append(f"{label} closure")
                    for c, v in zip(closure, cells):
                        if v is not _EMPTY:
                            c.cell_contents = v
        for label, obj, items in contents:
            if not _same_items(obj, items):
                changed.append(label)
                if isinstance(obj, list):
                    obj[:] = items
                else:
                    obj.clear()
                    obj.update(items)
        if not only:
            self._snapshot()  # everything put back: the next check compares with this
        return changed


_EMPTY = object()  #: an empty closure cell's stand-in


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _EMPTY


def _same_items(obj: Any, items: Any) -> bool:
    """Whether container ``obj`` holds what its copy ``items`` held: the same keys bound to the
    same objects (a dict), the same objects in order (a list), the same members (a set)."""
    if len(obj) != len(items):
        return False
    if isinstance(items, dict):
        return all(k in obj and obj[k] is v for k, v in items.items())
    if isinstance(items, list):
        return all(a is b for a, b in zip(obj, items))
    return all(k in obj for k in items)


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


# Writes outside the sandbox (worker side) --------------------------------------------------------


def kbv_modules() -> list[Any]:
    """Every module of kbv's loaded in this process (the worker's harness: timer, timed, timed_inputs,
    rawcopy, the probes, the records...), for :class:`HarnessGuard`: a function the harness calls
    looks its globals up in its own module, so any of them rebound, or a builtin shadowed there,
    runs the candidate's code in the harness (``timed_inputs``' mix, rebound, computed the product
    before the clock; red-team helper, 2026-12-06)."""
    return [m for n, m in sorted(sys.modules.items()) if (n == "kbv" or n.startswith("kbv.")) and m is not None]
