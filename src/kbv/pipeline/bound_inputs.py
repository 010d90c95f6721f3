"""The values of a bound pass's calls (:mod:`kbv.pipeline.bound_pass`), written by the trusted side
into the pass's own input sets while the candidate's tree is stopped, and made again for the
judged calls' re-checks: a fresh draw of the problem's ``get_inputs()`` per call, mixed as a timed
call's inputs are, where it fits (:func:`kbv.checks.bound_plan.fresh_draws_fit`); else two timing
sets mixed (:data:`BOUND_MIX_FRACTION`)."""

from __future__ import annotations

import secrets
import time
from typing import NamedTuple

import torch

from kbv.checks.outputs import bitwise_equal
from kbv.pipeline.context import Context
from kbv.reference import inputs as inp
from kbv.reference.mutation import timed_mutation
from kbv.sandbox import timer

#: share of each input's elements taken from another timing set per call of a bound pass, at random
#: positions (:func:`kbv.sandbox.timed_inputs.mix_values`, as the rounds' mix; kbv choice): no row or block
#: of a call's inputs repeats one of a timing set's (a cache keyed on row content won while the mix
#: moved whole rows, red-team row t11-bound-pass-row-cache), and a cache that patches its last
#: answer where the inputs changed redoes at least half the work.
BOUND_MIX_FRACTION = 0.5


class PassCall(NamedTuple):
    """One call's values in a bound pass: a fresh ``get_inputs()`` draw under seed ``draw`` in timing
    set ``set_index``'s place with a timed call's share of elements from timing set ``source``; where
    ``draw`` is None, timing set ``set_index`` with :data:`BOUND_MIX_FRACTION` from set ``source``.
    ``seed``: the mix's positions; ``changes``: :func:`kbv.reference.mutation.timed_mutation`'s."""

    set_index: int
    source: int | None
    seed: int
    changes: tuple
    draw: int | None = None


class PassValues:
    """How one verification's bound passes make their calls' values (module docstring)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: how the passes take fresh draws (:meth:`fresh_draw_ms`): "seed" (made again from their seeds),
        #: "kept" (a get_inputs() no seed reproduces: each draw kept for its pass), or "" (none: two
        #: timing sets mixed)
        self.fresh = ""
        self.kept: dict[int, list] = {}  # the "kept" draws of the current pass, by seed

    def fresh_draw_ms(self, sets: list) -> tuple[float | None, bool]:
        """(Milliseconds of one fresh draw, whether a second draw under the same seed gave the same
        values) where the pass's calls can take them (:meth:`kbv.pipeline.context.Context._fresh_draw_for`);
        else (None, False): the pass mixes two timing sets."""
        seed = inp.secret_seed()
        t0 = time.perf_counter()
        args = self.ctx._fresh_draw_for(sets, seed)
        ms = (time.perf_counter() - t0) * 1e3
        # written again before the re-checks (cpu) and made again for them (cuda) from the seed: a
        # get_inputs() no seed controls (numpy's default_rng() at import) gave other values the
        # second time, and an honest ReLU a HACK (red-team helper, twentieth session)
        again = self.ctx._fresh_draw_for(sets, seed) if args is not None else None
        if again is None:
            return None, False
        return ms, all(bitwise_equal(a, b) for a, b in zip(args, again) if isinstance(a, torch.Tensor))

    def plan(self, sets: list, calls: int) -> list[PassCall]:
        """Each call's values of one pass, drawn here (:class:`PassCall`): a fresh draw's seed each,
        made into the call's inputs as a timed call's are from its timing set
        (:data:`kbv.sandbox.timed_inputs.MIX_FRACTION` of each tensor's elements from a timing set,
        one element per tensor changed, :func:`kbv.reference.mutation.timed_mutation`), so the pass's
        inputs have the timed calls' patterns (pure draws kept a sorted input sorted, which the timed
        calls' mix breaks: an honest early-exit scan was 8-15x slower there and got a HACK, red-team
        helper, twentieth session). Where the pass mixes, :data:`BOUND_MIX_FRACTION` of each tensor's
        elements from another timing set and one element per tensor changed. Inputs of declared
        structured domains are left out of either mix."""
        n = len(sets)
        skip = self.ctx._structured()
        g = torch.Generator().manual_seed(secrets.randbits(62))
        self.kept = {}
        plan = []
        for j in range(calls):
            # call j's set is the pass's set j, made from timing set j % n (BoundStage._bound): its plain
            # arguments are the ones the worker holds there, whatever the mix writes (a seeded random
            # int that differed between timing sets gave an honest kernel a HACK, newcomer, twentieth session)
            k = j % n
            if self.fresh:
                # the draw takes the timing set's place: its layout, and a timing set as the mix's source
                plan.append(PassCall(k, secrets.randbelow(n), secrets.randbits(62),
                                     timed_mutation(sets[k], sets[(k + 1) % n], g, skip, self.ctx._kinds()),
                                     inp.secret_seed()))
                continue
            src = (k + 1 + secrets.randbelow(n - 1)) % n if n > 1 else None
            plan.append(PassCall(k, src, secrets.randbits(62),
                                 timed_mutation(sets[k], sets[(k + 1) % n], g, skip, self.ctx._kinds())))
        return plan

    def write(self, sets: list, bound_sets: list, plan: list) -> None:
        """Write ``plan``'s values (:meth:`plan`) into ``bound_sets`` (the worker stopped: the
        candidate's calls see them when it runs again, and the trusted loops and the re-checks get
        them again, whatever the candidate wrote into the shared sets)."""
        for target, call in zip(bound_sets, plan):
            self.call_inputs(sets, call, target)

    def call_inputs(self, sets: list, call: PassCall, into: list | None = None) -> list:
        """One call's values of a pass (``call`` one entry of :meth:`plan`), written into
        ``into`` in place through kbv.sandbox.timed_inputs.call_inputs (a fresh draw's tensors the one
        input-sized temporary, dropped after unless the pass keeps them), or without it into new
        tensors of this process with the timing set's strides (as the pass's sets have them:
        inp.shared_clone keeps a dense layout)."""
        k, src, seed, changes, draw = call
        if draw is not None:
            base = self.kept.get(draw) if self.fresh == "kept" else None
            if base is None:
                base = self.ctx._fresh_draw(draw)
                if self.fresh == "kept":
                    self.kept[draw] = base
            if into is None:
                into = [torch.empty_like(a) if isinstance(a, torch.Tensor) else a for a in sets[k]]
            # the draw in the timing set's place (index 0), the mix's source a timing set after it
            return timer.call_inputs(into, [base, *sets], 0, (1 + src, seed, self.ctx._structured()), changes)
        if into is None:
            into = [torch.empty_like(a) if isinstance(a, torch.Tensor) else a for a in sets[k]]
        mix = (src, seed, self.ctx._structured(), BOUND_MIX_FRACTION) if src is not None else ()
        return timer.call_inputs(into, sets, k, mix, changes)
