"""Which arguments a piece of one oracle call cuts (kbv.reference.batch_pieces)."""

import torch

from kbv.reference.batch_pieces import SPLIT_ALL, SPLIT_FIRST, batch_size, cut_rows, split_args


def test_a_batch_cuts_every_tensor_and_a_matrix_product_its_first():
    a, b, x = torch.zeros(6, 4), torch.zeros(4, 3), torch.zeros(6, 2)
    assert split_args([a, x, 2.0], SPLIT_ALL) == (6, (True, True, False))
    assert split_args([a, b], SPLIT_ALL) == (None, ())  # no common leading size
    assert split_args([2.0, a, b], SPLIT_FIRST) == (6, (False, True, False))
    assert batch_size([a, b]) is None and batch_size([a, x]) == 6


def test_nothing_to_cut_without_a_first_tensor_of_rows():
    assert split_args([torch.tensor(3.0), torch.zeros(4, 4)], SPLIT_FIRST) == (None, ())
    assert split_args([1, 2.0], SPLIT_FIRST) == (None, ())


def test_a_cut_takes_the_rows_of_the_masked_arguments_only():
    a, b = torch.arange(12.0).reshape(6, 2), torch.ones(2, 2)
    part = cut_rows([a, b, 7], (True, False, False), 4, 3)
    assert torch.equal(part[0], a[4:]) and part[1] is b and part[2] == 7
