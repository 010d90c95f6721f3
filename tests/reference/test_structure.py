"""Units (no worker processes): kbv.reference.structure, the input structure found on a draw and the
sets that break it in a few places (few-positions, break-*), and how they are built and registered."""

from __future__ import annotations

import pytest
import torch

from kbv.reference import domains as dom
from kbv.reference import inputs as inp
from kbv.reference import structure as st
from kbv.reference.distributions import DEFAULT_DISTRIBUTIONS, DISTRIBUTIONS

BREAKS = [n for n in DISTRIBUTIONS if DISTRIBUTIONS[n].structure]


def triangular():
    return [torch.triu(torch.randn(64, 64)), torch.tril(torch.rand(3, 16, 16), -1), torch.randn(64, 64)]


def tridiagonal():
    return [torch.diag(torch.rand(50)) + torch.diag(torch.rand(49), 1) + torch.diag(torch.rand(49), -1)]


def symmetric():
    m = torch.randn(4, 16, 16)
    return [(m + m.mT) / 2]


def sorted_rows():
    return [torch.sort(torch.randn(8, 100), dim=-1, descending=True).values, torch.arange(20)]


def one_hot():
    return [torch.nn.functional.one_hot(torch.randint(0, 10, (64,)), 10).float(), torch.rand(32, 10) < 0.05]


def dense():
    return [torch.randn(64, 64), torch.rand(8, 3, 3), torch.randint(0, 10, (8,)), 3.5]


@pytest.mark.parametrize("get_inputs, kinds", [
    (triangular, {"triangular"}),
    (tridiagonal, {"banded", "sparse"}),
    (symmetric, {"symmetric"}),
    (sorted_rows, {"sorted"}),
    (one_hot, {"sparse"}),
    (dense, set()),
])
def test_structures_found_on_a_draw(get_inputs, kinds):
    torch.manual_seed(0)  # a 5 % mask of 320 entries can by chance lie in one triangle: one fixed draw
    assert st.present(get_inputs()) == kinds


def test_a_zero_triangle_is_found_in_every_matrix_of_a_batch_or_not_at_all():
    x = torch.triu(torch.randn(5, 8, 8))
    assert st.describe(x, torch.Generator()).kinds() == ("triangular",)
    x[3, 7, 0] = 1.0  # one entry below the diagonal of one matrix
    assert st.describe(x, torch.Generator()).kinds() == ()


def _changed(a: torch.Tensor, b: torch.Tensor) -> list:
    return [tuple(i) for i in (a != b).nonzero().tolist()]


@pytest.mark.parametrize("name, get_inputs, broken", [
    ("break-triangular", triangular, lambda x: bool(torch.tril(x[0], -1).any()) and bool(torch.triu(x[1]).any())),
    ("break-banded", tridiagonal, lambda x: bool((torch.triu(x[0], 2) + torch.tril(x[0], -2)).any())),
    ("break-symmetric", symmetric, lambda x: not torch.equal(x[0], x[0].mT)),
    ("break-sorted", sorted_rows, lambda x: bool((x[0][:, 1:] > x[0][:, :-1]).any()) and torch.equal(x[1], torch.arange(20))),
    ("break-sparse", one_hot, lambda x: bool((x[0].sum(1) > 1).any())),
])
def test_each_break_changes_a_few_positions_with_the_tensors_own_values(name, get_inputs, broken):
    for seed in range(5):
        s = inp.build_set(get_inputs, name, seed)
        base = inp.draw(get_inputs, seed)
        assert s.kind.value == "random" and s.drop_reason is None, (name, s.drop_reason)
        got = s.args
        assert broken(got), (name, seed)
        for a, b in zip(got, base):
            if not isinstance(a, torch.Tensor):
                continue
            where = _changed(a, b)
            assert len(where) <= 2 * st.MAX_CHANGES, (name, len(where))  # a swap changes two
            new = {a[w].item() for w in where}
            assert new <= {v.item() for v in b.reshape(-1)}, name  # values the tensor takes elsewhere
        again = inp.build_set(get_inputs, name, seed).args  # same name and seed: same tensors
        assert all(torch.equal(x, y) for x, y in zip(got, again) if isinstance(x, torch.Tensor))
    assert inp.build_set(dense, name, 1).drop_reason  # nothing to break in this draw


def test_the_triangle_break_misses_a_64_entry_sample_and_leaves_the_draw_untouched():
    """The attack of issue 19: 64 sampled entries of the zero triangle look zero, another entry is not."""
    kept = torch.triu(torch.randn(512, 512))
    s = inp.build_set(lambda: [kept], "break-triangular", 9)
    x = s.args[0]
    assert torch.equal(kept, torch.triu(kept))  # get_inputs()'s own tensor is never written
    below = torch.tril(x, -1).ne(0).nonzero()
    assert 1 <= len(below) <= st.MAX_CHANGES
    g = torch.Generator().manual_seed(0)
    i = torch.randint(1, 512, (64,), generator=g)
    j = (torch.rand(64, generator=g) * i).long()
    assert bool((x[i, j] == 0).all())


def test_few_positions_takes_values_of_another_draw_and_keeps_coupled_domains():
    def gi():
        return [torch.rand(16, 32), torch.randint(0, 5, (64,)), torch.softmax(torch.rand(4, 8), -1), 2.0]
    domains = {2: dom.parse("probability")}
    s = inp.build_set(gi, "few-positions", 3, domains)
    base, other = inp.draw(gi, 3), inp.draw(gi, inp.other_seed(3))
    got = s.args
    for k in (0, 1):
        where = _changed(got[k], base[k])
        assert 1 <= len(where) <= st.MAX_CHANGES
        assert all(got[k][w] == other[k][w] for w in where)
    assert torch.equal(got[2], base[2]) and got[3] == 2.0  # declared probability rows are kept


def test_a_break_keeps_declared_domains():
    m = torch.randn(16, 16)
    sym = [(m + m.T) / 2]
    assert st.present(sym, {0: dom.parse("symmetric")}) == set()  # declared: never broken
    s = inp.build_set(lambda: [torch.sort(torch.rand(4, 50) + 0.1, dim=-1).values], "break-sorted", 2,
                      {0: dom.parse("positive")})
    assert s.drop_reason is None and dom.parse("positive").contains(s.args[0])
    s = inp.build_set(lambda: [torch.triu(torch.rand(32, 32))], "break-triangular", 2, {0: dom.parse("nonnegative")})
    assert s.drop_reason is None and bool((s.args[0] >= 0).all()) and bool(torch.tril(s.args[0], -1).any())


def test_break_sets_are_built_only_where_the_draw_shows_their_structure():
    names = list(DEFAULT_DISTRIBUTIONS)
    assert set(BREAKS) <= set(names) and "few-positions" in names
    got = [s.name for s in inp.randomised_sets(triangular, names)]
    assert got == [n for n in names if n not in BREAKS or n == "break-triangular"]
    assert [s.name for s in inp.randomised_sets(dense, names)] == [n for n in names if n not in BREAKS]
    with pytest.raises(ValueError, match="unknown input structure"):
        st.break_structure("circulant", dense(), torch.Generator())


def test_detection_reads_a_large_input_in_chunks(monkeypatch):
    """The same structure whatever the chunk (rows of one matrix at a time, or several matrices)."""
    x = [torch.triu(torch.randn(6, 40, 40)), torch.sort(torch.randn(3, 500), dim=-1).values]
    whole = [st.describe(t, torch.Generator()).kinds() for t in x]
    monkeypatch.setattr(st, "CHUNK_ELEMENTS", 100)
    monkeypatch.setattr("kbv.reference.structure.chunk_elements", lambda device, default: default)
    assert [st.describe(t, torch.Generator()).kinds() for t in x] == whole == [("triangular",), ("sorted",)]


def test_a_candidate_wrong_only_where_a_pattern_breaks_gets_a_finding_naming_the_set():
    from kbv.checks.input_rules import off_nominal_findings
    from kbv.model.records import InputKind, InputSetResult

    def r(name, kind, passed, transform="t"):
        return InputSetResult(name, kind, transform, 1, passed)

    few = [n for n, d in DISTRIBUTIONS.items() if d.rewrite is not None]
    sets = [r("nominal-0", InputKind.NOMINAL, True), r("D4", InputKind.HIDDEN, True),
            r("normal", InputKind.RANDOM, True),
            r("break-triangular", InputKind.RANDOM, False, DISTRIBUTIONS["break-triangular"].transform)]
    (f,) = off_nominal_findings(sets, few)
    assert f.check == "inputs:pattern-broken" and f.taxonomy == (20,) and f.severity.value == "WARNING"
    assert "break-triangular (get_inputs(), 1-8 entries set in the zero triangle)" in f.detail
    both = off_nominal_findings(sets + [r("offset", InputKind.RANDOM, False)], few)
    assert [x.check for x in both] == ["inputs:off-nominal", "inputs:pattern-broken"]
    assert "offset" in both[0].detail and "break-triangular" not in both[0].detail
    assert off_nominal_findings([r("nominal-0", InputKind.NOMINAL, False)] + sets[1:], few) == []


@pytest.mark.cuda
def test_structure_is_found_and_broken_where_a_cuda_draw_lies():
    """On the device: the draw, the chunked passes and the changes stay on cuda."""
    def gi():
        return [torch.triu(torch.randn(300, 300)), torch.nn.functional.one_hot(torch.randint(0, 64, (512,)), 64).float()]
    with torch.device("cuda"):
        assert st.present(gi()) == {"triangular", "sparse"}
    s = inp.build_set(gi, "break-triangular", 4, device="cuda")
    x = s.args[0]
    assert x.is_cuda and s.drop_reason is None and 1 <= int(torch.tril(x, -1).ne(0).sum()) <= st.MAX_CHANGES
    f = inp.build_set(gi, "few-positions", 4, device="cuda").args
    assert all(t.is_cuda for t in f)
    names = [s.name for s in inp.randomised_sets(gi, list(DEFAULT_DISTRIBUTIONS), device="cuda")]
    assert "break-triangular" in names and "break-sparse" in names and "break-sorted" not in names
