"""Hidden test files made one set at a time (kbv.reference.hidden_tests): the meta trace, set k's
call running set k's operations only, the sets' values, the plain-call fallback, and a broken
file's errors."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from kbv.intake.problems import ProblemError
from kbv.model.records import InputKind
from kbv.reference import hidden_tests as ht

#: a KernelBench-Verified-style file: four draws of the inputs, scaled x1, x3, x0.01, x-1; ``DRAWN``
#: records the device of every draw the file makes
TEMPLATE = '''
import torch
DRAWN = []

def get_inputs():
    x = torch.rand(8, 64)
    DRAWN.append(x.device.type)
    return [x, 7]

def _scale(args, f):
    return [a * f if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]

def get_hidden_inputs():
    {extra}return [_scale(get_inputs(), f) for f in (1.0, 3.0, 0.01, -1.0)]
'''
FACTORS = (1.0, 3.0, 0.01, -1.0)


def _write(tmp_path, extra: str = "") -> str:
    path = tmp_path / "1_hidden.py"
    path.write_text(TEMPLATE.format(extra=extra))
    return str(path)


def _maker(sets) -> ht._Maker:
    return sets[0]._maker.func.__self__  # a partial of the file's _Maker.set_args


def _in_range(t: torch.Tensor, factor: float) -> None:
    """``t`` is a draw of ``torch.rand`` scaled by ``factor``."""
    lo, hi = sorted((0.0, factor))
    assert t.shape == (8, 64) and bool((t >= lo).all()) and bool((t <= hi).all()) and t.abs().max() > 0


def test_the_sets_have_the_files_distributions_and_values_of_their_own(tmp_path):
    sets = ht.hidden_test_sets(_write(tmp_path))
    assert [s.name for s in sets] == ["HT1", "HT2", "HT3", "HT4"]
    assert {s.kind for s in sets} == {InputKind.HIDDEN}
    made = [s.args for s in sets]
    for args, factor in zip(made, FACTORS):
        assert args[1] == 7 and args[0].device.type == "cpu"
        _in_range(args[0], factor)
    # independent draws, as the file's own call makes them (not one draw scaled four ways)
    assert not torch.allclose(made[1][0], made[0][0] * 3)


def test_set_k_is_made_by_a_call_that_draws_set_k_only(tmp_path):
    log = tmp_path / "drawn"  # each call imports the file afresh: the record lives on disk
    text = TEMPLATE.format(extra="").replace(
        "    DRAWN.append(x.device.type)\n",
        f"    open({str(log)!r}, 'a').write(x.device.type + ' ')\n")
    path = tmp_path / "1_hidden.py"
    path.write_text(text)
    sets = ht.hidden_test_sets(str(path))
    assert log.read_text().split() == ["meta"] * 4  # the trace
    for k, s in enumerate(sets):
        _ = s.args
        s.release()
        call = log.read_text().split()[4 * (k + 1):4 * (k + 2)]
        assert call.count("cpu") == 1 and call.index("cpu") == k, call
    assert _maker(sets).calls == 4
    assert not any(s.remakeable for s in sets)  # a file may keep state between calls


def test_only_the_set_being_judged_is_held(tmp_path):
    sets = ht.hidden_test_sets(_write(tmp_path))
    seen = []
    for s in sets:
        args = s.args
        seen.append(weakref.ref(args[0]))
        s.release()
        del args
        gc.collect()
        assert all(r() is None for r in seen)  # nothing of a released set is kept


def test_a_set_made_again_has_the_same_values(tmp_path):
    sets = ht.hidden_test_sets(_write(tmp_path))
    before = [s.args[0].clone() for s in sets]
    for s in sets:
        s.release()
    for s, b in zip(reversed(sets), reversed(before)):
        assert torch.equal(s.args[0], b)


def test_sets_are_made_on_the_given_device(tmp_path):
    # the meta device stands in for cuda: the file's factory calls follow the device given
    sets = ht.hidden_test_sets(_write(tmp_path), device="meta")
    assert all(s.args[0].device.type == "meta" for s in sets)


@pytest.mark.parametrize("extra", [
    "float(torch.rand(1).sum())\n    ",  # a value read: the meta device cannot run it
    "torch.zeros(1) if __import__('os').path.exists(__file__ + '.seen') else open(__file__ + '.seen', 'w')\n    ",
    # control flow the trace did not see (state on disk: each call imports the file afresh)
])
def test_a_file_the_trace_cannot_follow_gets_one_plain_call(tmp_path, extra):
    sets = ht.hidden_test_sets(_write(tmp_path, extra))
    made = [s.args for s in sets]
    for args, factor in zip(made, FACTORS):
        _in_range(args[0], factor)
    assert _maker(sets).trace is None


@pytest.mark.parametrize("body,fault", [
    ("def get_hidden_inputs():\n    raise ValueError('boom')\n", "get_hidden_inputs() failed: ValueError: boom"),
    ("x = 1\n", "get_hidden_inputs() failed: AttributeError"),
    ("import nonexistent_module_xyz\n", "get_hidden_inputs() failed: ModuleNotFoundError"),
    ("def get_hidden_inputs():\n    return [1, 2]\n", "must return a list of input lists"),
    # no sets: the verdict would say hidden tests were checked when none were (fresh helper)
    ("def get_hidden_inputs():\n    return []\n", "get_hidden_inputs() returned no input sets"),
    # the same through the plain call (the meta trace cannot read a value)
    ("import torch\ndef get_hidden_inputs():\n    torch.ones(1).item()\n    return []\n",
     "get_hidden_inputs() returned no input sets"),
])
def test_a_broken_file_is_a_problem_error_naming_it(tmp_path, body, fault):
    path = tmp_path / "2_hidden.py"
    path.write_text(body)
    with pytest.raises(ProblemError) as err:
        for s in ht.hidden_test_sets(str(path)):
            _ = s.args
    assert str(path) in str(err.value) and fault in str(err.value)


def test_a_file_whose_set_count_changes_between_calls_is_a_problem_error(tmp_path):
    path = tmp_path / "3_hidden.py"
    count = tmp_path / "calls"  # state that outlives an import: each call of kbv's imports afresh
    path.write_text(f"import torch\nfrom pathlib import Path\nC = Path({str(count)!r})\n"
                    "def get_hidden_inputs():\n    n = int(C.read_text()) + 1 if C.exists() else 1\n"
                    "    C.write_text(str(n))\n    return [[torch.rand(2)] for _ in range(2 + (n > 1))]\n")
    sets = ht.hidden_test_sets(str(path))
    assert len(sets) == 2  # the trace's count
    with pytest.raises(ProblemError, match="2 sets in the size pass and 3 now"):
        _ = sets[0].args


# red-team rows (2026-12-05): files that keep state, write tensors made at import, or seed themselves

def _file(tmp_path, text: str) -> str:
    path = tmp_path / "9_hidden.py"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("fill", ["_buf.normal_()", "torch.randn(64, 512, out=_buf)"])
def test_a_tensor_made_at_import_and_written_in_place_gives_each_set_its_values(tmp_path, fill):
    """The trace keys a tensor the file made before the call by its own storage, so its in-place
    writer is tied to the sets that read it (the sets came out all zeros)."""
    text = ("import torch\n_buf = torch.zeros(64, 512)\ndef get_hidden_inputs():\n    out = []\n"
            f"    for f in (1.0, 3.0, 0.01, -1.0):\n        {fill}\n        out.append([_buf * f])\n    return out\n")
    sets = ht.hidden_test_sets(_file(tmp_path, text))
    for s, f in zip(sets, FACTORS):
        t = s.args[0]
        assert 0.5 * abs(f) < float(t.std()) < 1.5 * abs(f), (f, float(t.std()))  # N(0, 1) scaled, not zeros
    assert _maker(sets).trace is not None


def test_a_file_that_caches_its_sets_gets_them_made_on_a_real_device(tmp_path):
    """The trace's import is the trace's own: its meta tensors never reach a real call's cache (an
    honest kernel got EVAL_ERROR "Cannot copy out of meta tensor")."""
    text = ("import torch\n_cache = []\ndef get_hidden_inputs():\n    if not _cache:\n"
            "        _cache.extend([[torch.rand(8, 64) * f] for f in (1.0, 3.0, 0.01, -1.0)])\n    return _cache\n")
    sets = ht.hidden_test_sets(_file(tmp_path, text))
    for s, f in zip(sets, FACTORS):
        _in_range(s.args[0], f)


def test_a_file_that_seeds_itself_still_gets_independent_secret_draws(tmp_path):
    text = ("import torch\ndef get_hidden_inputs():\n    torch.manual_seed(42)\n"
            "    return [[torch.randn(64, 512) * f] for f in (1.0, 3.0, 0.01, -1.0)]\n")
    path = _file(tmp_path, text)
    seeders = (torch.manual_seed, torch.random.manual_seed, torch.cuda.manual_seed_all)
    one, two = [s.args[0] for s in ht.hidden_test_sets(path)], [s.args[0] for s in ht.hidden_test_sets(path)]
    assert not torch.equal(one[3], -one[0])  # not one base draw scaled four ways
    assert not torch.equal(one[0], two[0])  # not the file's fixed seed: kbv's secret one
    assert (torch.manual_seed, torch.random.manual_seed, torch.cuda.manual_seed_all) == seeders  # restored


def test_a_file_of_many_operations_gets_one_plain_call(tmp_path, monkeypatch):
    monkeypatch.setattr(ht, "MAX_TRACE_OPS", 4)
    sets = ht.hidden_test_sets(_write(tmp_path))  # 4 draws and 4 scalings: 8 operations
    assert _maker(sets).trace is None
    for s, f in zip(sets, FACTORS):
        _in_range(s.args[0], f)


# second red-team pass (2026-12-05)

@pytest.mark.parametrize("fill", ["_buf[i].normal_()", "_buf[i] = torch.randn(512)",
                                  "torch.randn(512, out=_buf[i])"])
def test_writes_through_a_view_of_a_tensor_made_at_import_reach_the_sets(tmp_path, fill):
    text = ("import torch\n_buf = torch.zeros(4, 512)\ndef get_hidden_inputs():\n    out = []\n"
            f"    for i, f in enumerate((1.0, 3.0, 0.01, -1.0)):\n        {fill}\n        out.append([_buf[i] * f])\n"
            "    return out\n")
    sets = ht.hidden_test_sets(_file(tmp_path, text))
    for s, f in zip(sets, FACTORS):
        assert 0.5 * abs(f) < float(s.args[0].std()) < 1.5 * abs(f)  # not all zeros


def test_state_a_file_adds_to_starts_afresh_for_each_set(tmp_path):
    text = ("import torch\n_acc = torch.zeros(4096)\ndef get_hidden_inputs():\n    out = []\n"
            "    for f in (1.0, 3.0, 0.01, -1.0):\n        _acc.add_(torch.randn(4096))\n"
            "        out.append([_acc.clone() * f])\n    return out\n")
    sets = ht.hidden_test_sets(_file(tmp_path, text))
    # a plain call: set k holds the sum of k + 1 draws (std sqrt(k + 1)), never more
    for k, (s, f) in enumerate(zip(sets, FACTORS)):
        ratio = float(s.args[0].std()) / abs(f)
        assert 0.85 * (k + 1) ** 0.5 < ratio < 1.15 * (k + 1) ** 0.5, (k, ratio)


@pytest.mark.parametrize("seeding", [
    "from torch import manual_seed\n", "", "_g = torch.Generator()\n"])
def test_a_file_seeding_past_kbvs_switch_gets_a_plain_call_not_one_draw_four_times(tmp_path, seeding):
    call = {"from torch import manual_seed\n": "    manual_seed(42)\n",
            "": "    torch.default_generator.manual_seed(42)\n",
            "_g = torch.Generator()\n": ""}[seeding]
    draw = "torch.randn(64, 512, generator=_g)" if "Generator" in seeding else "torch.randn(64, 512)"
    text = (f"import torch\n{seeding}def get_hidden_inputs():\n{call}"
            f"    return [[{draw} * f] for f in (1.0, 3.0, 0.01, -1.0)]\n")
    sets = ht.hidden_test_sets(_file(tmp_path, text))
    one, two = sets[0].args[0], sets[1].args[0]
    assert not torch.allclose(two, 3 * one)  # independent draws, as a plain call gives
    assert _maker(sets).trace is None


def test_an_interrupt_is_not_turned_into_a_problem_error(tmp_path):
    text = "def get_hidden_inputs():\n    raise KeyboardInterrupt\n"
    with pytest.raises(KeyboardInterrupt):
        ht.hidden_test_sets(_file(tmp_path, text))


def test_a_file_whose_second_import_fails_is_a_problem_error(tmp_path):
    flag = tmp_path / "imported"
    text = (f"from pathlib import Path\nimport torch\nF = Path({str(flag)!r})\n"
            "if F.exists():\n    raise RuntimeError('only once')\nF.write_text('1')\n"
            "def get_hidden_inputs():\n    return [[torch.rand(4)] for _ in range(2)]\n")
    with pytest.raises(ProblemError, match="only once"):
        for s in ht.hidden_test_sets(_file(tmp_path, text)):
            _ = s.args


def test_a_module_in_a_set_with_weights_left_on_meta_gets_a_plain_call(tmp_path):
    text = ("import torch\ndef get_hidden_inputs():\n"
            "    return [[torch.rand(2, 4), torch.nn.Linear(4, 4)] for _ in range(2)]\n")
    sets = ht.hidden_test_sets(_file(tmp_path, text))
    for s in sets:
        assert s.args[1].weight.device.type == "cpu"


def test_a_file_edited_while_its_sets_are_made_is_a_problem_error(tmp_path):
    """Every import of the file must read the bytes of the first (``HiddenSets.sha256``): a file
    edited between the trace and a set's call would give sets of two versions under one verdict."""
    import hashlib

    path = _write(tmp_path)
    sets = ht.hidden_test_sets(path)
    assert sets.sha256 == hashlib.sha256(open(path, "rb").read()).hexdigest()
    _ = sets[0].args
    with open(path, "a") as f:
        f.write("# edited\n")
    with pytest.raises(ProblemError, match="the file changed while its sets were being made"):
        _ = sets[1].args


@pytest.mark.parametrize("error", ["torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')",
                                   "MemoryError()", "RuntimeError('CUBLAS_STATUS_ALLOC_FAILED')"])
def test_a_memory_failure_while_a_set_is_made_is_not_the_files_fault(tmp_path, error):
    """A device (or host) too full to make a set, as a candidate can leave it between its calls, is
    kbv's limit: the memory error goes on to the verification (EVAL_ERROR), never a ProblemError
    under which the remaining hidden sets would be skipped and the verdict kept (red-team helper)."""
    count = tmp_path / "calls"
    path = tmp_path / "4_hidden.py"
    path.write_text(f"""
import pathlib, torch
def get_hidden_inputs():
    c = pathlib.Path({str(count)!r})
    n = int(c.read_text()) if c.exists() else 0
    c.write_text(str(n + 1))
    if n >= 1 and torch.ones(1).device.type != "meta":
        raise {error}
    return [[torch.rand(4)], [torch.rand(4)]]
""")
    with pytest.raises((torch.OutOfMemoryError, MemoryError, RuntimeError)) as err:
        for s in ht.hidden_test_sets(str(path)):
            _ = s.args
    assert not isinstance(err.value, ProblemError)
