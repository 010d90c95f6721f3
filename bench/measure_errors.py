"""Measure normalised errors against the float64 oracle: what k and the floor of the kbv policy rest on.

For each operator below, on every input distribution kbv uses (nominal get_inputs() = torch.rand,
D2 ×3, D3 ×0.01, D4 ×−1, and kbv's randomised ones), several seeds each, this computes the
normalised error (kbv.reference.policy.normalised_error) against the float64 oracle of

* the baselines: eager-fp32 (TF32 off) and, on cuda, eager-tf32 (TF32 on);
* honest alternative implementations in float32 (other summation orders, chunked / online
  algorithms, Triton kernels: compiled on cuda, the interpreter on cpu);
* TF32 implementations (cuBLAS via the flag, Triton tl.dot in tf32 on cuda; rounding and
  truncation emulated on cpu);
* precision downgrades (fp16 / bf16 inputs, fp16 output) and numerical shortcuts (softmax without
  max-subtraction, one-pass variance, tanh from exp), which the policy must reject.

and reports, per implementation, the ratio err / max(baseline errors) (worst case over
distributions and seeds) and how many sets each candidate (k, floor) would fail.

Usage (repo root):
    TRITON_INTERPRET=1 .venv/bin/python bench/measure_errors.py --device cpu --out docs/data/errors-cpu.json
    python3 bench/measure_errors.py --device cuda --out /tmp/errors-cuda.json        # on the H200
Prints a markdown summary to stdout; --out writes every raw measurement as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kbv.reference import inputs as inp  # noqa: E402
from kbv.reference.distributions import DEFAULT_DISTRIBUTIONS, HIDDEN_DISTRIBUTIONS  # noqa: E402
from kbv.sandbox.numeric_flags import apply_flags, flags_for  # noqa: E402
from kbv.reference.policy import INPUT_ROUNDING, INPUT_ROUNDING_CAP, budget, normalised_error  # noqa: E402

K_GRID = (2, 4, 8, 16, 32, 64, 128)
FLOOR_GRID = (0, 2, 4, 8, 16, 32)  # in eps(fp32)
EPS32 = torch.finfo(torch.float32).eps

HONEST, TF32, REDUCED, SHORTCUT = "honest-fp32", "tf32", "reduced-precision", "shortcut"


# Emulated roundings ------------------------------------------------------------------------------

def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> tf32 (10 explicit mantissa bits), round to nearest even, as cuBLAS/CUTLASS convert."""
    i = x.contiguous().view(torch.int32)
    lsb = (i >> 13) & 1
    r = (i + 0xFFF + lsb) & ~0x1FFF
    return r.view(torch.float32)


def tf32_trunc(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> tf32 by dropping the 13 low mantissa bits (what mma.tf32 does to raw fp32 registers,
    i.e. Triton's tl.dot(input_precision="tf32") without explicit rounding)."""
    i = x.contiguous().view(torch.int32)
    return (i & ~0x1FFF).view(torch.float32)


def via(dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x.to(dtype).to(torch.float32)


# Alternative implementations ---------------------------------------------------------------------

def mm_chunked(a, b, chunks=8):
    k = a.shape[-1]
    step = max(1, k // chunks)
    out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    for s in range(0, k, step):
        out = out + a[:, s:s + step] @ b[s:s + step]
    return out


def mm_reversed_chunks(a, b, chunks=8):
    k = a.shape[-1]
    step = max(1, k // chunks)
    out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    for s in reversed(range(0, k, step)):
        out = out + a[:, s:s + step] @ b[s:s + step]
    return out


def mm_sequential(a, b):
    """One fp32 accumulator per output, K sequential fused steps (a naive one-thread-per-output kernel)."""
    out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    for k in range(a.shape[1]):
        out.addr_(a[:, k], b[k])
    return out


def seq_sum(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """Sequential left-to-right summation with one float32 accumulator per output (a naive
    one-thread-per-row kernel). (torch.cumsum would not do: on CPU it accumulates in float64.)"""
    xt = x.movedim(dim, 0)
    acc = torch.zeros_like(xt[0])
    for j in range(xt.shape[0]):
        acc = acc + xt[j]
    return acc.unsqueeze(dim) if keepdim else acc


def softmax_manual(x):
    m = x.max(dim=1, keepdim=True).values
    e = torch.exp(x - m)
    return e / e.sum(dim=1, keepdim=True)


def softmax_seq(x):
    m = x.max(dim=1, keepdim=True).values
    e = torch.exp(x - m)
    return e / seq_sum(e, 1, keepdim=True)


def softmax_online(x, chunk=1024):
    """Online softmax (running max and rescaled running sum over chunks), as flash-style kernels do."""
    m = torch.full((x.shape[0], 1), -math.inf, dtype=x.dtype, device=x.device)
    s = torch.zeros((x.shape[0], 1), dtype=x.dtype, device=x.device)
    for c in range(0, x.shape[1], chunk):
        blk = x[:, c:c + chunk]
        m_new = torch.maximum(m, blk.max(dim=1, keepdim=True).values)
        s = s * torch.exp(m - m_new) + torch.exp(blk - m_new).sum(dim=1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / s


def softmax_lse(x):
    return torch.exp(x - torch.logsumexp(x, dim=1, keepdim=True))


def softmax_nomax(x):
    e = torch.exp(x)
    return e / e.sum(dim=1, keepdim=True)


def ln_manual(x, w, b, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(dim=-1, keepdim=True)
    return d * torch.rsqrt(var + eps) * w + b


def ln_sequential(x, w, b, eps=1e-5):
    n = x.shape[-1]
    mu = seq_sum(x, -1, keepdim=True) / n
    d = x - mu
    var = seq_sum(d * d, -1, keepdim=True) / n
    return d * torch.rsqrt(var + eps) * w + b


def ln_welford_chunks(x, w, b, eps=1e-5, chunk=512):
    """Chunked Welford / Chan merge of (count, mean, M2), as many fused kernels do."""
    n_tot = torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)
    mean = torch.zeros_like(n_tot)
    m2 = torch.zeros_like(n_tot)
    for c in range(0, x.shape[1], chunk):
        blk = x[:, c:c + chunk]
        nb = blk.shape[1]
        mb = blk.mean(dim=1, keepdim=True)
        m2b = ((blk - mb) ** 2).sum(dim=1, keepdim=True)
        delta = mb - mean
        n_new = n_tot + nb
        mean = mean + delta * nb / n_new
        m2 = m2 + m2b + delta * delta * n_tot * nb / n_new
        n_tot = n_new
    var = m2 / n_tot
    return (x - mean) * torch.rsqrt(var + eps) * w + b


def ln_onepass(x, w, b, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mu * mu
    return (x - mu) * torch.rsqrt(var.clamp_min(0) + eps) * w + b


def conv_unfold(x, weight):
    n, c, h, w_ = x.shape
    o, _, kh, kw = weight.shape
    cols = F.unfold(x, (kh, kw))  # n, c*kh*kw, L
    out = weight.view(o, -1) @ cols
    return out.view(n, o, h - kh + 1, w_ - kw + 1)


def ce_manual(logits, targets):
    lse = torch.logsumexp(logits, dim=1)
    return (lse - logits.gather(1, targets[:, None]).squeeze(1)).mean()


def ce_seq(logits, targets):
    m = logits.max(dim=1, keepdim=True).values
    lse = torch.log(seq_sum(torch.exp(logits - m), 1)) + m.squeeze(1)
    per = lse - logits.gather(1, targets[:, None]).squeeze(1)
    return seq_sum(per, 0) / per.shape[0]


def gemm_epilogue(x, w, bias, scale=2.0):
    return torch.relu(F.linear(x, w) + bias) * scale


def sigmoid_exp(x):
    return 1.0 / (1.0 + torch.exp(-x))


def tanh_exp(x):
    e = torch.exp(2 * x)
    return (e - 1) / (e + 1)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def rowsum_pairwise_chunks(x, chunk=4096):
    parts = [x[:, c:c + chunk].sum(dim=1) for c in range(0, x.shape[1], chunk)]
    return torch.stack(parts, dim=1).sum(dim=1)


# Triton kernels (compiled on cuda, interpreted on cpu under TRITON_INTERPRET=1) ------------------

def _triton_available(device: str) -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def triton_matmul(input_precision: str):
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ka = k0 + rk
            av = tl.load(a + rm[:, None] * sam + ka[None, :] * sak,
                         mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            bv = tl.load(b + ka[:, None] * sbk + rn[None, :] * sbn,
                         mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(av, bv, acc, input_precision=PREC)
        tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def mm(x, y):
        m, k = x.shape
        _, n = y.shape
        out = torch.empty(m, n, dtype=torch.float32, device=x.device)
        grid = (triton.cdiv(m, 64), triton.cdiv(n, 64))
        kernel[grid](x, y, out, m, n, k, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                     out.stride(0), out.stride(1), BM=64, BN=64, BK=32, PREC=input_precision)
        return out

    return mm


def _load_demo(name: str):
    import importlib.util

    path = ROOT / "src" / "kbv" / "data" / "candidates" / name
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Cases -------------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    get_inputs: Callable[[], list]
    ref: Callable  #: the problem's forward (runs in fp32, TF32 fp32/tf32 flags, and float64)
    alts: dict = field(default_factory=dict)  #: name -> (fn, category)
    params: Callable[[torch.dtype, str], tuple] | None = None  #: extra (weights) after the inputs


def make_cases(device: str, small: bool) -> list[Case]:
    s = 2 if small else 1
    cases = []

    # large-K matmul (a precision downgrade hides worst here) and a square one
    shapes = [(64, 8192 // s, 64), (512 // s, 512 // s, 512 // s)]
    if device == "cuda":
        shapes.append((2048, 4096, 2048))  # KernelBench-sized, where TF32 and split-K kernels matter
    for (m, k, n) in shapes:
        alts = {
            "chunked-K": (mm_chunked, HONEST),
            "reversed-chunks": (mm_reversed_chunks, HONEST),
            "einsum": (lambda a, b: torch.einsum("ik,kj->ij", a, b), HONEST),
            "tf32-round (emulated)": (lambda a, b: tf32_round(a) @ tf32_round(b), TF32),
            "tf32-trunc (emulated)": (lambda a, b: tf32_trunc(a) @ tf32_trunc(b), TF32),
            "fp16 inputs, fp32 acc": (lambda a, b: via(torch.float16)(a) @ via(torch.float16)(b), REDUCED),
            "bf16 inputs, fp32 acc": (lambda a, b: via(torch.bfloat16)(a) @ via(torch.bfloat16)(b), REDUCED),
            "fp16 output": (lambda a, b: via(torch.float16)(a @ b), REDUCED),
        }
        if k <= 2048 and m * n <= 512 * 512 // (s * s) and device == "cpu":
            alts["sequential-K"] = (mm_sequential, HONEST)
        if _triton_available(device):
            alts["triton tl.dot ieee"] = (triton_matmul("ieee"), HONEST)
            if device == "cuda":
                alts["triton tl.dot tf32"] = (triton_matmul("tf32"), TF32)
                alts["triton tl.dot tf32x3"] = (triton_matmul("tf32x3"), HONEST)

        def gi(m=m, k=k, n=n):
            return [torch.rand(m, k), torch.rand(k, n)]
        cases.append(Case(f"matmul {m}x{k}x{n}", gi, lambda a, b: a @ b, alts))

    rows, cols = (64, 16384 // s)
    alts = {"manual stable": (softmax_manual, HONEST), "sequential sum": (softmax_seq, HONEST),
            "online (chunks)": (softmax_online, HONEST), "exp(x - logsumexp)": (softmax_lse, HONEST),
            "no max-subtraction": (softmax_nomax, SHORTCUT),
            "bf16 inputs": (lambda x: torch.softmax(via(torch.bfloat16)(x), dim=1), REDUCED)}
    if _triton_available(device):
        alts["triton softmax (demo)"] = (lambda x: _load_demo("softmax_triton.py").triton_softmax(x, 1), HONEST)
    cases.append(Case(f"softmax {rows}x{cols}", lambda rows=rows, cols=cols: [torch.rand(rows, cols)],
                      lambda x: torch.softmax(x, dim=1), alts))

    rows, cols = (32, 16384 // s)

    def ln_params(dtype, dev, cols=cols):
        g = torch.Generator().manual_seed(0)
        w = (1 + 0.1 * torch.randn(cols, generator=g)).to(dev, dtype)
        b = (0.1 * torch.randn(cols, generator=g)).to(dev, dtype)
        return (w, b)
    alts = {"two-pass manual": (ln_manual, HONEST), "sequential sums": (ln_sequential, HONEST),
            "welford chunks": (ln_welford_chunks, HONEST), "one-pass E[x^2]-E[x]^2": (ln_onepass, SHORTCUT),
            "bf16 inputs": (lambda x, w, b: ln_manual(via(torch.bfloat16)(x), w, b), REDUCED)}
    if _triton_available(device):
        alts["triton layernorm (demo)"] = (
            lambda x, w, b: _load_demo("layernorm_triton.py").triton_layer_norm(x, (x.shape[-1],), w, b, 1e-5), HONEST)
    cases.append(Case(f"layernorm {rows}x{cols}", lambda rows=rows, cols=cols: [torch.rand(rows, cols)],
                      lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5), alts, ln_params))

    rows, cols = (16, 65536 // s)
    alts = {"sequential": (lambda x: seq_sum(x, 1), HONEST),
            "chunks of 4096": (rowsum_pairwise_chunks, HONEST),
            "fp16 accumulation": (lambda x: x.half().sum(dim=1, dtype=torch.float16).float(), REDUCED),
            "bf16 inputs": (lambda x: via(torch.bfloat16)(x).sum(dim=1), REDUCED)}
    cases.append(Case(f"row sum {rows}x{cols}", lambda rows=rows, cols=cols: [torch.rand(rows, cols)],
                      lambda x: x.sum(dim=1), alts))

    def conv_params(dtype, dev):
        g = torch.Generator().manual_seed(1)
        return (torch.randn(32, 16, 3, 3, generator=g).mul(0.1).to(dev, dtype),)
    alts = {"unfold + matmul": (conv_unfold, HONEST),
            "tf32-round (emulated)": (lambda x, w: F.conv2d(tf32_round(x), tf32_round(w)), TF32),
            "bf16 inputs": (lambda x, w: F.conv2d(via(torch.bfloat16)(x), via(torch.bfloat16)(w)), REDUCED)}
    cases.append(Case("conv2d 8x16x32x32 k3", lambda: [torch.rand(8, 16, 32, 32)],
                      lambda x, w: F.conv2d(x, w), alts, conv_params))

    def gemm_params(dtype, dev):
        g = torch.Generator().manual_seed(2)
        return (torch.randn(512, 1024, generator=g).mul(0.03).to(dev, dtype),
                torch.randn(512, generator=g).mul(0.03).to(dev, dtype))
    alts = {"linear, then bias+relu+scale": (gemm_epilogue, HONEST),
            "tf32-round (emulated)": (lambda x, w, b: torch.relu(F.linear(tf32_round(x), tf32_round(w), b)) * 2.0, TF32),
            "fp16 inputs": (lambda x, w, b: torch.relu(F.linear(via(torch.float16)(x), via(torch.float16)(w), b)) * 2.0,
                            REDUCED)}
    cases.append(Case("gemm+bias+relu+scale 128x1024x512", lambda: [torch.rand(128, 1024)],
                      lambda x, w, b: torch.relu(F.linear(x, w, b)) * 2.0, alts, gemm_params))

    alts = {"logsumexp - gather": (ce_manual, HONEST), "sequential sums": (ce_seq, HONEST),
            "bf16 logits": (lambda lg, t: F.cross_entropy(via(torch.bfloat16)(lg), t), REDUCED)}
    cases.append(Case("cross-entropy 4096x1000", lambda: [torch.rand(4096, 1000), torch.randint(0, 1000, (4096,))],
                      lambda lg, t: F.cross_entropy(lg, t), alts))

    for name, ref, alts in (
        ("relu", torch.relu, {"clamp_min": (lambda x: x.clamp_min(0), HONEST),
                              "bf16": (lambda x: torch.relu(via(torch.bfloat16)(x)), REDUCED)}),
        ("sigmoid", torch.sigmoid, {"1/(1+exp(-x))": (sigmoid_exp, HONEST)}),
        ("tanh", torch.tanh, {"(e^2x-1)/(e^2x+1)": (tanh_exp, SHORTCUT)}),
        ("gelu", F.gelu, {"0.5x(1+erf(x/sqrt2))": (lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))), HONEST),
                          "tanh approximation": (gelu_tanh, SHORTCUT)}),
        ("exp", torch.exp, {"2^(x log2 e)": (lambda x: torch.exp2(x * math.log2(math.e)), HONEST)}),
    ):
        cases.append(Case(f"{name} 256x4096", lambda: [torch.rand(256, 4096)], ref, alts))
    return cases


# Measurement -------------------------------------------------------------------------------------

def distributions(case: Case, seed: int):
    """(name, args) for nominal, D2-D4 and kbv's randomised distributions (CPU tensors)."""
    base = inp.draw(case.get_inputs, seed)
    yield "nominal", base
    for d in ("D2", "D3", "D4"):
        yield d, inp.scale(base, HIDDEN_DISTRIBUTIONS[d])
    for n in DEFAULT_DISTRIBUTIONS:
        if n != "fresh":
            yield n, inp.build_set(case.get_inputs, n, seed).args


def run(fn, args, extra, flags):
    apply_flags(flags)
    with torch.no_grad():
        out = fn(*args, *extra)
    if isinstance(out, torch.Tensor) and out.is_cuda:
        torch.cuda.synchronize()
    return out


def err(out, oracle) -> float:
    return normalised_error(out.float() if out.dtype != torch.float64 else out, oracle)


def measure(device: str, seeds: int, small: bool) -> list[dict]:
    dev = torch.device(device)
    fp32, tf32 = flags_for("eager-fp32"), flags_for("eager-tf32")
    rows = []
    for case in make_cases(device, small):
        t0 = time.perf_counter()
        for seed in range(seeds):
            for dist, args_cpu in distributions(case, 1000 + seed):
                args = inp.to_device(args_cpu, dev)
                args64 = [a.to(torch.float64) if inp.is_float_tensor(a) else a for a in args]
                extra = case.params(torch.float32, dev) if case.params else ()
                extra64 = case.params(torch.float64, dev) if case.params else ()
                torch.set_default_dtype(torch.float64)
                try:
                    oracle = run(case.ref, args64, extra64, fp32)
                finally:
                    torch.set_default_dtype(torch.float32)
                ref32 = run(case.ref, args, extra, fp32)
                if not (torch.isfinite(ref32).all() and torch.isfinite(oracle).all()):
                    rows.append(dict(case=case.name, dist=dist, seed=seed, dropped=True))
                    continue
                base = {"eager-fp32": err(ref32, oracle)}
                # the problem's own sensitivity to one fp32 rounding of its inputs (kbv.reference.policy.INPUT_ROUNDING)
                moved = [a + EPS32 * a.abs() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                         for a in args64]
                torch.set_default_dtype(torch.float64)
                try:
                    moved_out = run(case.ref, moved, extra64, fp32)
                finally:
                    torch.set_default_dtype(torch.float32)
                if torch.isfinite(moved_out).all():
                    base[INPUT_ROUNDING] = err(moved_out, oracle)
                if device == "cuda":
                    base["eager-tf32"] = err(run(case.ref, args, extra, tf32), oracle)
                elif "tf32-round (emulated)" in case.alts:
                    # what a GPU's TF32 baseline would be (cuBLAS rounds fp32 inputs to TF32, RNE)
                    base["emulated-tf32"] = err(run(case.alts["tf32-round (emulated)"][0], args, extra, fp32), oracle)
                row = dict(case=case.name, dist=dist, seed=seed, dropped=False, baselines=base, alts={})
                for name, (fn, cat) in case.alts.items():
                    try:
                        e = err(run(fn, args, extra, fp32), oracle)
                    except Exception as exc:  # noqa: BLE001
                        e = None
                        row.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"[:200]
                    row["alts"][name] = dict(err=e, category=cat)
                rows.append(row)
        print(f"# {case.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    apply_flags(fp32)
    return rows


def _budget_errors(r: dict, budget_from: tuple[str, ...]) -> dict:
    """The baselines that set the budget; an emulated TF32 baseline stands in for eager-tf32."""
    b = {n: v for n, v in r["baselines"].items() if n in budget_from}
    if "emulated-tf32" in b:
        b["eager-tf32"] = b.pop("emulated-tf32")
    return b


def summarise(rows: list[dict], device: str,
              budget_from: tuple[str, ...] = ("eager-fp32", "eager-tf32", INPUT_ROUNDING),
              floor_eps: float = 8.0, tf32_floor: float = 2.0 ** -10) -> str:
    out = []
    w = out.append
    ks = (4, 8, 16, 32, 64)
    w(f"device {device}; errors are normalised errors vs the float64 oracle; "
      f"ratio = err / max({', '.join(budget_from)} errors); a set fails at k when err > k x max(...) + "
      f"{floor_eps:g} eps(fp32) (+ {tf32_floor:.3g} where TF32 is in play)\n")
    w("| case | baseline err (max fp32 / tf32) | implementation | kind | max ratio | worst dist | "
      + " | ".join(f"fails k={k}" for k in ks) + " |")
    w("|---|---|---|---|---|---|" + "---|" * len(ks))
    by_case: dict[str, list[dict]] = {}
    for r in rows:
        if r["dropped"] or set(budget_from) - {"eager-fp32", INPUT_ROUNDING} <= set(r["baselines"]) \
                or device == "cuda" or "eager-tf32" in budget_from:
            by_case.setdefault(r["case"], []).append(r)
    floors: dict[tuple[str, str], list[float]] = {}
    for case, rs in by_case.items():
        judged = [r for r in rs if not r["dropped"] and all(n in r["baselines"] for n in budget_from
                                                             if n not in ("eager-tf32", INPUT_ROUNDING)
                                                             or device == "cuda" and n == "eager-tf32")]
        if not judged:
            continue
        b32 = max(r["baselines"]["eager-fp32"] for r in judged)
        btf = max(max([v for n, v in r["baselines"].items() if n not in ("eager-fp32", INPUT_ROUNDING) and n in budget_from],
                      default=0.0) for r in judged)
        for name in judged[0]["alts"]:
            ratios, fails = [], {k: 0 for k in ks}
            cat = judged[0]["alts"][name]["category"]
            for r in judged:
                e = r["alts"][name]["err"]
                if e is None:
                    continue
                be = _budget_errors(r, budget_from)
                b = max(min(v, INPUT_ROUNDING_CAP) if n == INPUT_ROUNDING else v for n, v in be.items())
                ratio = math.inf if math.isinf(e) else (e / b if b > 0 else (0.0 if e == 0 else math.inf))
                ratios.append((ratio, r["dist"]))
                for k in ks:
                    if e > budget(be, torch.float32, k, floor_eps, tf32_floor):
                        fails[k] += 1
                if b < 4 * EPS32 and cat == HONEST:
                    floors.setdefault((case, name), []).append(e / EPS32)
            if not ratios:
                continue
            mr, md = max(ratios)
            w(f"| {case} | {b32:.2e} / {btf:.2e} | {name} | {cat} | {mr:.3g} | {md} | "
              + " | ".join(f"{fails[k]}/{len(ratios)}" for k in ks) + " |")
    if floors:
        w("\nFloor: honest implementations on sets where the baselines' error is below 4 eps(fp32) "
          "(max error over those sets, in eps(fp32)):")
        for (case, name), v in floors.items():
            w(f"- {case} / {name}: {max(v):.2f} eps over {len(v)} set(s)")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--small", action="store_true", help="halve the sizes (quick look)")
    ap.add_argument("--out", type=Path, help="write every measurement as JSON here")
    a = ap.parse_args()
    torch.manual_seed(0)
    rows = measure(a.device, a.seeds, a.small)
    text = summarise(rows, a.device)
    if a.device == "cpu":
        text += "\n\n## As on a GPU: budget from max(eager-fp32, emulated TF32-RNE) (gemm-like cases only)\n\n"
        text += summarise(rows, a.device, ("eager-fp32", "emulated-tf32", INPUT_ROUNDING))
        text += "\n\n## Without the input-rounding term (the budget before 2026-11-30)\n\n"
        text += summarise(rows, a.device, ("eager-fp32", "eager-tf32"))
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        meta = {"device": a.device, "torch": torch.__version__, "python": platform.python_version(),
                "gpu": torch.cuda.get_device_name(0) if a.device == "cuda" else None, "seeds": a.seeds,
                "triton_interpret": os.environ.get("TRITON_INTERPRET")}
        a.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, allow_nan=True))


if __name__ == "__main__":
    main()
