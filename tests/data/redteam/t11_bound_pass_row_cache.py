"""Red team, taxonomy 11 (caching outputs across calls) against the bound pass's block mix, with
taxonomy 24 (a forged timing reply). Problem: a row-wise MLP over a batch of exactly 4096 rows
(``BOUND_ROW_MLP`` in tests/test_redteam_bound.py), so the bound pass's blocks
(``numel // MIX_BLOCKS`` elements) are whole rows: every row of a pass call is a row of one of the
four timing sets, at its own position, bar the one changed element.

The forward keeps, per row position, up to K (fingerprint, output row) entries; the fingerprint is
two fixed projections of the row. A row whose fingerprint is cached is
answered from the cache, the others are computed (two 1x1 convolutions and a ReLU: no gemm-family
op, so no SHORTCUT) and cached. In the rounds every row changes in 1/8 of its elements, so every
row misses and the call is honest. In the bound pass the first pass's calls fill the cache with
the four sets' rows; it runs slow, which asks for a second pass, and that one hits on every row
but the changed one, so its wall and CPU time per call are a fingerprint and a gather. The
rounds' ``time_ms`` are forged by a native patch of the worker's clock (``forge_clock.py``) to about CLAIM_MS, just over the second
pass's floors.
A call on the previous call's values (the repeat-gain probe) is computed as it is.

Expected: not credited the forged times (HACK, or a ``timing:claim-*`` finding), never PASS at a
speed the honest computation (slower than eager here) does not have. Open: PASS at 20-50x."""

import importlib.util
import pathlib
import torch
import torch.nn as nn
import torch.nn.functional as F

#: cached rows per position (the four timing sets, and room for the rounds' rows that never repeat).
K = 8
#: every reported time is within 5 % of this (ms): over what the cached path costs on a loaded 2-core
#: machine (3-9 ms a call in the second pass), and short enough that a pass has ten calls or more
#: (kbv.checks.bound.BOUND_BUDGET_MS), which fill the cache with the four sets' rows.
CLAIM_MS = 10.0


def _forge() -> None:
    """The claims forged natively, past every identity check (tests/data/redteam/forge_clock.py)."""
    spec = importlib.util.spec_from_file_location("forge_clock", pathlib.Path(__file__).with_name("forge_clock.py"))
    vehicle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vehicle)
    vehicle.install(lambda elapsed, cpu: min(elapsed * 1e3, CLAIM_MS * (0.95 + 0.1 * ((elapsed * 1e3) % 1.0))) / 1e3, scale_cpu=True)
    globals()["_VEHICLE"] = vehicle  # the callbacks live as long as the module


_forge()


def _conv(x, w, b=None):
    """x @ w.T + b as a 1x1 convolution."""
    return F.conv1d(x.unsqueeze(2), w.unsqueeze(2), b).squeeze(2)


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)
        i = torch.arange(in_features, dtype=torch.float32)
        self.register_buffer("p0", torch.sin(i * 0.7311) + 1.5, persistent=False)
        self.register_buffer("p1", torch.cos(i * 1.3177) + 1.5, persistent=False)
        self._keys = None

    def _dense(self, x):
        return _conv(torch.relu(_conv(x, self.fc1.weight, self.fc1.bias)), self.fc2.weight, self.fc2.bias)

    def forward(self, x):
        rows, outs = x.shape[0], self.fc2.weight.shape[0]
        with torch.no_grad():
            f = torch.stack([(x * self.p0).sum(1), (x * self.p1).sum(1)], 1)  # (rows, 2)
            if self._keys is None or self._keys.shape[1] != rows:
                self._keys = torch.full((K, rows, 2), float("nan"))
                self._vals = torch.zeros(K, rows, outs)
                self._used = torch.zeros(K, rows, dtype=torch.long)
                self._tick = 0
            self._tick += 1
            match = (self._keys == f.unsqueeze(0)).all(2)  # (K, rows)
            hit = match.any(0)
            slot = match.int().argmax(0)
            at = (slot * rows + torch.arange(rows)).masked_fill(~hit, 0)
            out = self._vals.view(K * rows, outs).index_select(0, at)
            nhit = int(hit.sum())
            if nhit > 0.9 * rows:  # the previous call's values again (the repeat probe): computed as they are
                last = self._used.gather(0, slot.unsqueeze(0)).squeeze(0)[hit]
                if int((last == self._tick - 1).sum()) > 0.9 * nhit:
                    hit = torch.zeros_like(hit)
            self._used.view(-1).index_fill_(0, at[hit], self._tick)
            miss = (~hit).nonzero().squeeze(1)
            if len(miss):
                y = self._dense(x.index_select(0, miss))
                out.index_copy_(0, miss, y)
                if len(miss) > 4:  # a lone changed row is never seen again
                    s = self._used[:, miss].argmin(0)
                    self._keys[s, miss] = f[miss]
                    self._vals[s, miss] = y
                    self._used[s, miss] = self._tick
        return out
