"""kbv.reference.shapes: which secret shapes a problem's size constants give, in which order."""

from __future__ import annotations

import random

from kbv.reference.shapes import MIN_SIZE, secret_size, secret_sizes, size_patterns


def test_secret_sizes_are_odd_at_most_half_plus_one_and_spread_over_the_range():
    rng = random.Random(7)
    for size in (16, 17, 300, 512, 4095, 4096, 16384, 393216):
        drawn = {secret_size(size, rng) for _ in range(400)}
        assert all(v % 2 == 1 and size // 4 < v <= size // 2 + 1 and v % 8 for v in drawn), (size, drawn)
        assert len(drawn) > min(20, (size // 4) // 2 - 1), (size, len(drawn))  # not one predictable value
    assert {secret_size(512, rng) for _ in range(2000)} == set(range(129, 258, 2))


def test_all_sizes_first_then_each_alone_largest_first_and_small_constants_stay():
    consts = {"batch_size": 16, "dim": 16384, "kernel_size": 3}
    assert size_patterns(consts) == [("batch_size", "dim"), ("dim",), ("batch_size",)]
    assert size_patterns({"dim": MIN_SIZE - 1, "axis": 1}) == []
    assert size_patterns({"dim": 300}) == [("dim",)]
    sizes = secret_sizes(consts, ("dim",), random.Random(1))
    assert list(sizes) == ["dim"] and 4096 < sizes["dim"] <= 8193


def test_a_raised_workload_size_draws_between_the_problems_and_its_own():
    import random

    from kbv.reference.shapes import between_size, secret_sizes

    rng = random.Random(5)
    drawn = {between_size(512, 1536, rng) for _ in range(400)}
    assert min(drawn) >= 513 and max(drawn) <= 1535 and all(d % 2 for d in drawn) and len(drawn) > 100
    assert between_size(512, 513, rng) is None and between_size(511, 513, rng) is None
    assert between_size(510, 513, rng) == 511
    sizes = secret_sizes({"batch": 64, "dim": 1536}, ("batch", "dim"), rng, floors={"dim": 512})
    assert 512 < sizes["dim"] < 1536 and 17 <= sizes["batch"] <= 33
