"""The harness guard's reach (kbv.sandbox.guard.HarnessGuard) and the worker's torch.library
check through the names the worker calls (kbv.sandbox.probe_requests.ProbeRequests._new_op_kernels)."""

from __future__ import annotations

import tempfile

import pytest

from kbv.sandbox import guard, call_probes as probes, protocol, timed, timer as timing
import kbv.sandbox.probe_requests as probe_requests
import kbv.sandbox.worker as worker


def test_a_name_imported_from_another_watched_module_is_watched_where_it_is_called():
    """Regression: the worker calls ``probes.torch_op_overrides`` and its own ``_flatten``, both
    defined in another module since the split into guard/timed; the guard watched only the
    originals, so replacing the name the worker calls went unreported and stayed in place."""
    g = guard.HarnessGuard([probes, guard, timing, protocol, timed, worker])
    orig = probes.torch_op_overrides, worker._flatten
    try:
        probes.torch_op_overrides = lambda *a, **k: []
        worker._flatten = lambda out: ((out,), "tensor")
        changed = g.check()
        assert "kbv.sandbox.call_probes.torch_op_overrides" in changed
        assert "kbv.sandbox.worker._flatten" in changed
        assert (probes.torch_op_overrides, worker._flatten) == orig  # put back
        assert g.check() == []
    finally:
        probes.torch_op_overrides, worker._flatten = orig


def test_the_probes_tables_and_bound_torch_entry_points_are_watched():
    """Regression (red-team t15-probe-table): rebinding ``profiling.NO_MATH_OPS`` through
    ``sys.modules`` hid a softmax wrapper from both op counts (PASS); the guard kept functions and
    classes only. Module-level tables, the torch callables a probe bound at import and the items of
    a dict/list/set are kept now, reported and put back; ``sys.modules`` (every import adds to it)
    and a run of the probes themselves are no change."""
    import torch
    from kbv.sandbox import numeric_flags as flags, profiling

    g = guard.HarnessGuard([flags, profiling, protocol])
    saved = profiling.NO_MATH_OPS, profiling._profile, profiling._modules, dict(flags._TF32_SWITCHES)
    try:
        import kbv.sandbox.peak_memory  # noqa: F401 - sys.modules changes
        assert profiling.compute_ops(lambda x: x.sin(), [torch.ones(2)]).error is None
        assert g.check() == []
        profiling.NO_MATH_OPS = saved[0] | {"softmax"}
        profiling._profile = object
        profiling._modules = {}
        flags._TF32_SWITCHES["eager-fp32"] = (True, True, "high")
        protocol._FIELDS[protocol.Ping] = ("forged",)
        changed = g.check()
        assert set(changed) == {"kbv.sandbox.profiling.NO_MATH_OPS", "kbv.sandbox.profiling._profile",
                                "kbv.sandbox.profiling._modules", "kbv.sandbox.numeric_flags._TF32_SWITCHES items",
                                "kbv.sandbox.protocol._FIELDS items"}, changed
        assert (profiling.NO_MATH_OPS, profiling._profile, profiling._modules) == saved[:3]
        assert flags._TF32_SWITCHES == saved[3] and protocol._FIELDS[protocol.Ping] == ("trim",)
        assert g.check() == []
    finally:
        profiling.NO_MATH_OPS, profiling._profile, profiling._modules = saved[:3]
        flags._TF32_SWITCHES.update(saved[3])
        protocol._FIELDS[protocol.Ping] = ("trim",)


def test_a_closure_cell_and_a_static_method_are_watched():
    """Regression (red team): the op counter's Dynamo-safe dispatch is a wrapper whose closure cell
    holds the counting function; rebinding that cell (after ``import torch._dynamo``, which makes
    the counter call the wrapper) counted no op at all, with the function, its code and its
    defaults unchanged. A static method of a watched class (``ThreadWork._plumbing``) was not
    watched either. Both are reported and put back."""
    import torch
    import torch._dynamo  # noqa: F401 - the counter calls the wrapper from now on
    from kbv.sandbox import profiling

    g = guard.HarnessGuard([profiling, probes])
    cell = profiling._DYNAMO_SAFE_DISPATCH.__closure__[0]
    saved, plumbing = cell.cell_contents, vars(probes.ThreadWork)["_plumbing"]
    try:
        cell.cell_contents = lambda self, func, types, args=(), kwargs=None: func(*args, **(kwargs or {}))
        probes.ThreadWork._plumbing = staticmethod(lambda *a: True)
        assert profiling.compute_ops(lambda x: torch.softmax(x, 1), [torch.ones(2, 2)]).ops == {}
        assert set(g.check()) == {"kbv.sandbox.profiling._DYNAMO_SAFE_DISPATCH closure",
                                  "kbv.sandbox.call_probes.ThreadWork._plumbing"}
        assert cell.cell_contents is saved and vars(probes.ThreadWork)["_plumbing"] is plumbing
        assert profiling.compute_ops(lambda x: torch.softmax(x, 1), [torch.ones(2, 2)]).ops == {"aten._softmax": 1}
        assert g.check() == []
    finally:
        cell.cell_contents = saved
        probes.ThreadWork._plumbing = plumbing


def test_every_name_the_worker_reads_from_probes_exists():
    """Regression: the worker read ``probes.TORCH_OP_NAMESPACES``, which the split left in guard
    only; the AttributeError was swallowed and the torch.library check found nothing."""
    import ast
    import inspect

    used = {n.attr for module in (worker, probe_requests) for n in ast.walk(ast.parse(inspect.getsource(module)))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "integrity"}
    assert used and not [a for a in used if not hasattr(probes, a)]


def _loaded(tmp_path, source: str, name: str, loads: bool = True) -> "protocol.Loaded":
    """The reply of a real candidate worker to loading ``source`` as module ``name`` (a ``Loaded``
    unless ``loads`` is False)."""
    from kbv.processes.candidate import CandidateProcess
    from kbv.sandbox.numeric_flags import flags_for

    cand = tmp_path / f"{name}.py"
    cand.write_text(source)
    with CandidateProcess(device="cpu", build_dir=tempfile.mkdtemp(dir=tmp_path)) as w:
        w.send(protocol.Load(str(cand), name, (), 0, "cpu", "fp32", flags_for("eager-fp32")), phase="load")
        reply = w.receive(phase="load", timeout=300)
    assert isinstance(reply, protocol.Loaded) or not loads, reply
    return reply


OVERRIDE = '''
import torch
import torch.nn as nn

_lib = torch.library.Library("".join(["at", "en"]), "IMPL")  # no constant: the static scan misses it
_lib.impl("sinc", lambda x: torch.softmax(x, dim=1), "CPU")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.sinc(x)
'''


@pytest.mark.e2e
def test_the_worker_reports_an_aten_kernel_registered_at_load(tmp_path):
    """Regression: the run-time half of taxonomy 15's aten override (``t15-aten-override`` is caught
    by the static scan first, so it did not notice): the Load reply carries the tampering report."""
    reply = _loaded(tmp_path, OVERRIDE, "kbv_guard_test")
    assert any("aten::sinc/CPU" in t.detail and t.kind == protocol.HARNESS_PATCHED for t in reply.tampering), \
        reply.tampering


SHADOW = '''
import ctypes
import torch
import torch.nn as nn

# the server, found through native code the frame watch does not see (C's current frame, then f_back)
_get = ctypes.pythonapi.PyEval_GetFrame
_get.restype = ctypes.py_object
_f = _get()
while _f is not None:
    _o = _f.f_locals.get("self")
    if type(_o).__name__ == "_Server":
        _o._check_flags = lambda: ()  # an instance attribute: every later self._check_flags() call is this
        break
    _f = _f.f_back


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)
'''

SHADOW_BY_GC = '''
import importlib
import torch.nn as nn

for _o in importlib.import_module("".join(["g", "c"])).get_objects():  # the server, found without naming gc
    if type(_o).__name__ == "_Server":
        _o._check_flags = lambda: ()


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)
'''


@pytest.mark.e2e
def test_an_instance_attribute_shadowing_a_server_method_is_reported_and_dropped(tmp_path):
    """The class's methods are watched by the guard; an attribute set on the server instance shadows
    one for every later ``self.<name>`` call (red-team finding): the worker drops it and reports it.
    The server reached by native code, which the frame watch does not see; through the garbage
    collector the load is refused and reported instead."""
    reply = _loaded(tmp_path, SHADOW, "kbv_shadow_test")
    assert any("worker._check_flags (shadowed)" in t.detail for t in reply.tampering), reply.tampering
    refused = _loaded(tmp_path, SHADOW_BY_GC, "kbv_shadow_gc_test", loads=False)
    assert isinstance(refused, protocol.Failed) and "gc.get_objects is refused" in refused.message
    assert any(t.kind == protocol.FRAME_ACCESS for t in refused.tampering), refused.tampering


def test_tensor_class_watch_names_and_restores_replaced_and_added_methods():
    import torch

    from kbv.sandbox.torch_state import TorchClassWatch

    watch = TorchClassWatch(torch)
    setitem = torch.Tensor.__setitem__
    try:
        torch.Tensor.__setitem__ = lambda self, i, v: None  # rebound in torch.Tensor's own namespace
        torch.Tensor.copy_ = lambda self, src: self  # added there, shadowing TensorBase.copy_
        assert watch.check() == ["torch.Tensor.__setitem__", "torch.Tensor.copy_"]
        assert torch.Tensor.__setitem__ is setitem and "copy_" not in vars(torch.Tensor)
        assert watch.check() == []
    finally:
        torch.Tensor.__setitem__ = setitem
        vars(torch.Tensor).get("copy_") and delattr(torch.Tensor, "copy_")


def test_mode_shield_takes_off_a_left_mode_and_keeps_torchs_device_context():
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from kbv.sandbox.torch_state import ModeShield

    class Left(TorchFunctionMode):
        pass

    class LeftDispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    shield = ModeShield(torch)
    device = torch.device("cpu")
    device.__enter__()  # torch's own device context: kept
    # pushed as a candidate's ``__enter__`` would, without torch's Python-side bookkeeping, which the
    # shield's pop leaves alone (the test process goes on with other tests)
    torch._C._push_on_torch_function_stack(Left())
    torch._C._push_on_torch_dispatch_stack(LeftDispatch())
    try:
        assert shield.take() == ["torch function mode Left left on", "torch dispatch mode LeftDispatch left on"]
        assert torch._C._len_torch_dispatch_stack() == 0
        assert torch._C._len_torch_function_stack() == 1  # the device context
        assert shield.take() == []
    finally:
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        while torch._C._len_torch_dispatch_stack():
            torch._C._pop_torch_dispatch_stack(None)


def test_a_name_added_to_a_guarded_module_is_reported_and_removed():
    """A global added later shadows a builtin for the module's functions (red-team helper, eighth
    session: ``type`` added to kbv.sandbox.timed finished an output after the clock)."""
    import types

    from kbv.sandbox.guard import HarnessGuard

    m = types.ModuleType("kbv_guard_probe")
    exec("def kind(x):\n    return type(x).__name__\n", vars(m))
    guard = HarnessGuard([m])
    m.type = lambda x: int  # shadows the builtin inside kind()
    m.__warningregistry__ = {}  # Python's own bookkeeping: not a name the guard owns
    assert m.kind(1.0) == "int"
    assert guard.check() == ["kbv_guard_probe.type (added)"]
    assert m.kind(1.0) == "float" and "type" not in vars(m)
    assert guard.check() == []


def test_defaults_are_compared_by_identity_and_only_where_the_function_had_them():
    """The check reads a function's defaults only where it had some (each read is an audit event
    the worker's hooks see), and compares them by identity: an equal stand-in is found, and its
    ``__eq__`` never runs inside the check."""
    import types

    from kbv.sandbox.guard import HarnessGuard

    m = types.ModuleType("kbv_guard_defaults")
    exec("def scaled(x, k=2.0):\n    return x * k\ndef plain(x):\n    return x\n"
         "def keyword(x, *, k=3.0):\n    return x * k\n", vars(m))
    guard = HarnessGuard([m])
    ran = []

    class Equal(float):
        def __eq__(self, other):
            ran.append("eq")
            return True

        __hash__ = float.__hash__

    m.scaled.__defaults__ = (Equal(2.0),)
    m.keyword.__kwdefaults__ = {"k": 30.0}
    m.plain.__defaults__ = (1,)  # no call the harness makes passes fewer arguments: no effect
    assert sorted(guard.check()) == ["kbv_guard_defaults.keyword internals", "kbv_guard_defaults.scaled internals"]
    assert ran == [] and m.scaled(1.0) == 2.0 and m.keyword(1.0) == 3.0
    assert guard.check() == []


def test_a_name_added_to_a_guarded_class_is_reported_and_removed_and_pythons_own_are_not():
    """Regression (red team, row t15-opcount-descriptor): data descriptors added to ``OpCount`` filtered
    what the op counts returned, with every existing name in place. Python's own lazy names holding
    what Python puts there are no change; the same names forged are."""
    import copyreg

    from kbv.sandbox import op_tables

    g = guard.HarnessGuard([op_tables])
    cls = op_tables.OpCount
    try:
        type.__setattr__(cls, "ops", property(lambda self: {}))
        assert g.check() == ["kbv.sandbox.op_tables.OpCount.ops (added)"]
        assert "ops" not in vars(cls) and op_tables.OpCount(ops={"aten.relu": 1}).ops == {"aten.relu": 1}
        copyreg._slotnames(cls)  # what pickling an instance caches: []
        assert g.check() == []
        type.__setattr__(cls, "__slotnames__", ["error"])  # forged: would leave fields out of a pickle
        assert g.check() == ["kbv.sandbox.op_tables.OpCount.__slotnames__ (added)"]
        assert g.check() == []
    finally:
        for name in ("ops", "__slotnames__"):
            vars(cls).get(name) is not None and type.__delattr__(cls, name)


def test_the_op_counts_torch_classes_are_watched_as_torch_tensor_is():
    """Regression (red team, row t15-torch-class-descriptor): a property over
    ``OpOverload.overloadpacket`` and a descriptor over ``FunctionEvent.name`` relabelled a softmax as
    a copy for both op counts; each is named and put back."""
    import torch
    import torch._ops as ops
    import torch.autograd.profiler_util as events

    from kbv.sandbox.torch_state import TorchClassWatch

    watch = TorchClassWatch(torch)
    packet = vars(ops.OpOverload)["overloadpacket"]
    try:
        type.__setattr__(ops.OpOverload, "overloadpacket", property(lambda self: "aten.clone"))
        type.__setattr__(events.FunctionEvent, "name", property(lambda self: "aten::clone"))
        assert watch.check() == ["torch._ops.OpOverload.overloadpacket", "torch.autograd.profiler_util.FunctionEvent.name"]
        assert vars(ops.OpOverload)["overloadpacket"] is packet and "name" not in vars(events.FunctionEvent)
        assert str(torch.ops.aten.relu.default.overloadpacket) == "aten.relu"
        assert watch.check() == []
    finally:
        type.__setattr__(ops.OpOverload, "overloadpacket", packet)
        vars(events.FunctionEvent).get("name") is not None and type.__delattr__(events.FunctionEvent, "name")


def test_the_profiler_modules_callables_are_watched_and_their_flags_are_not():
    """Regression (red team, row t15-profiler-module-names): rebinding ``_filter_name`` in
    ``torch.autograd.profiler`` dropped a softmax's events from the profiler count. Its callables are
    kept by identity; ``_is_profiler_enabled``, which every session flips, is not."""
    import torch
    import torch.autograd.profiler as profiler

    from kbv.sandbox.torch_state import torch_attributes

    g = guard.HarnessGuard([], torch_attributes(torch))
    keep = profiler._filter_name
    try:
        with torch.autograd.profiler.profile(use_kineto=True) as prof:
            torch.ones(4).sin()
        assert prof.function_events and g.check() == []
        profiler._filter_name = lambda name: True
        assert g.check() == ["torch.autograd.profiler._filter_name"] and profiler._filter_name is keep
    finally:
        profiler._filter_name = keep


def test_honest_torch_use_changes_nothing_the_class_and_profiler_watches_keep():
    """What an honest candidate may do with torch (its own profiler sessions, pickled events, its own
    dispatch mode, reading classes' annotations) is no change to the watched torch classes, their
    bases or torch's profiler modules: no false ``probe:harness-identity``."""
    import pickle

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from kbv.sandbox.torch_state import TorchClassWatch, torch_attributes

    watch, g = TorchClassWatch(torch), guard.HarnessGuard([], torch_attributes(torch))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.randn(16, 16) @ torch.randn(16, 16)
    prof.key_averages().table()
    with torch.autograd.profiler.profile(use_kineto=True, record_shapes=True) as prof2:
        torch.softmax(torch.randn(8, 8), 1)
    pickle.dumps(prof2.function_events)

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Passthrough():
        torch.randn(3).sin()
    for cls in (torch._ops.OpOverload, torch.autograd.profiler_util.FunctionEvent, torch.profiler.profile):
        getattr(cls, "__annotations__", None)
    assert watch.check() == [] and g.check() == []
