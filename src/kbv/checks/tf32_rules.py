"""Where the eager-tf32 baseline is the eager-fp32 one: a reference none of whose ops the TF32
switches reach (pure rule; kbv.pipeline.judging and kbv.pipeline.timing_rounds use it).

The two baselines differ in three switches only (:func:`kbv.sandbox.numeric_flags.flags_for`):
``cuda.matmul.allow_tf32`` and ``float32_matmul_precision`` (cuBLAS GEMMs, and on cpu oneDNN's
matmul) and ``cudnn.allow_tf32`` (cuDNN convolutions). A reference that runs no GEMM and no
convolution computes the same bits at the same speed under both, so its eager-tf32 reference run
and timing are the eager-fp32 ones, and neither is repeated (issue 21: the tf32 reference skipped
where it is exact).

The test is conservative: both op counts of the reference (the dispatch mode's and the profiler's,
:mod:`kbv.sandbox.profiling`) must have succeeded, and no op name may contain any of
:data:`TF32_SUBSTRINGS` and :data:`TF32_WORDS`, which cover the GEMM family and every op whose kernel may call one inside
(linear algebra, attention, recurrent layers, distance matrices). A miss would let the candidate
face a strict-fp32 baseline where TF32 is 7x faster, so when in doubt both are measured.
"""

from __future__ import annotations

from typing import Mapping

#: parts of op names the TF32 switches may reach (kbv choice, conservative; see the module doc):
#: substrings, and whole ``_``-separated words for the short ones ("lu" is in "relu").
TF32_SUBSTRINGS = ("mm", "matmul", "linear", "einsum", "tensordot", "conv", "attention", "linalg", "cholesky",
                   "solve", "inverse", "lstsq", "pinv", "svd", "triangular", "orgqr", "ormqr", "geqrf", "kron",
                   "cdist", "pdist", "rnn", "lstm", "gru", "cudnn", "mkldnn", "miopen", "cublas", "gemm", "baddbmm")
TF32_WORDS = frozenset({"lu", "qr", "det", "logdet", "slogdet", "eig", "eigh", "eigvals", "eigvalsh", "dot", "vdot",
                        "mv", "addmv", "addr", "ger", "inner", "outer", "bilinear"})


def tf32_reachable(op: str) -> bool:
    """Whether the TF32 switches may change op ``op`` (``aten.addmm``, ``aten::convolution``)."""
    name = op.replace("::", ".").split(".")
    base = (name[1] if len(name) > 1 else name[0]).lower()
    return any(mark in base for mark in TF32_SUBSTRINGS) or any(w in TF32_WORDS for w in base.split("_"))


def tf32_inert(counts: Mapping[str, tuple[Mapping[str, int], str | None]]) -> bool:
    """True when every count (name -> (ops, error)) succeeded, saw at least one op, and no op of any
    is :func:`tf32_reachable`: the reference is the same under eager-fp32 and eager-tf32."""
    if not counts:
        return False
    for ops, error in counts.values():
        if error or not ops or any(tf32_reachable(op) for op in ops):
            return False
    return True
