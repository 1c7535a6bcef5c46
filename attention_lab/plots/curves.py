"""Curves and bars: the variance of q·k against d_k and softmax saturation (chapter 3), loss curves and
what a trained head attends to (chapter 6), the cost of a generation step (chapter 8).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from .heatmaps import TICK_PX, _pt, new_figure


def _labelled(ax, xlabel: str, ylabel: str | None = None, legend: str | None = None, **grid) -> None:
    """Name ``ax``'s axes, size its ticks, draw its grid (``grid``: where) and its legend (at ``legend``)."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.tick_params(labelsize=_pt(TICK_PX))
    ax.grid(alpha=0.3, **grid)
    if legend is not None:
        ax.legend(fontsize=_pt(TICK_PX), loc=legend)


def variance_panel(ax, d_values: Sequence[int], variances: Sequence[float], words: dict):
    """Draw Var(q·k) against d_k, raw and divided by d_k (= the variance of q·k/√d_k), on log-log
    axes; return the ring marker placed at the current d_k (chapter 3's explorer, whose ``panel`` gives
    the ``words``: title, x, y, raw, scaled; the page's panel shows the same)."""
    ax.plot(d_values, variances, "o-", color="#d95f02", ms=3, label=words["raw"])
    ax.plot(d_values, [v / d for v, d in zip(variances, d_values)], "s-", color="#1b9e77", ms=3, label=words["scaled"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set(xlabel=words["x"], ylabel=words["y"])
    ax.set_title(words["title"], fontsize=_pt(12))
    ax.legend(fontsize=_pt(TICK_PX), loc="upper left")
    ax.grid(alpha=0.3)
    (marker,) = ax.plot([1], [1], "o", ms=9, mfc="none", mec="black", mew=1.5)
    return marker


def saturation_curves(scales: Sequence[float], largest: dict, gradient: dict,
                      marks: Sequence[float] = ()) -> Figure:
    """Draw softmax saturation as curves and return the Figure (chapter 3).

    For a row of logits multiplied by a growing scale ``s``: on the left the largest softmax weight,
    on the right its gradient with respect to its own logit, both against ``s``. ``largest`` and
    ``gradient`` map a curve's label (e.g. "[1, 0] × s") to one value per entry of ``scales``;
    ``marks`` are scales drawn as dotted vertical lines. A pyplot figure: end the cell with
    ``plt.show()``.
    """
    scales = list(scales)
    if list(largest) != list(gradient):
        raise ValueError(f"largest and gradient must name the same curves; got {list(largest)} "
                         f"and {list(gradient)}")
    for name, ys in (*largest.items(), *gradient.items()):
        if len(ys) != len(scales):
            raise ValueError(f"curve {name!r} needs one value per scale: expected {len(scales)}, "
                             f"got {len(ys)}")
    fig = new_figure(figsize=(6.8, 2.9), pyplot=True, layout="constrained")
    ax_w, ax_g = fig.subplots(1, 2)
    colors = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a"]
    for ax, curves, ylabel in ((ax_w, largest, "largest weight"),
                               (ax_g, gradient, "gradient of the largest weight")):
        for (name, ys), color in zip(curves.items(), colors):
            # torch's softmax rounds its last bit differently on AVX2 and AVX-512 CPUs; at 1e-4 (a
            # twentieth of a pixel) every CPU draws the same picture, so `make outputs` is byte-stable
            ax.plot(scales, np.round(np.asarray(ys, dtype=float), 4), color=color, lw=1.8, label=name)
        for s in marks:
            ax.axvline(s, color="0.45", ls=":", lw=1)
        ax.set_xlim(min(scales), max(scales))
        _labelled(ax, "scale s of the logits", ylabel)
    ax_w.set_ylim(0, 1.02)
    ax_g.set_ylim(bottom=0)
    ax_w.set_title("the softmax saturates", fontsize=_pt(12))
    ax_g.set_title("and its gradient vanishes", fontsize=_pt(12))
    ax_w.legend(fontsize=_pt(TICK_PX), loc="lower right")
    return fig


# ---- chapter 6: a trained head ----------------------------------------------------------------

MODEL_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a")  # one per model or head, in the order given


def loss_curves(steps: Sequence[int], curves: dict, levels: dict | None = None,
                zoom_from: int | None = None) -> Figure:
    """Draw loss curves against training steps and return the Figure (chapter 6).

    ``curves`` maps a model's name to ``{"training": [...], "validation": [...]}``, one loss per entry
    of ``steps`` (either may be missing): each model has its colour, validation solid, training
    dashed. ``levels`` maps a label to a loss drawn as a dotted horizontal line (e.g. the loss of a
    uniform guess). With ``zoom_from`` a second panel shows the steps from there on, its loss axis
    fitted to them. A pyplot figure: end the cell with ``plt.show()``.
    """
    steps = list(steps)
    for name, split in curves.items():
        for part, ys in split.items():
            if len(ys) != len(steps):
                raise ValueError(f"{name}'s {part} curve needs one loss per step: expected {len(steps)}, "
                                 f"got {len(ys)}")
    fig = new_figure(figsize=(6.8, 3.3), pyplot=True, layout="constrained")
    axes = fig.subplots(1, 2 if zoom_from is not None else 1, squeeze=False)[0]
    for n, ax in enumerate(axes):
        keep = [i for i, s in enumerate(steps) if n == 0 or s >= zoom_from]
        shown = []
        for (name, split), color in zip(curves.items(), MODEL_COLORS):
            for part, style in (("validation", "-"), ("training", "--")):
                if part in split:
                    ys = [split[part][i] for i in keep]
                    shown += ys
                    ax.plot([steps[i] for i in keep], ys, style, color=color, lw=1.6, label=f"{name}, {part}")
        ax.set_xlim(steps[keep[0]], steps[keep[-1]])
        if n == 0:
            for label, level in (levels or {}).items():
                ax.axhline(level, color="0.45", ls=":", lw=1)
                ax.text(steps[keep[-1]], level, f"{label} ", ha="right", va="top", fontsize=_pt(TICK_PX),
                        color="0.3")
            ax.set_ylabel("loss (nats per character)")
            ax.set_title("all steps", fontsize=_pt(12))
        else:
            pad = 0.08 * (max(shown) - min(shown))
            ax.set_ylim(min(shown) - pad, max(shown) + pad)
            ax.set_title(f"from step {zoom_from:,}, zoomed in", fontsize=_pt(12))
        _labelled(ax, "training step")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=_pt(TICK_PX), loc="outside lower center", ncols=len(curves) * 2,
               frameon=False)
    return fig


def distance_bars(profiles: dict, max_distance: int = 8, level: tuple[str, float] | None = None) -> Figure:
    """Draw mean attention weight against distance (0 = the query's own position, 1 = the one before,
    ...) as side-by-side bars, one colour per head, and return the Figure (chapters 6 and 7).

    ``profiles`` maps a head's name to its weights by distance (entry d = distance d); the first
    ``max_distance`` distances are drawn, on the 0..1 scale of every weight in the course. ``level``,
    ``(label, weight)``, is drawn as a dotted line named in the legend (e.g. an even spread). A pyplot
    figure: end the cell with ``plt.show()``.
    """
    if not profiles:
        raise ValueError("profiles must name at least one head")
    if len(profiles) > len(MODEL_COLORS):
        raise ValueError(f"profiles name {len(profiles)} heads; the bars have colours for at most {len(MODEL_COLORS)}")
    fig = new_figure(figsize=(6.8, 2.9), pyplot=True, layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(profiles)
    for n, ((name, values), color) in enumerate(zip(profiles.items(), MODEL_COLORS)):
        ys = [float(v) for v in list(values)[:max_distance]]
        xs = [d - 0.4 + width * (n + 0.5) for d in range(len(ys))]
        bars = ax.bar(xs, ys, width=width, color=color, label=name)
        if len(profiles) <= 3:  # four bars a distance leave no room for their numbers: the chapter prints them
            ax.bar_label(bars, fmt="%.2f", fontsize=_pt(TICK_PX - 1), padding=1)
    if level is not None:
        ax.axhline(level[1], color="0.45", ls=":", lw=1, label=level[0])
    ax.set_xticks(range(max_distance))
    ax.set_ylim(0, 1)
    _labelled(ax, "distance back from the query (characters)", "mean attention weight", "upper right",
              axis="y")
    return fig


def same_vs_different(pairs: dict) -> Figure:
    """Draw, for each query character, the mean weight its head gives a key that holds the same
    character against one that holds another, and return the Figure (chapter 6).

    ``pairs`` maps a label (e.g. ``"1 back"``) to ``(different, same)``: two sequences of mean weights
    in 0..1, one entry per query character, both measured at the same distance. Each character is a
    point, one colour per label, on logarithmic axes with the line where the two are equal: a point
    above it is a character whose own kind of key gets more weight, and a constant ratio is a line
    parallel to it. A pyplot figure: end the cell with ``plt.show()``.
    """
    if not pairs:
        raise ValueError("pairs must name at least one distance")
    values = []
    for label, (different, same) in pairs.items():
        different, same = [float(v) for v in different], [float(v) for v in same]
        if len(different) != len(same) or not same:
            raise ValueError(f"{label}: different and same need one weight per query character each; "
                             f"got {len(different)} and {len(same)}")
        if min(different + same) <= 0 or max(different + same) > 1:
            raise ValueError(f"{label}: weights must lie in (0, 1] to be drawn on logarithmic axes")
        values.append((label, different, same))
    fig = new_figure(figsize=(4.4, 3.6), pyplot=True, layout="constrained")
    ax = fig.add_subplot()
    low = min(min(d + s) for _, d, s in values) / 1.5
    ax.plot([low, 1], [low, 1], color="0.45", ls=":", lw=1, label="same = different")
    for (label, different, same), color in zip(values, MODEL_COLORS):
        above = sum(s > d for d, s in zip(different, same))
        ax.scatter(different, same, s=18, color=color, label=f"{label}: {above} of {len(same)} above")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, 1)
    ax.set_ylim(low, 1)
    _labelled(ax, "mean weight on a key with another character",
              "mean weight on a key with the same character", "lower right")
    return fig


def cost_curves(T_values: Sequence[int], curves: dict) -> Figure:
    """Draw multiply-adds per generated token against the window length T, one line per way of computing
    it, and return the Figure (chapter 8).

    ``curves`` maps a name ("full window", "with the cache") to one count per entry of ``T_values``; both
    axes are logarithmic, so a count that grows like T is a line of slope 1. A pyplot figure: end the
    cell with ``plt.show()``.
    """
    T_values = [int(t) for t in T_values]
    for name, ys in curves.items():
        if len(ys) != len(T_values):
            raise ValueError(f"{name} needs one count per T: expected {len(T_values)}, got {len(ys)}")
    fig = new_figure(figsize=(6.8, 3.0), pyplot=True, layout="constrained")
    ax = fig.add_subplot()
    for (name, ys), color, marker in zip(curves.items(), MODEL_COLORS, "os^D"):
        ax.plot(T_values, [float(y) for y in ys], "-", marker=marker, color=color, lw=1.6, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(NullFormatter())  # the decades only: 2 x 10^4 ... crowd the axis
    ax.set_xticks(T_values, [str(t) for t in T_values])
    _labelled(ax, "T, characters in the window", "multiply-adds per character", "upper left", which="both")
    return fig
