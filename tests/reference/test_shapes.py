"""kbv.reference.shapes: which secret shapes a problem's size constants give, in which order."""

from __future__ import annotations

from kbv.reference.shapes import MIN_SIZE, derived_shapes, odd_half


def test_odd_half_is_odd_smaller_and_no_multiple_of_a_tile():
    for size in (16, 17, 300, 512, 4095, 4096, 16384, 393216):
        v = odd_half(size)
        assert v % 2 == 1 and v < size and v % 8 and v % 32 and v % 128, (size, v)
    assert (odd_half(16384), odd_half(300), odd_half(4096)) == (8193, 151, 2049)


def test_all_sizes_first_then_each_alone_largest_first_and_small_constants_stay():
    shapes = list(derived_shapes({"batch_size": 16, "dim": 16384, "kernel_size": 3}))
    assert shapes == [{"batch_size": 9, "dim": 8193}, {"dim": 8193}, {"batch_size": 9}]
    assert list(derived_shapes({"dim": MIN_SIZE - 1, "axis": 1})) == []
    assert list(derived_shapes({"dim": 300})) == [{"dim": 151}]
