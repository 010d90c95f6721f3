"""The harness's own callables kept as they were before the candidate loaded (:class:`HarnessGuard`):
worker side, imported before any candidate code (taxonomy 4/24/25). Kernels registered for torch's
own ops are :mod:`kbv.sandbox.op_kernels`'. What they saw is decided on the trusted side
(:mod:`kbv.checks`)."""

from __future__ import annotations

import gc
import sys
from itertools import chain
from typing import Any, Iterable

#: the collector's read and the flattening the cheap path uses, bound here before any candidate code:
#: names of this (guarded) module, so a rebind is a change the namespace comparison sees; the
#: ``gc`` and ``itertools`` modules are not kbv's and nothing watches their attributes
_referents = gc.get_referents
_flatten = chain.from_iterable


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
        #: the given modules and the classes defined there, with their types as now: a module's or a
        #: class's type swapped for one whose property answers a name (``module.__class__ = M``, an
        #: Enum's metaclass) changes what the harness reads with its namespace untouched (red-team
        #: helper, 2026-12-06); their namespaces are what :meth:`_unchanged` compares
        self._owners: list[Any] = list(modules)
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
                    self._owners.append(obj)
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
        self._owner_types = [type(o) for o in self._owners]
        #: each guarded class's names then: a name added to a class (a data descriptor over an
        #: instance attribute, ``OpCount.ops`` filtering what the op count kept) changes what the
        #: harness reads with every existing entry in place (red-team helper, 2026-12-07)
        self._class_names = [(c, frozenset(vars(c))) for c in self._owners if isinstance(c, type)]
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
            held = _referents(*funcs)
        except RuntimeError:
            return None
        return [*_flatten(live), *map(type, self._owners), *map(_cell, cells), *held]

    def _unchanged(self) -> bool:
        """Whether nothing any entry or container watches can have changed since the last full
        check: every object of :meth:`_view` is the one seen then (compared by identity, no Python
        code of anyone's runs, and one audit event instead of one a function), and every
        entry outside the guarded namespaces still looks up to its object. Cheaper than
        :meth:`check`'s walk (whose ``__code__`` reads are each an audit event the worker's hooks
        see, ~1.6 ms for 1,080 entries): a false here only sends :meth:`check` down the full walk,
        which decides what changed; a change this misses would have to leave every one of those
        objects in place, and the full walk reads nothing else."""
        if not self._fast:
            return False
        parts, lone, before = self._fast
        now = self._now(parts)
        if now is None or len(now) != len(before):
            return False
        for a, b in zip(now, before):  # the ``is`` operator, which no module attribute can replace
            if a is not b:
                return False
        return all(_lookup(o, a) is x for o, a, x in lone)

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
        module or class (``module.name (added)``, ``module.Class.name (added)``); each is restored,
        each added name removed. ``only``: just
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
                where = f"{o.__module__}.{o.__qualname__}" if isinstance(o, type) else o.__name__
                changed.append(f"{where} (type changed)")
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
        for c, before in () if only else self._class_names:
            for name in [k for k in vars(c) if k not in before and not lazy_class_name(c, k)]:
                changed.append(f"{c.__module__}.{c.__qualname__}.{name} (added)")
                try:
                    type.__delattr__(c, name)
                except (AttributeError, TypeError):
                    pass
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


def lazy_class_name(c: type, name: str) -> bool:
    """Whether ``c.name`` is one Python itself adds to a class after its creation, holding what Python
    puts there: ``copyreg`` caches ``__slotnames__`` (the slots of the class and its bases, private
    names mangled) when an instance is first pickled, and reading ``__annotations__`` of a class
    without any stores an empty dict. The same names holding anything else are the candidate's (a
    forged ``__slotnames__`` would leave fields out of a pickled reply)."""
    value = vars(c).get(name)
    if name == "__annotations__":
        return type(value) is dict and not value
    if name == "__slotnames__":
        want = [f"_{k.__name__.lstrip('_')}{n}" if n.startswith("__") and not n.endswith("__") else n
                for k in c.__mro__ for n in _own_slots(k)]
        return type(value) is list and value == want
    return False


def _own_slots(k: type) -> list:
    """The slot names ``k`` itself declares, less ``__dict__`` and ``__weakref__`` (as ``copyreg``)."""
    slots = vars(k).get("__slots__", ())
    return [n for n in ([slots] if isinstance(slots, str) else slots) if n not in ("__dict__", "__weakref__")]


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


def kbv_modules() -> list[Any]:
    """Every module of kbv's loaded in this process (the worker's harness: timer, timed, timed_inputs,
    rawcopy, the probes, the records...), for :class:`HarnessGuard`: a function the harness calls
    looks its globals up in its own module, so any of them rebound, or a builtin shadowed there,
    runs the candidate's code in the harness (``timed_inputs``' mix, rebound, computed the product
    before the clock; red-team helper, 2026-12-06)."""
    return [m for n, m in sorted(sys.modules.items()) if (n == "kbv" or n.startswith("kbv.")) and m is not None]
