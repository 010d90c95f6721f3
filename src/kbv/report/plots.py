"""The report's figures, drawn from :class:`kbv.batch.metrics.BatchMetrics` as inline PNG data URIs.

matplotlib is used through :class:`matplotlib.figure.Figure` with the Agg canvas only (no pyplot
global state, no display), so figures render on a headless host and the HTML needs no network.
Every function returns ``data:image/png;base64,...`` or None when there is nothing to draw.
"""

from __future__ import annotations

import base64
import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

from kbv.batch.metrics import DECOMPOSITION_BASELINES, DECOMPOSITION_CORRECTNESS, BatchMetrics

_DPI = 100


def _figure(width_in: float = 7.0, height_in: float = 4.2, *, right: float = 0.97,
            bottom: float = 0.17) -> Figure:
    # Fixed margins rather than constrained layout: layout solving dominated render time
    # (~1 s per figure on a 2-core host) for no visible gain on these simple axes.
    fig = Figure(figsize=(width_in, height_in), dpi=_DPI)
    fig.subplots_adjust(left=0.11, right=right, bottom=bottom, top=0.9, wspace=0.28)
    FigureCanvasAgg(fig)
    return fig


def _ratio_axis(axis) -> None:
    """Log axis of ratios labelled ``0.5×  1×  2×`` at 1-2-5 steps (no 10^k notation)."""
    lo, hi = sorted(axis.get_view_interval())
    nice = [m * 10.0 ** e for e in range(-4, 5) for m in (1, 2, 5)]
    ticks = [t for t in nice if lo <= t <= hi]
    if len(ticks) < 3:  # a narrow range: add the 1.5/3/4 steps too
        ticks = sorted({t for t in nice + [m * 10.0 ** e for e in range(-4, 5) for m in (1.5, 3, 4, 7.5)]
                        if lo <= t <= hi})
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    axis.set_minor_formatter(NullFormatter())


def _legend_outside(ax) -> None:
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _colors(n: int) -> list:
    from matplotlib import colormaps
    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def memory_speedup_scatter(metrics: BatchMetrics, level: int) -> str | None:
    """Per solved problem of ``level``: best correct speedup (x, ×) vs its memory efficiency
    (y, reference peak / candidate peak, ×), one colour per run, log–log, lines at 1×."""
    fig = _figure(8.5, 4.6, right=0.76)
    ax = fig.add_subplot()
    drawn = False
    for color, run in zip(_colors(len(metrics.runs)), metrics.runs):
        try:
            lm = run.level(level)
        except KeyError:
            continue
        pts = [(o.best_speedup, o.best_memory_efficiency) for o in lm.outcomes
               if o.best_speedup is not None and o.best_memory_efficiency is not None]
        if pts:
            x, y = zip(*pts)
            ax.scatter(x, y, s=22, alpha=0.8, color=color, label=run.run or "(unnamed)")
            drawn = True
    if not drawn:
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axvline(1.0, color="0.5", lw=0.8, ls="--")
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    _ratio_axis(ax.xaxis)
    _ratio_axis(ax.yaxis)
    ax.set_xlabel(f"correct speedup vs {metrics.baseline} (log)")
    ax.set_ylabel("memory efficiency: ref. / cand. peak (log)")
    ax.set_title(f"Level {level}: memory vs speed (best correct sample per problem)", fontsize=11)
    _legend_outside(ax)
    return _data_uri(fig)


def speedup_cdf(metrics: BatchMetrics) -> str | None:
    """Empirical CDF, per run, of the best correct speedup over the run's solved problems (log x)."""
    fig = _figure(8.5, 4.6, right=0.74)
    ax = fig.add_subplot()
    drawn = False
    for color, run in zip(_colors(len(metrics.runs)), metrics.runs):
        s = np.sort([o.best_speedup for o in run.overall.outcomes if o.best_speedup is not None])
        if s.size:
            y = np.arange(1, s.size + 1) / s.size
            ax.step(np.concatenate([[s[0]], s]), np.concatenate([[0.0], y]), where="post", color=color,
                    label=f"{run.run or '(unnamed)'} (n={s.size})")
            drawn = True
    if not drawn:
        return None
    ax.set_xscale("log")
    ax.axvline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_ylim(0, 1.02)
    _ratio_axis(ax.xaxis)
    ax.set_xlabel(f"best correct speedup vs {metrics.baseline} (log)")
    ax.set_ylabel("fraction of solved problems ≤ x")
    ax.set_title("Speedup CDF per run")
    _legend_outside(ax)
    return _data_uri(fig)


def decomposition_figure(metrics: BatchMetrics) -> Figure | None:
    """The figure of :func:`decomposition_bars` (None without runs). fast_1 is drawn on a fixed
    0–100 % axis with each bar's value written on it, so all-zero bars read as 0 % (matplotlib's
    automatic limits made an empty box with a −0.04…0.04 axis); a correct speedup that is
    undefined (nothing solved) is written ``–`` on its empty bar, never drawn as 0×."""
    if not metrics.runs:
        return None
    fig = _figure(10.0, 4.8, bottom=0.27)
    ax_s, ax_f = fig.subplots(1, 2)
    combos = [(b, c) for b in DECOMPOSITION_BASELINES for c in DECOMPOSITION_CORRECTNESS]
    x = np.arange(len(metrics.runs))
    width = 0.8 / len(combos)
    for i, (color, (b, c)) in enumerate(zip(_colors(len(combos)), combos)):
        cells = [r.overall.cell(b, c) for r in metrics.runs]
        sp = [cell.correct_speedup for cell in cells]
        f1 = [cell.fast_1_frac * 100 for cell in cells]
        label = f"{b.replace('eager-', '').upper()} baseline, {c} correctness"
        bars = ax_s.bar(x + i * width, [v or 0.0 for v in sp], width, color=color, label=label)
        ax_s.bar_label(bars, labels=["–" if v is None else "" for v in sp], fontsize=7)
        bars = ax_f.bar(x + i * width, f1, width, color=color, label=label)
        ax_f.bar_label(bars, labels=[f"{v:.0f}%" for v in f1], fontsize=7, padding=1)
    for ax in (ax_s, ax_f):
        ax.set_xticks(x + 0.4 - width / 2, [r.run or "(unnamed)" for r in metrics.runs], rotation=20,
                      ha="right", fontsize=8)
    ax_s.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax_s.set_ylim(bottom=0.0)
    ax_f.set_ylim(0.0, 105.0)  # room for a 100 % bar's label
    ax_f.set_yticks([0, 25, 50, 75, 100])
    ax_s.set_ylabel("correct speedup (geomean, ×)")
    ax_f.set_ylabel("fast_1 (% of problems)")
    ax_s.set_title("Correct speedup")
    ax_f.set_title("fast_1")
    fig.legend(*ax_s.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8, frameon=False)
    return fig


def decomposition_bars(metrics: BatchMetrics) -> str | None:
    """Correct speedup (left) and fast_1 (right) per run under each baseline × correctness notion."""
    fig = decomposition_figure(metrics)
    return _data_uri(fig) if fig is not None else None


def failure_bars(metrics: BatchMetrics) -> str | None:
    """Per run, how many nominal-passing samples failed each hidden input set (D1..D4, ...)."""
    names = sorted({n for r in metrics.runs for n in r.overall.hidden_failures})
    if not names:
        return None
    fig = _figure(8.5, 4.2, right=0.7)
    ax = fig.add_subplot()
    x = np.arange(len(names))
    width = 0.8 / max(1, len(metrics.runs))
    for i, (color, run) in enumerate(zip(_colors(len(metrics.runs)), metrics.runs)):
        ax.bar(x + i * width, [run.overall.hidden_failures.get(n, 0) for n in names], width, color=color,
               label=f"{run.run or '(unnamed)'} ({run.overall.nominal_passed_samples} passed nominal)")
    ax.set_xticks(x + 0.4 - width / 2, names)
    ax.set_ylim(0, max(1, max((r.overall.hidden_failures.get(n, 0) for r in metrics.runs for n in names),
                              default=0)) * 1.05)  # no failure anywhere: a 0..1 axis, not -0.04..0.04
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("samples failing (of those passing nominal)")
    ax.set_title("Failures per hidden distribution")
    _legend_outside(ax)
    return _data_uri(fig)
