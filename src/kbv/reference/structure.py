"""Inputs that break a pattern in a few places: the structure a problem's ``get_inputs()`` gives
its inputs, found on one draw, and the few changes that break it; and a draw with a few positions
taken from another draw. Reference worker only; :mod:`kbv.reference.distributions` registers the
distributions built on these.

A kernel may exploit structure when it checks all of it, or handles any input. One that looks at a
sample of positions (64 entries of the zero triangle) is right on every ``get_inputs()`` draw and
on every distribution that redraws all values (the sample sees those), and wrong where one entry
breaks the pattern (such a kernel was credited PASS while wrong by 0.95 without these sets). The
sets built here change 1 to
:data:`MAX_CHANGES` secret positions per tensor.

Structures found on one tensor of shape ``(..., R, C)`` (every matrix of the last two dims, or
every row along the last dim, must show it):

============== ====================================================== ====================================
structure      found when                                             broken by
============== ====================================================== ====================================
``triangular`` R, C >= 2, every entry strictly below (or above) the   entries set in the zero triangle
               diagonal zero
``banded``     zero outside a band ``i - j <= p``, ``j - i <= q`` of  entries set just outside the band, or
               at most half the diagonals (``p+q+1 <= min(R,C)/2``)   anywhere outside it
``symmetric``  R = C >= 2, equal to its transpose bit for bit         ``a[i, j]`` changed, ``a[j, i]`` kept
``sorted``     floating-point, the last dim >= 2 long, every row      two unequal entries of a row swapped
               nondecreasing (or every row nonincreasing), not
               constant
``sparse``     at least :data:`SPARSE_ZERO_FRACTION` of the entries   zero entries set
               zero (one-hot rows, masks)
============== ====================================================== ====================================

Integer tensors never count as sorted: sorted indices or offsets are usually a precondition
(``searchsorted``, CSR row pointers) on which a reference is undefined, and kbv's other
distributions keep integer values too. The values set are the tensor's own non-zero entries, so an
input stays inside an elementwise declared domain (:mod:`kbv.reference.domains`); inputs declared
with a domain that couples elements (:data:`kbv.reference.mutation.STRUCTURED_DOMAINS`: ``fixed``,
``probability``, ``symmetric``, ``spd``) are never changed. Every pass reads a tensor in chunks, in its own dtype and on its own
device (no float64 copy); a changed tensor is cloned first (``get_inputs()`` may return a tensor it
keeps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from kbv.reference.domains import Domain
from kbv.reference.mutation import STRUCTURED_DOMAINS
from kbv.reference.passes import chunk_elements, host_threads

STRUCTURES: tuple[str, ...] = ("triangular", "banded", "symmetric", "sorted", "sparse")
#: positions changed per tensor: 1 to this many, drawn per tensor from the set's secret seed.
MAX_CHANGES = 8
#: zero entries from which a tensor counts as sparse (a one-hot row of 4 or more is 3/4 zeros).
SPARSE_ZERO_FRACTION = 0.75
#: non-zero entries kept per tensor as the values that break its structure.
VALUE_SAMPLE = 64
#: elements of one chunk of a pass on a device (on the host fewer, :mod:`kbv.reference.passes`).
CHUNK_ELEMENTS = 1 << 22
#: random positions tried for one change before it is given up: every region drawn from by
#: rejection (a zero triangle, the outside of a band of at most half the diagonals, the zeros of a
#: sparse tensor, the off-diagonal) is at least an eighth of its tensor, so 200 tries miss it with
#: probability (7/8)^200 < 1e-11.
TRIES = 200


@dataclass(frozen=True)
class Structure:
    """What one tensor of a draw shows (module docstring). ``lower`` / ``upper``: the largest
    ``i - j`` / ``j - i`` over its non-zero entries in the last two dims (None when it has fewer
    than two dims of size >= 2 each, or no non-zero entry); ``order``: +1 every row along the last
    dim nondecreasing, -1 nonincreasing, 0 neither or constant; ``values``: up to
    :data:`VALUE_SAMPLE` of its non-zero entries (1-D, its dtype and device)."""

    shape: tuple[int, ...]
    lower: int | None
    upper: int | None
    symmetric: bool
    order: int
    zero_fraction: float
    values: torch.Tensor

    def kinds(self) -> tuple[str, ...]:
        """The structures (:data:`STRUCTURES`) this tensor shows."""
        if not self.values.numel():
            return ()
        out = []
        if self.lower is not None and self.upper is not None:
            rows, cols = self.shape[-2], self.shape[-1]
            if self.lower <= 0 or self.upper <= 0:
                out.append("triangular")
            if self.lower < rows - 1 and self.upper < cols - 1 \
                    and self.lower + self.upper + 1 <= min(rows, cols) // 2:
                out.append("banded")
        if self.symmetric:
            out.append("symmetric")
        if self.order:
            out.append("sorted")
        if self.zero_fraction >= SPARSE_ZERO_FRACTION:
            out.append("sparse")
        return tuple(out)


def _is_matrix(t: torch.Tensor) -> bool:
    return t.dim() >= 2 and t.shape[-1] >= 2 and t.shape[-2] >= 2


def _blocks(m: torch.Tensor, step: int) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(b0, r0, m[b0:b0+k, r0:r0+r])`` over the matrices ``m`` (B, R, C), about ``step``
    elements each: whole matrices at a time when one fits, else rows of one matrix."""
    batch, rows, cols = m.shape
    if rows * cols <= step:
        k = max(1, step // (rows * cols))
        for b0 in range(0, batch, k):
            yield b0, 0, m[b0:b0 + k]
        return
    r = max(1, step // cols)
    for b0 in range(batch):
        for r0 in range(0, rows, r):
            yield b0, r0, m[b0:b0 + 1, r0:r0 + r]


def _bands(t: torch.Tensor, step: int) -> tuple[int | None, int | None, bool]:
    """``(lower, upper, symmetric)`` of :class:`Structure` for a matrix-shaped tensor."""
    rows, cols = t.shape[-2], t.shape[-1]
    m = t.reshape(-1, rows, cols)  # a view of a contiguous draw (a copy in its own dtype otherwise)
    low: int | None = None
    up: int | None = None
    sym = rows == cols
    never = -(rows + cols)
    for b0, r0, blk in _blocks(m, step):
        nz = blk != 0
        if bool(nz.any()):
            i = torch.arange(r0, r0 + blk.shape[1], device=t.device)
            d = torch.arange(cols, device=t.device)[None, :] - i[:, None]  # j - i, (r, C)
            hi, lo = int(torch.where(nz, d, never).max()), int(torch.where(nz, -d, never).max())
            up, low = hi if up is None else max(up, hi), lo if low is None else max(low, lo)
        if sym and not torch.equal(blk, m[b0:b0 + blk.shape[0], :, r0:r0 + blk.shape[1]].mT):
            sym = False
        if not sym and low is not None and up is not None and low > 0 and up > 0 \
                and low + up + 1 > min(rows, cols) // 2:
            return rows - 1, cols - 1, False  # dense so far: neither triangular nor banded (Structure.kinds)
    return low, up, sym


def _order(flat: torch.Tensor, length: int, step: int) -> int:
    """+1 / -1 / 0 (:class:`Structure`) for ``flat``, rows of ``length`` along the last dim."""
    if length < 2 or not flat.is_floating_point():  # integer rows (indices, offsets) keep their order
        return 0
    rising = falling = True
    strict = False
    for s in range(0, flat.numel() - 1, step):
        c = flat[s:s + step + 1]
        a, b = c[:-1], c[1:]
        across = (torch.arange(s + 1, s + 1 + a.numel(), device=flat.device) % length) == 0  # pairs spanning two rows
        rising = rising and bool(((b >= a) | across).all())
        falling = falling and bool(((b <= a) | across).all())
        strict = strict or bool(((b != a) & ~across).any())
        if not (rising or falling):
            return 0
    return (1 if rising else -1) if strict else 0


def describe(t: torch.Tensor, g: torch.Generator) -> Structure:
    """The :class:`Structure` of one tensor, read in chunks where it lies (``g``, a CPU generator,
    picks the kept non-zero values)."""
    flat = t.detach().reshape(-1)
    n = flat.numel()
    step = chunk_elements(t.device, CHUNK_ELEMENTS)
    zeros, values = 0, []
    with host_threads(t.device):
        for s in range(0, n, step):
            c = flat[s:s + step]
            nonzero = int(torch.count_nonzero(c))
            zeros += c.numel() - nonzero
            if nonzero:
                v = c[torch.randint(c.numel(), (8,), generator=g, device="cpu").to(t.device)]
                v = v[v != 0]
                if not v.numel():  # a sparse chunk: its non-zero entries (a quarter of it at most) copied
                    nz = c[c != 0]
                    v = nz[torch.randint(nz.numel(), (min(8, nz.numel()),), generator=g, device="cpu").to(t.device)]
                values.append(v)
        kept = torch.cat(values) if values else flat[:0]
        if kept.numel() > VALUE_SAMPLE:
            kept = kept[torch.randperm(kept.numel(), generator=g, device="cpu")[:VALUE_SAMPLE].to(t.device)]
        low, up, sym = _bands(t, step) if _is_matrix(t) else (None, None, False)
        order = _order(flat, t.shape[-1], step) if t.dim() >= 1 else 0
    return Structure(tuple(t.shape), low, up, sym, order, zeros / n if n else 0.0, kept.clone())


def _examined(args: Sequence[Any], domains: Mapping[int, Domain]) -> Iterator[tuple[int, torch.Tensor]]:
    """The tensors whose structure may be broken: not declared with a coupling domain, >= 2 elements."""
    for i, a in enumerate(args):
        d = domains.get(i)
        if isinstance(a, torch.Tensor) and a.numel() >= 2 and not a.is_complex() \
                and not (d is not None and d.kind in STRUCTURED_DOMAINS):
            yield i, a


def present(args: Sequence[Any], domains: Mapping[int, Domain] | None = None) -> set[str]:
    """The structures (:data:`STRUCTURES`) any tensor of the draw ``args`` shows."""
    g = torch.Generator().manual_seed(0)
    return {k for _, a in _examined(args, domains or {}) for k in describe(a, g).kinds()}


# Breaking one structure --------------------------------------------------------------------------

def _int(g: torch.Generator, high: int, low: int = 0) -> int:
    return int(torch.randint(low, high, (1,), generator=g, device="cpu"))


def _value(st: Structure, g: torch.Generator) -> Any:
    return st.values[_int(g, st.values.numel())].item()


def _matrix_position(st: Structure, g: torch.Generator, inside: Callable[[int, int], bool]) -> tuple | None:
    """A random ``(..., i, j)`` index with ``inside(i, j)``, or None after :data:`TRIES` draws."""
    lead, rows, cols = st.shape[:-2], st.shape[-2], st.shape[-1]
    for _ in range(TRIES):
        i, j = _int(g, rows), _int(g, cols)
        if inside(i, j):
            return tuple(_int(g, n) for n in lead) + (i, j)
    return None


def _adjacent(st: Structure, g: torch.Generator, below: bool) -> tuple | None:
    """A random index on the first diagonal outside the band, below or above it, or None."""
    rows, cols = st.shape[-2], st.shape[-1]
    off = (st.lower if below else st.upper) + 1  # i - j (below) or j - i (above) of that diagonal
    lo, hi = (max(off, 0), min(rows, cols + off)) if below else (max(-off, 0), min(rows, cols - off))
    if lo >= hi:
        return None
    i = _int(g, hi, lo)
    return tuple(_int(g, n) for n in st.shape[:-2]) + ((i, i - off) if below else (i, i + off))


def _zero_regions(st: Structure, kind: str) -> list[tuple[bool, Callable[[int, int], bool]]]:
    """``(below, inside)`` of the zero regions that ``kind`` (triangular or banded) breaks into."""
    low, up = st.lower, st.upper
    assert low is not None and up is not None
    rows, cols = st.shape[-2], st.shape[-1]
    below = low <= 0 if kind == "triangular" else low < rows - 1
    above = up <= 0 if kind == "triangular" else up < cols - 1
    out = []
    if below:
        out.append((True, lambda i, j: i - j > low))
    if above:
        out.append((False, lambda i, j: j - i > up))
    return out


def _changes(kind: str, t: torch.Tensor, st: Structure, g: torch.Generator) -> list[tuple[tuple, Any]]:
    """1 to :data:`MAX_CHANGES` ``(index, value)`` changes (a swap is two) that break ``kind`` in
    ``t``, each at a position not changed before; fewer where a position is not found in
    :data:`TRIES` draws. Reads single elements only; nothing is written here."""
    count = _int(g, MAX_CHANGES + 1, 1)
    out: list[tuple[tuple, Any]] = []
    used: set[tuple] = set()  # each position changed once (two swaps sharing one would duplicate a value)
    for _ in range(count):
        where: tuple | None = None
        value: Any = None
        if kind in ("triangular", "banded"):
            regions = _zero_regions(st, kind)
            below, inside = regions[_int(g, len(regions))]
            if kind == "banded" and _int(g, 2):
                where = _adjacent(st, g, below)
            if where is None or where in used:
                where = _matrix_position(st, g, inside)
            value = _value(st, g)
        elif kind == "sparse":
            for _ in range(TRIES):
                idx = tuple(_int(g, n) for n in st.shape)
                if idx not in used and t[idx].item() == 0:
                    where, value = idx, _value(st, g)
                    break
        elif kind == "symmetric":
            for _ in range(TRIES):
                where = _matrix_position(st, g, lambda i, j: i != j)
                value = _value(st, g)
                mirror = where[:-2] + where[:-3:-1] if where is not None else None
                if where is not None and not {where, mirror} & used and value != t[where].item() \
                        and value != t[mirror].item():
                    used.add(mirror)  # kept as it is: the pair must stay unequal
                    break
                where = None
        elif kind == "sorted":
            for _ in range(TRIES):
                row = tuple(_int(g, n) for n in st.shape[:-1])
                i, j = _int(g, st.shape[-1]), _int(g, st.shape[-1])
                a, b = t[row + (i,)].item(), t[row + (j,)].item()
                if a != b and not {row + (i,), row + (j,)} & used:  # a swap: two changes
                    out += [(row + (i,), b), (row + (j,), a)]
                    used.update((row + (i,), row + (j,)))
                    break
            continue
        if where is not None and where not in used:
            out.append((where, value))
            used.add(where)
    return out


def _apply(t: torch.Tensor, changes: Sequence[tuple[tuple, Any]]) -> torch.Tensor:
    out = t.clone()  # get_inputs() may return a tensor it keeps: never written in place
    for where, value in changes:
        out[where] = value
    return out


def break_structure(kind: str, args: Sequence[Any], g: torch.Generator,
                    domains: Mapping[int, Domain] | None = None) -> tuple[list[Any], list[str]]:
    """``args`` (one ``get_inputs()`` draw) with structure ``kind`` broken in every tensor that
    shows it: ``(new args, notes)``, one note per changed tensor ("input 0: 3 entries"); no note
    when no tensor shows ``kind``.

    Raises:
        ValueError: ``kind`` is not one of :data:`STRUCTURES`.
    """
    if kind not in STRUCTURES:
        raise ValueError(f"unknown input structure {kind!r}; known: {', '.join(STRUCTURES)}")
    out, notes = list(args), []
    with torch.no_grad():
        for i, a in _examined(args, domains or {}):
            st = describe(a, g)
            if kind not in st.kinds():
                continue
            changes = _changes(kind, a, st, g)
            if changes:
                out[i] = _apply(a, changes)
                notes.append(f"input {i}: {len(changes)} entr{'y' if len(changes) == 1 else 'ies'}")
    return out, notes


def few_positions(args: Sequence[Any], other: Sequence[Any], g: torch.Generator,
                  domains: Mapping[int, Domain] | None = None) -> list[Any]:
    """``args`` with 1 to :data:`MAX_CHANGES` random positions of each tensor (drawn with ``g``)
    given the values ``other`` (another ``get_inputs()`` draw, so inside the problem's domain) has
    there, at positions where the two differ where such are found; tensors declared with a
    coupling domain and tensors shaped unlike ``other``'s are kept."""
    out = list(args)
    doms = domains or {}
    with torch.no_grad():
        for i, a in _examined(args, doms):
            b = other[i] if i < len(other) else None
            if not isinstance(b, torch.Tensor) or b.shape != a.shape or b.dtype != a.dtype:
                continue
            count = _int(g, MAX_CHANGES + 1, 1)
            flat = torch.randint(a.numel(), (4 * count,), generator=g, device="cpu").to(a.device)
            idx = torch.unravel_index(flat, a.shape)
            differ = (a[idx] != b[idx]).nonzero().flatten()
            take = differ[:count] if differ.numel() else torch.arange(count, device=a.device)
            idx = tuple(x[take] for x in idx)
            c = a.clone()  # get_inputs() may return a tensor it keeps: never written in place
            c[idx] = b[idx]
            out[i] = c
    return out
