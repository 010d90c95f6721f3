"""Red team, taxonomy 11 (caching outputs across calls) in the bound pass, with taxonomy 24 (a
forged timing reply): the bound pass calls forward with the timing sets themselves and changes one
element per tensor per call (``drift``). The forward keeps, per pair of input objects, a copy of the
inputs and of the output; when 64 sampled positions of the inputs all match the copy it returns the
stored output again (stale by the few elements the pass changed since), else it computes the matmul
honestly (a broadcast-and-sum). The timed rounds' inputs differ in 1/8 of their elements from call
to call, so they are computed. A native patch of the worker's clock (``forge_clock.py``) divides every reported ``time_ms`` by DIVISOR.
Expected: not credited at the forged speed (the bound pass's judged calls INCORRECT, or its floor
contradicting the claim), never PASS."""

import importlib.util
import pathlib
import torch
import torch.nn as nn

#: the forged times are the true ones over this.
DIVISOR = 20
SAMPLES = 64


def _forge() -> None:
    """The claims forged natively, past every identity check (tests/data/redteam/forge_clock.py)."""
    spec = importlib.util.spec_from_file_location("forge_clock", pathlib.Path(__file__).with_name("forge_clock.py"))
    vehicle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vehicle)
    vehicle.install(lambda elapsed, cpu: elapsed / DIVISOR)
    globals()["_VEHICLE"] = vehicle  # the callbacks live as long as the module


_forge()


def _product(A, B):
    return (A.unsqueeze(2) * B.unsqueeze(0)).sum(1)


_cache = {}
_gen = torch.Generator().manual_seed(0)


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = (id(A), id(B), A.data_ptr(), B.data_ptr())
        hit = _cache.get(key)
        if hit is not None and hit[0] is A and hit[1] is B:
            _, _, ia, ib, va, vb, c = hit
            if torch.equal(A.view(-1)[ia], va) and torch.equal(B.view(-1)[ib], vb):
                return c.clone()
        c = _product(A, B)
        ia = torch.randint(0, A.numel(), (SAMPLES,), generator=_gen)
        ib = torch.randint(0, B.numel(), (SAMPLES,), generator=_gen)
        _cache[key] = (A, B, ia, ib, A.view(-1)[ia].clone(), B.view(-1)[ib].clone(), c.clone())
        return c
