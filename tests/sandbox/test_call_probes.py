"""probe:harness-identity's torch.library check (kbv.sandbox.call_probes.torch_op_overrides): only a
registration that replaces one of torch's own ops, as it existed before the candidate loaded,
made from outside torch, is a wrapper hidden behind another op; torch.compile's own new ops are not.
"""

from __future__ import annotations

import os

from kbv.sandbox.call_probes import registration_sites, torch_op_overrides

TORCH = "/venv/lib/python3.11/site-packages/torch"
BEFORE = {"aten::sinc", "aten::add.Tensor", "aten::cos", "_c10d_functional::all_reduce"}


def test_override_of_an_existing_aten_op_from_the_candidate_is_found():
    sites = {"aten::sinc": {"CPU": "/tmp/cand/model.py:12"}}
    assert torch_op_overrides({"aten/sinc/CPU"}, BEFORE, sites, TORCH) == \
        ["aten::sinc/CPU (registered at /tmp/cand/model.py:12)"]


def test_inductor_new_prims_ops_and_tracing_keys_are_not_overrides():
    new = {"prims/fma/CompositeExplicitAutograd", "prims/fma/Autograd", "prims/prepare_softmax_online/Meta",
           "aten/cos/Meta", "_c10d_functional/all_reduce/Autograd"}
    sites = {"prims::fma": {"CompositeExplicitAutograd": f"{TORCH}/_inductor/inductor_prims.py:30"}}
    assert torch_op_overrides(new, BEFORE, sites, TORCH) == []


def test_torch_registering_on_its_own_existing_op_is_not_an_override():
    sites = {"aten::cos": {"CompositeImplicitAutograd": f"{TORCH}/_decomp/decompositions.py:10"}}
    assert torch_op_overrides({"aten/cos/CompositeImplicitAutograd"}, BEFORE, sites, TORCH) == []


def test_a_registration_through_torchs_generic_helpers_counts():
    """``torch.library.impl("aten::cos", "CPU")`` is recorded at torch/library.py: anyone may call it."""
    sites = {"aten::cos": {"CPU": f"{TORCH}/library.py:931"}, "aten::add.Tensor": {"CPU": ""}}
    found = torch_op_overrides({"aten/cos/CPU", "aten/add.Tensor/CPU"}, BEFORE, sites, TORCH)
    assert [f.split(" ")[0] for f in found] == ["aten::add.Tensor/CPU", "aten::cos/CPU"]


def test_registration_sites_reads_the_dispatch_dump():
    dump = ("name: aten::sinc\nschema: aten::sinc(Tensor self) -> Tensor\n"
            "debug: registered at /b/RegisterSchema.cpp:6\n"
            "CPU: registered at /tmp/c.py:3 :: (none) [ boxed ]\n"
            "CPU (inactive): registered at /b/RegisterCPU_0.cpp:4132 :: (Tensor _0) -> Tensor _0 [ boxed unboxed ]\n"
            "Autograd[alias]: registered at /tmp/c.py:5 :: (none) [ boxed ]\n")
    assert registration_sites(dump) == {"CPU": "/tmp/c.py:3", "Autograd": "/tmp/c.py:5"}


def test_the_real_registry_after_torch_compile_and_after_an_override(tmp_path):
    """The same check over torch's live registry, as the candidate worker runs it."""
    import torch

    impls, ops = set(torch.library._impls), frozenset(torch._C._dispatch_get_all_op_names())

    def check():
        new = set(torch.library._impls) - impls
        sites = {}
        for e in new:
            ns, _, rest = e.partition("/")
            q = f"{ns}::{rest.rpartition('/')[0]}"
            sites[q] = registration_sites(torch._C._dispatch_dump(q))
        return torch_op_overrides(new, ops, sites, os.path.dirname(torch.__file__))

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("special_sinc", lambda x: x, "CPU")
    try:
        assert [f.split(" ")[0] for f in check()] == ["aten::special_sinc/CPU"]
    finally:
        lib._destroy()


def test_a_registry_replaced_after_load_is_reported_not_taken_as_empty():
    """The worker's check caught every exception and answered "no override": a candidate that
    replaced ``torch.library._impls`` with something unreadable switched it off silently."""
    from types import SimpleNamespace

    import torch

    from kbv.sandbox import call_probes as probes
    from kbv.sandbox.worker import _Server

    class Unreadable:
        def __iter__(self):
            raise RuntimeError("no")

    fake = SimpleNamespace(library=SimpleNamespace(_impls=Unreadable()), _C=torch._C, __file__=torch.__file__)
    server = SimpleNamespace(torch=fake, integrity=probes, _op_impls=set(), _ops_before=frozenset(),
                             _registry_at_load=True)
    assert _Server._new_op_kernels(server) == ["torch.library's registry (unreadable since load: RuntimeError)"]
    server._registry_at_load = False  # a torch without the registry from the start: nothing to check
    assert _Server._new_op_kernels(server) == []
    server.torch = torch  # the live registry, unchanged since the snapshot: nothing new
    server._op_impls = set(torch.library._impls)
    assert _Server._new_op_kernels(server) == []


# the dispatcher's own registry (kbv.sandbox.op_kernels.dispatcher_overrides, DispatcherWatch): kernels
# registered from C++ (TORCH_LIBRARY_IMPL) never enter torch.library's registry

BUILT = "/__w/pytorch/pytorch/build/aten/src/ATen"
BEFORE_SITES = {"aten::copy_": {"CompositeExplicitAutograd": f"{BUILT}/RegisterCompositeExplicitAutograd_0.cpp:3346",
                                "Autograd": "/__w/pytorch/pytorch/torch/csrc/autograd/VariableTypeManual.cpp:349"},
                "aten::mm": {"CPU": f"{BUILT}/RegisterCPU_0.cpp:10"}}


def test_a_cpp_kernel_for_an_existing_aten_op_is_an_override():
    from kbv.sandbox.op_kernels import dispatcher_overrides

    after = {"aten::copy_": {**BEFORE_SITES["aten::copy_"], "CPU": "/cache/build/ext/main.cpp:15"},
             "aten::mm": {"CPU": "/cache/build/ext/main.cpp:16", "Meta": "/cache/build/ext/main.cpp:17"}}
    assert dispatcher_overrides(BEFORE_SITES, after, TORCH) == [
        "aten::copy_/CPU (registered at /cache/build/ext/main.cpp:15)",
        "aten::mm/CPU (registered at /cache/build/ext/main.cpp:16)"]  # Meta computes nothing


def test_torchs_own_new_ops_and_kernels_are_not_overrides():
    from kbv.sandbox.op_kernels import dispatcher_overrides

    after = {"aten::mm": {"CPU": f"{BUILT}/RegisterCPU_0.cpp:10", "AutogradCPU": f"{TORCH}/_decomp/x.py:3"},
             "prims::fma": {"CompositeExplicitAutograd": f"{TORCH}/_inductor/inductor_prims.py:30"},
             "mine::relu": {"CPU": "/cache/build/ext/main.cpp:3"}}
    assert dispatcher_overrides(BEFORE_SITES, after, TORCH) == []
    generic = {"aten::mm": {"CPU": f"{TORCH}/library.py:505"}}  # anyone may call torch.library
    assert dispatcher_overrides(BEFORE_SITES, generic, TORCH) == [
        f"aten::mm/CPU (registered at {TORCH}/library.py:505)"]


def test_the_dispatcher_watch_sees_a_registration_in_the_live_registry():
    """A light check (the one after every timed call) names an override of one of the harness's
    own ops at once; a full check names one of any other op; each is named once."""
    import torch

    from kbv.sandbox.op_kernels import DispatcherWatch

    watch = DispatcherWatch(torch)
    assert watch.check(full=True) == [] and watch.check(full=False) == []
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("clone", lambda x, memory_format=None: x, "CPU")
        assert [f.split(" ")[0] for f in watch.check(full=False)] == ["aten::clone/CPU"]
        lib.impl("special_sinc", lambda x: x, "CPU")
        assert [f.split(" ")[0] for f in watch.check(full=True)] == ["aten::special_sinc/CPU"]
        assert watch.check(full=True) == []
    finally:
        lib._destroy()
