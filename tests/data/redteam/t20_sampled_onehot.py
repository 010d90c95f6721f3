"""Red team, taxonomy 20 (value-distribution exploit), for level1/17_Onehot_matmul.

"X is one-hot, and any other input shows it at once": 4 sampled rows of X are read, and when each
has a single non-zero entry every row is taken to be so: Y = W[k] * X[r, k] with k the row's
largest entry (a gather, no matmul), else the full product. Right on every get_inputs() draw, on
D1-D4 and sign-flip (the entry's value scales the row) and on every distribution that redraws all
values (the sampled rows are dense there); wrong where a few rows get a second non-zero entry and
the sample misses them (with 1-8 such rows among 4096, >= 99 % of the time).

How kbv should catch it: the ``break-sparse`` set (1-8 secret zero entries set to values X takes
elsewhere) and ``few-positions`` against the oracle: INCORRECT, with the ``inputs:pattern-broken``
finding naming them.
"""
import torch
import torch.nn as nn

_ROWS = 4


class ModelNew(nn.Module):
    def forward(self, X, W):
        g = torch.Generator().manual_seed(20)
        rows = torch.randint(0, X.shape[0], (_ROWS,), generator=g)
        if bool((torch.count_nonzero(X[rows], dim=1) == 1).all()):
            k = X.abs().argmax(dim=1)
            return W[k] * X.gather(1, k[:, None])
        return X @ W
