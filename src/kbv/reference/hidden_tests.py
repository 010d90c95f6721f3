"""Input sets from a KernelBench-Verified hidden test file, made on the problem's device, one at a
time.

A hidden test file (``hidden_tests/level<L>/<pid>_hidden.py``) defines ``get_hidden_inputs()``, which
returns every set at once: KernelBench-Verified's files make four draws of the problem's
``get_inputs()`` scaled x1, x3, x0.01 and x-1. Made together, the four sets of a full-size problem
are four times its inputs (five while the last is scaled: 40 GiB for the 8 GiB of
``4_Matrix_vector_multiplication_``), over kbv's memory bound of ``4·B + 1 GiB``
(:mod:`kbv.processes.footprint`). So:

1. **A trace on the meta device.** ``get_hidden_inputs()`` runs once under ``torch.device("meta")``
   with a dispatch mode that records every aten operation, what it read and what it wrote: the
   number of sets and, for each set, the operations its tensors come from. No memory, no random
   draw.
2. **Set k is made by a call that runs only set k's operations** on the problem's device (under
   ``torch.device(device)``, as :func:`kbv.reference.inputs.draw` makes ``get_inputs()``: a cuda
   input never passes through host memory); every other operation runs on the meta device. kbv
   holds one set at a time, the file's call included, and draws each set once: the tensor work of
   all ``n`` calls is that of one plain call (Python and numpy work in the file runs in every call:
   ``n`` times).
3. **The draws are kbv's own**: set k's call runs under a secret seed of its own (independent
   draws, as a plain call gives), with the file's own seeding (``torch.manual_seed``,
   ``random.seed``, ...) switched off while kbv calls it. The trace and each set's call import the
   file afresh, so state it keeps between calls (a cache, a generator, a tensor it adds to) starts
   as in a plain call; for the same reason a set is not made twice for one check (``remakeable``
   is False). A tensor the file made at import maps, with all its views, onto one meta storage in
   the trace, so writes through any view of it are tied to what reads it.

A call whose operations differ from the trace (control flow that depends on values or on the
device, a set holding a tensor the trace did not tie to it), a draw from a generator of the file's
own, a file that seeds torch's generator past kbv's switch, a file the meta device cannot run (an
operation without a meta kernel, a ``.item()``) or one of more than :data:`MAX_TRACE_OPS`
operations gets one plain call of a fresh import that makes every set; they are then handed out one
at a time.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from kbv.intake.problems import ProblemError
from kbv.model.records import InputKind
from kbv.reference import inputs as inp
from kbv.reference.build import first_line
from kbv.sandbox.peak_memory import is_out_of_memory

META = torch.device("meta")

#: operations a trace follows at most; a file with more gets one plain call (the dispatch mode costs
#: ~0.5 ms an operation, a KernelBench-Verified file has 7 to 14)
MAX_TRACE_OPS = 2000

#: views that copy nothing and draw nothing: run where their input is, never counted in a call's
#: sequence (torch dispatches a ``detach`` after a factory whose result landed on another device,
#: so the meta trace has some that a real call has not)
_PASS_THROUGH = frozenset({torch.ops.aten.detach.default, torch.ops.aten.alias.default})


def _tensors(tree: Any) -> list[torch.Tensor]:
    """The tensors of ``tree`` (a module's parameters and buffers too)."""
    out = []
    for leaf in tree_flatten(tree)[0]:
        if isinstance(leaf, torch.Tensor):
            out.append(leaf)
        elif isinstance(leaf, torch.nn.Module):
            out += [*leaf.parameters(), *leaf.buffers()]
    return out


def _key(t: torch.Tensor) -> int:
    """The storage ``t`` reads or writes (views share it); unique while the trace keeps it alive."""
    return t.untyped_storage()._cdata


def _on_meta(v: Any) -> Any:
    return v.to(META) if isinstance(v, torch.Tensor) and v.device.type != "meta" else v


def _meta_call(func, args: tuple, kwargs: dict) -> Any:
    """``func`` on the meta device: tensor arguments moved there (metadata only), a factory's device too."""
    args, kwargs = tree_map(_on_meta, (args, kwargs))
    if "device" in kwargs and any(a.name == "device" for a in func._schema.arguments):
        kwargs["device"] = META
    return func(*args, **kwargs)


class _Trace(TorchDispatchMode):
    """Every aten operation of a call, run on the meta device: its overload, the storages it read
    and wrote. The call runs under the same device context as the real calls, so both see the
    same operations."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[Any, set[int]]] = []
        self.writers: dict[int, list[int]] = {}
        self._alive: list[Any] = []  # storage keys stay unique while their tensors live
        #: a real tensor's storage -> the one meta storage every view of it maps onto
        self._twins: dict[int, Any] = {}

    def _twin(self, v: Any) -> Any:
        """``v`` on the meta device; a real tensor (one the file made before the call, at import)
        as a view of one meta storage per real storage, so that writes through any view of it and
        reads of it share a key."""
        if not isinstance(v, torch.Tensor) or v.device.type == "meta":
            return v
        storage = v.untyped_storage()
        twin = self._twins.get(storage._cdata)
        if twin is None:
            twin = torch.empty(storage.nbytes(), dtype=torch.uint8, device=META).untyped_storage()
            self._twins[storage._cdata] = twin
            self._alive.append((storage, twin))
        return torch.empty(0, dtype=v.dtype, device=META).set_(twin, v.storage_offset(), v.shape, v.stride())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("generator") is not None:  # the file's own generator: not kbv's secret seed
            raise _Diverged("a draw from a generator of the file's own")
        args, kwargs = tree_map(self._twin, (args, kwargs))
        out = _meta_call(func, args, kwargs)
        if func in _PASS_THROUGH:  # the same storage: nothing to record
            return out
        if len(self.ops) >= MAX_TRACE_OPS:
            raise _Diverged(f"more than {MAX_TRACE_OPS} operations")
        i = len(self.ops)
        read = {_key(t) for t in _tensors((args, kwargs))}
        written = {_key(t) for t in _tensors(out)}
        schema_args = func._schema.arguments
        for a, v in zip(schema_args, args):  # in-place and out= arguments
            if a.alias_info is not None and a.alias_info.is_write:
                written |= {_key(t) for t in _tensors(v)}
        for name, v in kwargs.items():
            if any(a.name == name and a.alias_info is not None and a.alias_info.is_write for a in schema_args):
                written |= {_key(t) for t in _tensors(v)}
        self.ops.append((func, read))
        for k in written:
            self.writers.setdefault(k, []).append(i)
        self._alive.append((args, kwargs, out))
        return out

    def needed(self, tensors: list[torch.Tensor]) -> set[int]:
        """The operations that ``tensors``' values come from: their storages' writers, those writers'
        inputs' writers, and so on."""
        ops: set[int] = set()
        stack, seen = [_key(t) for t in tensors], set()
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            for i in self.writers.get(k, ()):
                if i not in ops:
                    ops.add(i)
                    stack.extend(self.ops[i][1])
        return ops


class _Diverged(Exception):
    """A real call's operations differ from the trace's."""


class _Only(TorchDispatchMode):
    """A real call that runs the operations in ``needed`` and every other one on the meta device."""

    def __init__(self, trace: _Trace, needed: set[int]):
        super().__init__()
        self.trace, self.needed, self.i = trace, needed, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _PASS_THROUGH:
            return func(*args, **kwargs)
        i, self.i = self.i, self.i + 1
        if i >= len(self.trace.ops) or self.trace.ops[i][0] is not func:
            raise _Diverged(f"operation {i} is {func}, the trace's "
                            f"{self.trace.ops[i][0] if i < len(self.trace.ops) else 'end'}")
        if i in self.needed:
            return func(*args, **kwargs)
        return _meta_call(func, args, kwargs)


def _load(path: str, sha: str | None = None) -> tuple[Callable[[], Any], str]:
    """(``get_hidden_inputs`` of a fresh import of ``path``, the sha256 of the bytes run): the trace
    and the real calls each get their own module, so state a file keeps between calls (a cache, a
    generator) is never shared between them. The bytes hashed are the bytes executed (read once).

    Raises:
        ProblemError: ``sha`` given and the file's bytes are no longer those (edited while its sets
            were being made).
    """
    raw = Path(path).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if sha is not None and digest != sha:
        raise ProblemError(path, "the file changed while its sets were being made")
    spec = importlib.util.spec_from_file_location(f"kbv_hidden_{digest[:16]}", path)
    if spec is None or spec.loader is None:
        raise ProblemError(path, "cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    exec(compile(raw, path, "exec"), module.__dict__)  # noqa: S102 - the user's own hidden test file
    return getattr(module, "get_hidden_inputs"), digest


def _file_fault(path: str, exc: BaseException) -> ProblemError:
    """``exc``, raised by the file's code, as the file's fault. A memory failure is raised again as
    it is: the device or host full when a set is made (a candidate can fill the device between its
    calls) is kbv's failure, EVAL_ERROR (``Verification.run``), never a file fault under which the
    remaining sets would be skipped and the verdict kept."""
    if is_out_of_memory(exc):
        raise exc
    return ProblemError(path, f"get_hidden_inputs() failed: {type(exc).__name__}: {first_line(exc)}")


def _fresh(path: str, sha: str | None = None) -> tuple[Callable[[], Any], str]:
    """:func:`_load`, its failures the file's (:func:`_file_fault`)."""
    try:
        return _load(path, sha)
    except (ProblemError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - a broken hidden test file is the problem's fault
        raise _file_fault(path, exc) from None


def _checked(path: str, lists: Any) -> list[list[Any]]:
    lists = list(lists)
    if not all(isinstance(a, (list, tuple)) for a in lists):
        raise ProblemError(path, "get_hidden_inputs() must return a list of input lists")
    return [list(a) for a in lists]


#: the seeding calls a file may make itself, made no-ops while kbv calls it: every draw then follows
#: kbv's secret seeds (a file that seeds itself would otherwise give every set one base draw when
#: set k's call runs set k's operations alone, and the same values at every verification)
_SEEDERS = (("torch", "manual_seed"), ("torch.random", "manual_seed"), ("torch.cuda", "manual_seed"),
            ("torch.cuda", "manual_seed_all"), ("torch.cuda.random", "manual_seed"),
            ("torch.cuda.random", "manual_seed_all"), ("random", "seed"), ("numpy.random", "seed"))


@contextlib.contextmanager
def _own_seeds():
    saved = []
    try:
        for mod, name in _SEEDERS:
            module = importlib.import_module(mod)
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, lambda *a, **k: None)
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


class _Maker:
    """The sets of one file under one secret seed, made on ``device`` one at a time (module
    docstring); ``trace`` None: one plain call makes them all."""

    def __init__(self, path: str, seed: int, device: torch.device | str | None, trace: _Trace | None,
                 sha: str | None = None):
        self.path, self.seed, self.count, self.trace = path, seed, -1, trace
        #: sha256 of the file's bytes at its first import: every later import must read the same
        self.sha = sha
        self.device = None if device is None or torch.device(device).type == "cpu" else torch.device(device)
        self.pending: dict[int, list[Any]] = {}
        #: each set's tensors in the trace (meta)
        self.shapes: list[list[torch.Tensor]] = []
        self.made: set[int] = set()
        #: calls of ``get_hidden_inputs()`` on a real device (the meta trace not counted)
        self.calls = 0

    def set_seed(self, k: int) -> int:
        """Set k's own seed: the sets are independent draws, as the file's plain call makes them."""
        return (self.seed + 0x9E3779B1 * (k + 1)) % (1 << 31)

    def call(self, fn: Callable[[], Any], only: TorchDispatchMode | None = None,
             seed: int | None = None) -> list[list[Any]]:
        """One call of ``fn`` under ``seed`` (default the file's) on the device (``only``: a
        dispatch mode around it), the file's own seeding switched off."""
        inp.seed_everything(self.seed if seed is None else seed)
        try:
            with _own_seeds(), torch.device(self.device) if self.device is not None else _nothing(), \
                    only or _nothing():
                lists = fn()
            lists = _checked(self.path, lists)
        except (_Diverged, ProblemError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - a broken hidden test file is the problem's fault
            raise _file_fault(self.path, exc) from None
        if self.count < 0:
            self.count = len(lists)
        elif len(lists) != self.count:
            raise ProblemError(self.path, f"get_hidden_inputs() returned {self.count} sets in the size pass "
                                          f"and {len(lists)} now")
        return lists

    def plain(self) -> list[list[Any]]:
        """One plain call of a fresh import: every set, none on the meta device."""
        self.calls += 1
        lists = self.call(_fresh(self.path, self.sha)[0])
        if self._stray_meta(lists):
            raise ProblemError(self.path, "get_hidden_inputs() returned tensors on the meta device")
        return lists

    def _stray_meta(self, tree: Any) -> bool:
        """A meta tensor where the sets belong on a real device."""
        return (self.device is None or self.device.type != "meta") and any(
            t.device.type == "meta" for t in _tensors(tree))

    def set_args(self, k: int) -> tuple[list[Any], str | None]:
        if k in self.pending:
            self.made.add(k)
            return self.pending.pop(k), None
        if self.trace is not None:
            try:
                self.calls += 1
                seed = self.set_seed(k)
                # an import of its own: state the file keeps between calls starts afresh, as in a
                # plain call that makes every set once
                args = self.call(_fresh(self.path, self.sha)[0], _Only(self.trace, self.trace.needed(self.shapes[k])),
                                 seed)[k]
                if self._stray_meta(args):
                    raise _Diverged(f"set {k} holds a tensor the trace did not tie to it")
                if torch.initial_seed() != seed or (self.device is not None and self.device.type == "cuda"
                                                     and torch.cuda.initial_seed() != seed):
                    # the file seeded a generator itself (a name bound before kbv's switch,
                    # torch.default_generator...): every set would be the same first draw after it
                    raise _Diverged("the file seeds torch's generator itself")
                self.made.add(k)
                return args, None
            except _Diverged:
                self.trace = None  # this file gets plain calls from now on
        lists = self.plain()
        self.pending.update({j: a for j, a in enumerate(lists) if j != k and j not in self.made})
        args = lists[k]
        del lists
        self.made.add(k)
        return args, None


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class HiddenSets(list):
    """The input sets of one hidden test file, with the sha256 of the bytes they were made from
    (``sha256``: a batch compares it with the file's hash when the job was planned)."""

    sha256: str = ""


def hidden_test_sets(path: str, device: torch.device | str | None = None) -> HiddenSets:
    """Input sets ``HT1``, ``HT2``, ... (kind hidden) from hidden test file ``path``, drawn under one
    secret seed, each made on ``device`` (default the CPU) when first used and held one at a time
    (module docstring). The sets are not ``remakeable``: a file may keep state between calls. Every
    import of the file reads the bytes of the first (``HiddenSets.sha256``).

    Raises:
        ProblemError: the file fails to import, ``get_hidden_inputs`` is missing, raises, or returns
            no list of input lists or an empty one; later, from a set's ``args``, when a call raises,
            returns another number of sets, or the file's bytes changed.
    """
    fn, sha = _fresh(path)
    seed = inp.secret_seed()
    maker = _Maker(path, seed, device, _Trace(), sha)
    try:
        shapes = maker.call(fn, maker.trace)  # the trace: an import of its own (fn)
        if any(t.device.type != "meta" for t in _tensors(shapes)):
            raise RuntimeError("a tensor made off the meta device")
        maker.shapes = [_tensors(s) for s in shapes]
        # the keys are recorded: nothing the call made needs to live on (data the file made with
        # numpy would otherwise stay held for as long as the sets)
        maker.trace._alive.clear()
        maker.trace._twins.clear()
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - no trace for this file: one plain call makes every set (and
        # says what is wrong with a broken one)
        maker.trace, maker.count = None, -1
        maker.pending = dict(enumerate(maker.plain()))
    if maker.count == 0:  # no sets: the file would check nothing while the verdict says it was given
        raise ProblemError(path, "get_hidden_inputs() returned no input sets")
    sets = HiddenSets(inp.InputSet(f"HT{k + 1}", InputKind.HIDDEN, f"hidden_tests[{k}]", seed,
                                   maker=functools.partial(maker.set_args, k)) for k in range(maker.count))
    sets.sha256 = sha
    for s in sets:
        # a file may keep state between calls (a generator of its own): a set made again need not
        # have the same values, so nothing kbv measures on a set is measured on a second making
        # (kbv.pipeline.judging.Judging.defers_rounding)
        s.remakeable = False
    return sets
