"""The timed calls' mixed inputs made in new, unfilled tensors (``kbv.sandbox.timed_inputs.mix_values``)
and the re-check's changes made in place on them (``kbv.reference.mutation.apply_mutation(owned=)``):
the same values as a filled copy, and no timing set written (issue 21's bytes)."""
from __future__ import annotations

import pytest
import torch

import kbv.sandbox.timed_inputs as ti
from kbv.reference.mutation import apply_mutation


def _old_mix(args, source, seed, skip=(), fraction=ti.MIX_FRACTION):
    """mix_values with its new tensor filled from ``a`` first: what every element must equal."""
    out = []
    for ai, (a, b) in enumerate(zip(args, source)):
        if ti._mixes(ai, a, b, skip):
            g = torch.Generator(device=a.device)
            g.manual_seed((int(seed) + ai) % (1 << 63))
            b = b.to(device=a.device, dtype=a.dtype)
            dst = a.clone(memory_format=torch.contiguous_format)
            if fraction >= 1:
                dst.copy_(b)
            else:
                flat, base, src = dst.view(-1), a.reshape(-1), b.reshape(-1)
                for s in range(0, flat.numel(), ti.MIX_CHUNK_ELEMENTS):
                    part = flat[s:s + ti.MIX_CHUNK_ELEMENTS]
                    mask = ti._mix_mask(part.shape, fraction, g, a.device)
                    torch.where(mask, src[s:s + ti.MIX_CHUNK_ELEMENTS], base[s:s + ti.MIX_CHUNK_ELEMENTS], out=part)
            a = dst
        out.append(a)
    return out


def _cases():
    r = torch.randn
    return {
        "conj": (r(5, 7, dtype=torch.cfloat).conj(), r(5, 7, dtype=torch.cfloat)),
        "neg": (r(5, 7, dtype=torch.cfloat).conj().imag, r(5, 7)),
        "transposed": (r(7, 5).t(), r(5, 7)),
        "expanded": (r(1, 7).expand(5, 7), r(5, 7)),
        "channels_last": (r(2, 3, 4, 5).to(memory_format=torch.channels_last), r(2, 3, 4, 5)),
        "bool": (torch.rand(50) > 0.5, torch.rand(50) > 0.5),
        "int": (torch.randint(0, 9, (50,)), torch.randint(0, 9, (50,))),
        "0d": (torch.tensor(3.0), torch.tensor(4.0)),
        "empty": (torch.empty(0, 3), torch.empty(0, 3)),
        "half_from_f64": (r(100).half(), r(100, dtype=torch.float64)),
        "nan": (torch.full((100,), float("nan")), r(100)),
        "chunks": (r(ti.MIX_CHUNK_ELEMENTS + 5), r(ti.MIX_CHUNK_ELEMENTS + 5)),
    }


@pytest.mark.parametrize("fraction", [ti.MIX_FRACTION, 1.0, 0.5, 0.3, 0.0])
def test_mix_values_empty_like_equals_old_clone(fraction):
    torch.manual_seed(0)
    for name, (a, b) in _cases().items():
        new, old = ti.mix_values([a], [b], 123, (), fraction)[0], _old_mix([a], [b], 123, (), fraction)[0]
        assert new.stride() == old.stride() and new.dtype == old.dtype, name
        n, o = new.resolve_conj().resolve_neg(), old.resolve_conj().resolve_neg()
        same = (n == o) | ((n != n) & (o != o)) if n.is_floating_point() or n.is_complex() else n == o
        assert bool(same.all()), name


def test_owned_mutation_leaves_timing_sets_and_matches_worker_values():
    torch.manual_seed(1)
    sets = [[torch.randn(6, 5), torch.randn(4).t(), torch.randint(0, 5, (3,)), 2.0] for _ in range(3)]
    before = [[t.clone() if isinstance(t, torch.Tensor) else t for t in s] for s in sets]
    for mix in [(1, 77, ()), (1, 77, (0,)), (0, 0, (), 1.0), (2, 5, (1, 2), 0.5)]:
        mutation = ((0, (1, 2), 9.0), (1, (3,), -4.0), (2, (0,), 4), (0, (0, 0), 7.0))
        k = 0
        args = ti.mix_values(sets[k], sets[mix[0]], *mix[1:])
        args = apply_mutation(args, mutation, owned={i for i, (a, b) in enumerate(zip(args, sets[k]))
                                                     if isinstance(a, torch.Tensor) and a is not b})
        # the worker's own rebuild into fresh buffers
        buf = [torch.empty_like(t) if isinstance(t, torch.Tensor) else t for t in sets[k]]
        worker = ti.call_inputs(buf, sets, k, mix, mutation)
        for a, w in zip(args, worker):
            assert torch.equal(a, w) if isinstance(a, torch.Tensor) else a == w
        for s, b in zip(sets, before):  # no timing set written
            for t, u in zip(s, b):
                assert torch.equal(t, u) if isinstance(t, torch.Tensor) else t == u


