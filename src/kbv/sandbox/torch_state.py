"""Torch's own state that runs a candidate's Python inside the harness's torch calls, kept as it
was before the candidate loaded (worker side, taxonomy 4): the torch function and dispatch modes
left on (:class:`ModeShield`), ``torch.Tensor``'s methods and the op counts' torch classes (:class:`TorchClassWatch`) and the torch
functions the harness calls between the candidate's calls (:func:`torch_attributes`, for
:class:`kbv.sandbox.guard.HarnessGuard`). What they saw is decided on the trusted side."""

from __future__ import annotations

from typing import Any

from kbv.sandbox.guard import lazy_class_name

_EMPTY = object()  #: a name missing from a namespace


class ModeShield:
    """Torch function and dispatch modes the candidate left on, taken off (worker side, taxonomy 4).

    A mode on the calling thread's stack runs Python of the candidate's inside every torch call of
    that thread, the harness's own included: the timed call's input writes (``copy_``, ``where``,
    ``__setitem__``, :mod:`kbv.sandbox.timed_inputs`) before its clock starts, where a mode entered
    at import computed the product the timed forward then looked up (red-team helper, 2026-12-06:
    PASS 2.4x for a ``torch.matmul`` wrapper, no op counted). :meth:`clear` pops every such mode
    and names it in :attr:`found`; the worker calls it after each candidate call and before each
    reply, so no harness torch call runs under one and each is reported (HARNESS_PATCHED: HACK).
    Kept on: torch's own device context (``torch.set_default_device``, ``with torch.device(...)``)
    while its class and method are torch's, which changes only factory functions' default device.
    The stack functions are bound here, before any candidate code (patching ``torch._C`` later
    does not reach them)."""

    def __init__(self, torch: Any) -> None:
        from torch.utils._device import DeviceContext

        c = torch._C
        self._fn_len, self._fn_pop, self._fn_push = (c._len_torch_function_stack, c._pop_torch_function_stack,
                                                     c._push_on_torch_function_stack)
        self._d_len, self._d_pop = c._len_torch_dispatch_stack, c._pop_torch_dispatch_stack
        self._infra = tuple(c._TorchDispatchModeKey.__members__.values())
        self._get_infra, self._unset_infra = c._get_dispatch_mode, c._unset_dispatch_mode
        self._device, self._device_fn = DeviceContext, vars(DeviceContext).get("__torch_function__")
        self.found: list[str] = []  #: modes taken off since the worker last reported them

    def _torch_device(self, mode: Any) -> bool:
        return type(mode) is self._device and vars(self._device).get("__torch_function__") is self._device_fn \
            and "__torch_function__" not in vars(mode)

    def clear(self) -> None:
        """Pop every mode on this thread's stacks but torch's own device context (class doc)."""
        kept = []
        while self._fn_len() > 0:
            mode = self._fn_pop()
            if self._torch_device(mode):
                kept.append(mode)
            else:
                self.found.append(f"torch function mode {type(mode).__name__} left on")
        for mode in reversed(kept):
            self._fn_push(mode)
        while self._d_len() > 0:
            self.found.append(f"torch dispatch mode {type(self._d_pop(None)).__name__} left on")
        for key in self._infra:
            if self._get_infra(key) is not None:
                self.found.append(f"torch dispatch mode {type(self._unset_infra(key)).__name__} left on")

    def take(self) -> list[str]:
        """:meth:`clear`, then what was found since the last call (emptied)."""
        self.clear()
        found, self.found = self.found, []
        return found


#: torch's own functions the harness calls between the candidate's calls (input writes, the mix,
#: the probes), watched by identity (:func:`torch_attributes`).
TORCH_FUNCTIONS = ("where", "randint", "rand", "randn", "full", "empty", "empty_like", "empty_strided", "zeros",
                   "zeros_like", "ones", "exp", "equal", "stack", "cat", "as_strided", "tensor", "frombuffer",
                   "from_numpy", "isfinite", "allclose", "inference_mode", "no_grad", "set_grad_enabled",
                   "is_grad_enabled", "device", "Generator", "set_float32_matmul_precision",
                   "get_float32_matmul_precision", "use_deterministic_algorithms",
                   "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
                   "set_autocast_enabled", "is_autocast_enabled", "set_default_dtype", "get_default_dtype")
#: not watched: ``manual_seed``, which Dynamo rebinds on import (an honest ``torch.compile``'d ModelNew),
#: and which the harness calls only before the candidate's ``__init__`` at load.


def torch_attributes(torch: Any) -> list[tuple[Any, str, str]]:
    """``(owner, name, label)`` for :class:`HarnessGuard`: :data:`TORCH_FUNCTIONS` of ``torch``, and
    ``torch.autograd.graph.increment_version`` (the bound pass's version bump)."""
    out = [(torch, k, f"torch.{k}") for k in TORCH_FUNCTIONS if hasattr(torch, k)]
    out += [(m, k, f"{m.__name__}.{k}") for m in profiler_modules(torch) for k, v in list(vars(m).items())
            if callable(v) and not (k.startswith("__") and k.endswith("__"))]
    return out + [(torch.autograd.graph, "increment_version", "torch.autograd.graph.increment_version")]


def profiler_modules(torch: Any) -> list[Any]:
    """The modules whose functions and classes turn the profiler's records into the events the op
    counts read (``_parse_kineto_results`` looks ``_rewrite_name``, ``_filter_name`` and
    ``FunctionEvent`` up in ``torch.autograd.profiler``): each callable name there is kept by identity
    (:func:`torch_attributes`); rebinding one named a softmax ``aten::clone`` or dropped its events
    (red-team helper, 2026-12-07). Their flags (``_is_profiler_enabled``) change with every session
    and are not kept."""
    import torch.autograd.profiler as profiler
    import torch.autograd.profiler_util as profiler_util
    import torch.profiler.profiler as kineto_profiler

    return [profiler, profiler_util, kineto_profiler]


def watched_classes(torch: Any) -> list[tuple[str, type]]:
    """``(label, class)`` of the torch classes the harness reads through: ``torch.Tensor`` (every tensor
    method the harness calls), and what the op counts read (:mod:`kbv.sandbox.profiling`): an op's
    ``overloadpacket`` and ``is_view``, the profiler's events' ``name`` and times, the dispatch mode's
    entry and exit. A data descriptor added to one (``OpOverload.overloadpacket`` made to answer
    ``aten.clone`` for a softmax, ``FunctionEvent.name`` likewise) hid a wrapper from both counts
    (red-team helper, 2026-12-07)."""
    import torch._ops as ops
    import torch.autograd.profiler as profiler
    import torch.autograd.profiler_util as profiler_util
    from torch.utils import _python_dispatch as dispatch

    return [("torch.Tensor", torch.Tensor), ("torch._ops.OpOverload", ops.OpOverload),
            ("torch._ops.OpOverloadPacket", ops.OpOverloadPacket),
            ("torch.autograd.profiler_util.FunctionEvent", profiler_util.FunctionEvent),
            ("torch.autograd.profiler_util.EventList", profiler_util.EventList),
            ("torch.autograd.profiler_util.FunctionEventAvg", profiler_util.FunctionEventAvg),
            ("torch.autograd.profiler.profile", profiler.profile),
            ("torch.profiler.profile", torch.profiler.profile),
            ("torch.utils._python_dispatch.TorchDispatchMode", dispatch.TorchDispatchMode)]


class TorchClassWatch:
    """The namespaces of :func:`watched_classes` as they were before the candidate loaded (worker
    side, taxonomy 4).

    Every tensor method the harness calls (``copy_``, ``__setitem__``, ``clone``, ``view``...) is
    looked up through ``torch.Tensor``: its C base (``torch._C.TensorBase``) is immutable, so a
    replaced method is a name bound or rebound in ``torch.Tensor``'s own namespace, and a wrapper
    there ran the candidate's code inside the harness's timed-input writes; the op counts read
    through the others. :meth:`check` names every name added, rebound or removed there (less what
    Python itself adds, :func:`kbv.sandbox.guard.lazy_class_name`) and puts the namespaces back. About
    250 names: a few µs a reply. (Importing triton, Inductor and running ``torch.compile`` change
    none of them.)"""

    def __init__(self, torch: Any) -> None:
        # each class with its bases: a data descriptor on a base (``FormattedTimesMixin.name``) overrides
        # an instance attribute of the subclass as one on the class itself does
        seen: dict[type, str] = {}
        for label, cls in watched_classes(torch):
            for k in cls.__mro__:
                if k.__module__ != "builtins" and k not in seen:
                    seen[k] = label if k is cls else f"{k.__module__}.{k.__qualname__}"
        self._classes = [(label, cls, dict(vars(cls))) for cls, label in seen.items()]

    def check(self) -> list[str]:
        found = []
        for label, cls, names in self._classes:
            now = vars(cls)
            if len(now) == len(names) and all(now.get(k, _EMPTY) is v for k, v in names.items()):
                continue
            changed = sorted({k for k in now if now[k] is not names.get(k, _EMPTY)
                              and not (k not in names and lazy_class_name(cls, k))}
                             | {k for k in names if k not in now})
            for k in changed:
                try:
                    if k in names:
                        type.__setattr__(cls, k, names[k])
                    else:
                        type.__delattr__(cls, k)
                except (AttributeError, TypeError):
                    pass
            found += [f"{label}.{k}" for k in changed]
        return found
