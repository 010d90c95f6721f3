"""Unit tests of the diff-and-patch checks (issue 15, taxonomy 3 and 11): the repeat-gain rule,
the timing-set cap that puts a small problem on the two-set path, and the driver's answer about
what memory a cuda output lies in (read here through a stand-in driver)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch

from kbv.checks.probe_rules import output_memory_finding
from kbv.checks.timing_rules import REPEAT_GAIN_MIN_MS, REPEAT_GAIN_RATIO, rank_sum_p, repeat_gain, repeat_gain_confirmed
from kbv.model.records import EvalConfig, Severity
from kbv.pipeline.context import State
from kbv.pipeline.repeat import REPEAT_CONFIRM_PAIRS, RepeatGain
from kbv.sandbox import pointers


def test_repeat_gain_compares_the_cheapest_calls():
    """The cheapest repeat against the cheapest fresh call: a cache answering repeats 10x cheaper
    is seen even when noise inflates most of its repeats, and an honest kernel whose every call
    costs the same is not, however much noise inflates some of its fresh calls."""
    assert repeat_gain([3.3, 2.8, 4.2], [0.32, 4.1])  # one uninflated repeat is enough
    assert not repeat_gain([2.0, 9.0, 8.0], [2.1, 2.0])  # honest: noisy fresh calls, cheapest alike
    assert not repeat_gain([1.0], [1.0 / REPEAT_GAIN_RATIO * 1.01])  # under the ratio
    tiny = REPEAT_GAIN_MIN_MS / 2
    assert not repeat_gain([tiny], [tiny / 100])  # over the ratio, but too small a difference to trust
    assert not repeat_gain([], [0.1]) and not repeat_gain([1.0], [])


def test_timing_input_bytes_is_a_non_negative_cap():
    assert EvalConfig().timing_input_bytes == 0
    assert EvalConfig(timing_input_bytes=1).timing_input_bytes == 1
    with pytest.raises(ValueError, match="timing_input_bytes"):
        EvalConfig(timing_input_bytes=-1)


class _Driver:
    """Answers cuPointerGetAttribute like the CUDA driver: IS_MANAGED (8), MEMORY_TYPE (2), or an error."""

    def __init__(self, managed: int = 0, kind: int = 2, error: int = 0):
        self.managed, self.kind, self.error, self.asked = managed, kind, error, []

    def cuPointerGetAttribute(self, ref, attribute, ptr):  # noqa: N802 - the driver's name
        self.asked.append((attribute, ptr))
        if self.error:
            return self.error
        ref._obj.value = self.managed if attribute == pointers.CU_POINTER_ATTRIBUTE_IS_MANAGED else self.kind
        return 0


@pytest.mark.parametrize("driver, kind", [
    (_Driver(kind=2), "device"),  # cudaMalloc, torch's caching allocator
    (_Driver(managed=1), "managed"),  # cudaMallocManaged (the driver may report its type as device)
    (_Driver(kind=1), "host"),  # cudaHostAlloc(mapped), cudaHostRegister
    (_Driver(error=pointers.CUDA_ERROR_INVALID_VALUE), "unregistered"),  # pageable memory (HMM/ATS)
    (_Driver(error=201), "unknown"),  # another driver error
    (_Driver(kind=9), "unknown"),
], ids=["device", "managed", "host", "unregistered", "error", "unlisted"])
def test_memory_kind_reads_the_driver(driver, kind):
    assert pointers.memory_kind(0x7000_0000_1000, driver) == kind
    assert driver.asked[0] == (pointers.CU_POINTER_ATTRIBUTE_IS_MANAGED, 0x7000_0000_1000)


def test_no_driver_means_unknown_and_ordinary():
    assert pointers.memory_kind(0x1000, False) == "unknown" and "unknown" in pointers.ORDINARY
    driver = _Driver(kind=1)
    assert pointers.output_memory([object(), torch.zeros(2)], driver) == "" and not driver.asked  # cpu: not asked


def test_output_memory_finding_is_a_hack_naming_lazy_outputs():
    f = output_memory_finding("output 0 is over managed memory", " (a timed call)")
    assert f.check == "probe:output-memory" and f.severity is Severity.HACK and 3 in f.taxonomy
    assert "managed memory (a timed call)" in f.detail


def test_timed_call_reports_are_checked_before_the_trusted_side_reads_them():
    """``CallTimed.cpu_ms`` (the repeat-gain cost on cpu) and ``memory`` (the output-memory report)
    come from the untrusted worker: the decoder refuses them in any other type."""
    from kbv.sandbox import protocol
    from kbv.processes.reply_decoding import decode_reply

    ok = protocol.CallTimed(time_ms=1.0, clock="perf_counter", outputs=(), cpu_ms=0.5,
                            memory="output 0 is over managed memory")
    back = decode_reply(protocol.encode(ok))
    assert back.cpu_ms == 0.5 and back.memory == ok.memory
    for bad in (dict(cpu_ms="0.5"), dict(memory=3), dict(memory=("managed",))):
        with pytest.raises(protocol.ProtocolError, match="cpu_ms|memory"):
            decode_reply(protocol.encode(protocol.CallTimed(time_ms=1.0, clock="c", outputs=(), **bad)))
    with pytest.raises(protocol.ProtocolError, match="memory"):
        decode_reply(protocol.encode(protocol.Outputs(tensors=(), structure="tensor", memory=1)))


def test_rank_sum_p_is_the_exact_permutation_p_value():
    """C(12, 6) = 924 splits: complete separation is the one most extreme, p = 1/924; one swapped
    pair doubles it; identical values give 1 (every split ties)."""
    assert rank_sum_p([1.0] * 6, [2.0] * 6) == pytest.approx(1 / 924)
    assert rank_sum_p([1, 2, 3, 4, 5, 7], [6, 8, 9, 10, 11, 12]) == pytest.approx(2 / 924)
    assert rank_sum_p([5.0] * 6, [5.0] * 6) == 1.0
    assert rank_sum_p([2.0] * 6, [1.0] * 6) == 1.0  # the other direction is no evidence
    assert rank_sum_p([], [1.0]) == 1.0


def test_repeat_gain_confirmed_needs_both_the_ratio_and_the_ranks():
    cache = [0.3, 0.31, 0.29, 0.3, 2.9, 0.33]  # one repeat inflated by noise: U = 30 of 36
    fresh = [3.0, 3.1, 2.9, 3.3, 3.0, 3.2]
    assert repeat_gain_confirmed(fresh, cache)
    assert not repeat_gain_confirmed([1.0] * 6, [0.9] * 6)  # ranks apart, ratio not
    assert not repeat_gain_confirmed([3.0, 0.3] * 3, [0.3, 3.0] * 3)  # medians alike
    assert not repeat_gain_confirmed([], [0.1])


class _Reply:
    def __init__(self, ms: float):
        self.time_ms = ms


class _Harness:
    """A verification's context for :class:`kbv.pipeline.repeat.RepeatGain` without a worker: each
    request's cost comes from ``cost(call number, request, previous request)``."""

    def __init__(self, cost, sets: int = 4):
        self.state = State()
        self.rp = SimpleNamespace(device=torch.device("cpu"), domains={})
        self.config = SimpleNamespace(call_timeout_s=1.0)
        self.cost, self.calls, self.prev = cost, 0, None
        self.sets = [[torch.randn(16, 16)] for _ in range(sets)]

    @contextlib.contextmanager
    def _held(self, worker, request, phase, timeout, hold=True):
        ms = self.cost(self.calls, request, self.prev)
        self.calls, self.prev = self.calls + 1, request
        yield _Reply(ms)

    def _timed_reply(self, reply):
        pass

    def _add(self, found):
        if found is not None:
            self.state.findings.append(found)

    def _structured(self):
        return ()

    def _kinds(self):
        return {}

    def _call_cost(self, reply):
        return reply.time_ms

    def run(self, fresh, repeat):
        self._repeat_costs = {"fresh": fresh, "repeat": repeat}
        RepeatGain(self)._repeat_gain(None, self.sets)
        return [f for f in self.state.findings if f.check == "timing:repeat-gain"]


def _is_repeat(request, prev) -> bool:
    return (prev is not None and (request.set_index, request.mix) == (prev.set_index, prev.mix)
            and request.mutate[:len(prev.mutate)] == prev.mutate and len(request.mutate) > len(prev.mutate))


def test_an_honest_kernel_cheaper_right_after_a_call_is_not_accused():
    """Regression (CI, a 2-core machine under load): an honest closed-form ConvTranspose was HACK
    ``timing:repeat-gain`` when every call right after another call was cheaper than one after the
    trusted side's pause (caches and pool threads warm), and the confirming repeat always came
    right after its fresh call. Now both arms of the confirmation are follow-ups alike."""
    warm = _Harness(lambda k, req, prev: 1.0 if k % 2 else 4.0)  # the call after each lead is warm
    found = warm.run([4.0] * 9, [1.0])  # the rounds' screen sees the same order effect
    assert [f.severity for f in found] == [Severity.WARNING], found
    assert "rank test" in found[0].detail


def test_a_patch_cache_is_confirmed_under_noise():
    """A cache that answers a repeat of the previous call's values 10x cheaper, with every fifth
    call inflated 8x by a loaded machine: HACK."""
    def cost(k, req, prev):
        base = 0.3 if _is_repeat(req, prev) else 3.0
        return base * (8 if k % 5 == 4 else 1)

    cache = _Harness(cost)
    found = cache.run([3.0] * 9, [0.3])
    assert [f.severity for f in found] == [Severity.HACK], found
    ev = cache.state.evidence["repeat_gain"]
    assert len(ev["confirm_fresh_ms"]) == len(ev["confirm_repeat_ms"]) == REPEAT_CONFIRM_PAIRS

def test_the_repeat_gain_text_does_not_say_patched_alone():
    """A stale cache (no patching) is named by the repeat gain too: its text says either (a
    newcomer's stale cache read "patched where the inputs changed", twentieth session)."""
    from kbv.checks.timing_rules import repeat_gain_finding

    f = repeat_gain_finding("repeats 0.1 ms, new values 3 ms", True)
    assert f.severity.value == "HACK" and "stale, or patched where the inputs changed" in f.detail, f.detail
