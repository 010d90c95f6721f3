"""Secret shapes (issue 23): the problem at sizes other than its own, drawn per verification from
its size constants and vetted on the reference, so that a kernel right only at the nominal shape
is seen.

Rules (kbv choices):

* Only size constants of at least :data:`MIN_SIZE` change (``kbv.intake.sizes``): smaller ones are
  as often hyperparameters (a kernel size, a reduction dim, a channel count of 3) as sizes.
* Each changes to a secret odd size between a quarter and a half of its own, plus one
  (:func:`secret_size`: 512 -> one of 129, 131, ..., 257), drawn from the OS CSPRNG per
  verification. Odd, so no multiple of 8, 32 or 128: a kernel that assumes a tile divides the size
  is wrong there. At most half, so the inputs stay within the nominal's and kbv's memory bound
  (4·B + 1 GiB) holds. Secret, so a kernel cannot handle just the one size kbv will try (a
  red-team helper's kernel handled exactly the half-plus-one of a fixed rule).
* All constants at once first (:func:`size_patterns`); where the reference refuses that
  (constants tied to each other), each one alone, the largest first.
"""

from __future__ import annotations

import random

#: the smallest size constant that changes.
MIN_SIZE = 16


def secret_size(size: int, rng: random.Random) -> int:
    """An odd size drawn uniformly from ``[size // 4 + 1, size // 2 + 1]`` (``size`` >= :data:`MIN_SIZE`)."""
    lo, hi = size // 4 + 1, size // 2 + 1
    odd = [v for v in (lo, lo + 1) if v % 2]
    first = odd[0]
    return first + 2 * rng.randrange((hi - first) // 2 + 1)


def size_patterns(constants: dict[str, int]) -> list[tuple[str, ...]]:
    """Which size constants change together, in the order they are tried: all of those of at
    least :data:`MIN_SIZE`, then each alone, the largest first; empty when none is that large."""
    names = [n for n, v in constants.items() if v >= MIN_SIZE]
    if not names:
        return []
    alone = sorted(names, key=lambda n: -constants[n])
    return [tuple(names)] + ([(n,) for n in alone] if len(names) > 1 else [])


def between_size(low: int, high: int, rng: random.Random) -> int | None:
    """An odd size drawn uniformly from ``(low, high)``, None when there is none."""
    first = low + 1 if (low + 1) % 2 else low + 2
    if first >= high:
        return None
    return first + 2 * rng.randrange((high - 1 - first) // 2 + 1)


def secret_sizes(constants: dict[str, int], names: tuple[str, ...], rng: random.Random,
                 floors: dict[str, int] | None = None) -> dict[str, int]:
    """``{name: secret size}`` for the constants ``names``: for a name of ``floors`` (a declared
    workload that raised it from the problem's own size, kbv.pipeline.workload_runs) an odd size
    between the two (:func:`between_size`: the sizes between the problem's and the workload's are
    where a kernel tiled for the declared ones drops its tail), else :func:`secret_size`."""
    out = {}
    for n in names:
        between = between_size(floors[n], constants[n], rng) if floors and n in floors else None
        out[n] = between if between is not None else secret_size(constants[n], rng)
    return out


__all__ = ["MIN_SIZE", "secret_size", "size_patterns", "secret_sizes", "between_size"]
