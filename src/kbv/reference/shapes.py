"""Secret shapes (issue 23): the problem at sizes other than its own, derived from its size
constants and vetted on the reference, so that a kernel right only at the nominal shape is seen.

Rules (kbv choices):

* Only size constants of at least :data:`MIN_SIZE` change (``kbv.intake.sizes``): smaller ones are
  as often hyperparameters (a kernel size, a reduction dim, a channel count of 3) as sizes.
* Each changes to about half plus one, made odd (:func:`odd_half`): 16384 -> 8193, 4096 -> 2049,
  300 -> 151. An odd size is no multiple of 8, 32 or 128, so a kernel that assumes a tile divides
  the size is wrong there, and half the size keeps the inputs within the nominal's, so the memory
  bound (4·B + 1 GiB) holds.
* All constants at once first; where the reference refuses that (constants tied to each other),
  each one alone, the largest first. A shape counts only if the reference runs on it with finite
  outputs and its inputs are no larger than the nominal ones; a problem whose reference refuses
  every shape gets none.
"""

from __future__ import annotations

from typing import Iterator

#: the smallest size constant that changes.
MIN_SIZE = 16


def odd_half(size: int) -> int:
    """About half of ``size``, plus one, odd: 16384 -> 8193, 300 -> 151, 17 -> 9."""
    v = size // 2 + 1
    return v if v % 2 else v + 1


def derived_shapes(constants: dict[str, int]) -> Iterator[dict[str, int]]:
    """The candidate secret shapes of a problem's size constants, in the order they are tried
    (see the module doc): ``{name: new size}`` each; nothing when no constant is large enough."""
    sizes = {n: v for n, v in constants.items() if v >= MIN_SIZE}
    if not sizes:
        return
    yield {n: odd_half(v) for n, v in sizes.items()}
    if len(sizes) > 1:
        for n, v in sorted(sizes.items(), key=lambda kv: -kv[1]):
            yield {n: odd_half(v)}


__all__ = ["MIN_SIZE", "odd_half", "derived_shapes"]
