"""The float64 oracle in pieces of a matrix product's rows (kbv.reference.oracle: ``SPLIT_FIRST``):
where the arguments share no leading size (a matrix-vector product) or a batch cut of every argument
breaks the model (a square matmul), the first argument's rows are cut and the others taken whole;
the same answer and the same input-rounding term as one whole call, and a model that mixes the
first argument's rows is never cut."""

from __future__ import annotations

import pytest
import torch

from kbv.reference import oracle as orc
from kbv.reference.policy import output_errors


class _MatVec(torch.nn.Module):
    def forward(self, a, x):
        return torch.matmul(a, x)


class _Centred(torch.nn.Module):
    """Mixes the rows of its first argument (a column mean): not separable along them."""

    def forward(self, a, b):
        return torch.matmul(a - a.mean(0, keepdim=True), b)


def _args(shape_a, shape_b, seed=3):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape_a, generator=g), torch.randn(*shape_b, generator=g)]


def _whole(model, args):
    return orc.Oracle(model, torch.device("cpu"))(args, None)


@pytest.mark.parametrize("shapes", [((96, 160), (160, 1)), ((64, 64), (64, 64)), ((6, 8, 16, 24), (24, 12))],
                         ids=["matrix-vector", "square-matmul", "4d-tensor-matrix"])
def test_a_matrix_products_oracle_runs_in_row_pieces_with_the_same_answer(monkeypatch, shapes):
    model, args = _MatVec(), _args(*shapes)
    whole = _whole(model, args)
    monkeypatch.setattr(orc, "PIECE_BYTES", 8192)
    monkeypatch.setattr(orc, "FIRST_SPLIT_BYTES", 8192)
    o = orc.Oracle(model, torch.device("cpu"))
    out = o(args, [model(*args)])
    assert o.chunked > 1 and o._split_how == orc.SPLIT_FIRST
    scale = whole[0].abs().max().item()
    assert out[0].shape == whole[0].shape and torch.allclose(out[0], whole[0], rtol=0, atol=1e-12 * scale)
    errs = o.input_rounding_errors(args, out, [model(*args)])
    full = max(output_errors(orc.Oracle(model, torch.device("cpu")).input_rounding(args, None, seed), whole)[0]
               for seed in orc.ROUNDING_MOVES)
    assert errs is not None and errs[0] == pytest.approx(full, rel=1e-6)  # the same draws, whole or in pieces


def _assert_run_whole(monkeypatch, model, args, limit: int) -> None:
    """With pieces of ``limit`` float64 bytes asked for, the oracle declines the cut and answers whole."""
    monkeypatch.setattr(orc, "PIECE_BYTES", limit)
    monkeypatch.setattr(orc, "FIRST_SPLIT_BYTES", limit)
    o = orc.Oracle(model, torch.device("cpu"))
    out = o(args, [model(*args)])
    assert o.chunked == 0
    assert torch.allclose(out[0], _whole(model, args)[0], rtol=0, atol=1e-12)


def test_a_model_mixing_the_first_arguments_rows_is_not_cut(monkeypatch):
    _assert_run_whole(monkeypatch, _Centred(), _args((64, 32), (32, 48)), 4096)


def test_a_batch_is_still_cut_whole(monkeypatch):
    """Arguments with one leading size that a batch cut keeps separable: every argument cut."""

    class _Scale(torch.nn.Module):
        def forward(self, a, b):
            return a * b

    model, args = _Scale(), _args((64, 32), (64, 32))
    monkeypatch.setattr(orc, "PIECE_BYTES", 4096)
    o = orc.Oracle(model, torch.device("cpu"))
    o(args, [model(*args)])
    assert o.chunked > 1 and o._split_how == orc.SPLIT_ALL


def test_a_small_first_argument_is_not_cut(monkeypatch):
    """Cutting the first argument alone buys nothing where the others hold most of the bytes."""
    model, args = _MatVec(), _args((4, 16), (16, 4096))
    monkeypatch.setattr(orc, "PIECE_BYTES", 4096)
    monkeypatch.setattr(orc, "FIRST_SPLIT_BYTES", 4096)
    o = orc.Oracle(model, torch.device("cpu"))
    o(args, [model(*args)])
    assert o.chunked == 0


def test_a_matrix_product_under_the_bounds_slack_runs_whole(monkeypatch):
    """Below :data:`FIRST_SPLIT_BYTES` the whole float64 call fits: no cut, no copy of each piece."""
    model, args = _MatVec(), _args((96, 160), (160, 1))
    monkeypatch.setattr(orc, "PIECE_BYTES", 8192)
    o = orc.Oracle(model, torch.device("cpu"))
    o(args, [model(*args)])
    assert o.chunked == 0


class _RowPosition(torch.nn.Module):
    """A matrix product plus a term that depends on a row's position: any cut moves the term."""

    def forward(self, a, b):
        n = a.shape[0]
        return torch.matmul(a, b) + (torch.arange(n, dtype=a.dtype) % 3 == 0).to(a.dtype)[:, None]


def test_an_output_that_depends_on_a_rows_position_is_not_cut(monkeypatch):
    """Every piece is compared with the whole run's rows: with 13 rows in pieces of 2, pieces at
    rows 0, 6 and 12 alone matched (red-team helper, 2026-12-06)."""
    _assert_run_whole(monkeypatch, _RowPosition(), _args((13, 8), (8, 4)), 64)
