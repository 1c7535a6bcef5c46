"""Heatmaps: one (T, T) matrix (:func:`attention_heatmap`) or several side by side (:func:`show_heatmaps`),
the colour scales they share, and the figure every picture starts from (:func:`new_figure`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib.resources import files

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator

ANNOTATE_MAX_T = 8  # largest T that gets numbers in its cells when annotate is left to decide
CSS_DPI = 80  # CSS pixels per figure inch: a (3.6, 3.2) inch figure shows as 288 x 256 CSS px
SCALE = 2  # picture pixels per CSS pixel
CELL_PX = 9.0  # numbers in the cells, CSS px
TICK_PX = 9.0  # tick labels (positions or characters), CSS px
# the colour maps as 256 entries each, the one table the hosted book's page reads too
# (python -m course colour-maps writes it from matplotlib's viridis and RdBu_r)
COLOUR_MAPS = json.loads(files("attention_lab").joinpath("data", "colour_maps.json").read_text())
MASKED = COLOUR_MAPS["masked"]  # a score of -inf: no colour on the diverging scale means "masked"

KINDS = {
    # kind: (colour map, colour bar label, number format)
    "weights": ("viridis", "attention weight", "{:.2f}"),
    "scores": ("RdBu_r", "score", "{:.1f}"),
}

# visible stand-ins for characters that would otherwise print as nothing
VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def token_label(ch: str) -> str:
    """Return a character as it should appear on an axis: spaces and newlines made visible."""
    return VISIBLE.get(ch, ch)


def to_numpy(matrix) -> np.ndarray:
    """Return a 2-D float array from a tensor or array-like (detached, on the CPU)."""
    if hasattr(matrix, "detach"):
        matrix = matrix.detach().cpu().numpy()
    arr = np.asarray(matrix, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D (T, T) matrix; got an array of shape {arr.shape}")
    return arr


def contrast_color(rgba) -> str:
    """Return "black" or "white", whichever reads better on a cell of colour ``rgba``."""
    r, g, b = (float(c) for c in rgba[:3])
    # relative luminance (sRGB weights); viridis' yellow end is light, its purple end dark
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def _pt(px: float) -> float:
    """Points for a text of ``px`` CSS pixels in a figure of CSS_DPI."""
    return px * 72 / CSS_DPI


def new_figure(figsize=(3.6, 3.2), pyplot: bool = False, layout: str | None = None) -> Figure:
    """Return a white-backed Figure of ``figsize`` inches (CSS_DPI CSS px each), with matplotlib's
    ``layout`` engine (e.g. "constrained") if given.

    By default it is made directly, with an Agg canvas at SCALE times the pixels: registered nowhere,
    never shown by a notebook by itself, no ``plt.close`` needed (the explorers draw into such
    figures). With ``pyplot=True`` it is a pyplot figure at CSS_DPI, which a notebook shows once at
    the end of the cell; the notebook's ``%config InlineBackend.figure_format = "retina"`` gives it
    twice the pixels.
    """
    if pyplot:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=figsize, dpi=CSS_DPI, facecolor="white", layout=layout)
    else:
        fig = Figure(figsize=figsize, dpi=CSS_DPI * SCALE, facecolor="white", layout=layout)
        FigureCanvasAgg(fig)
    return fig


def _heatmap(ax, arr: np.ndarray, kind: str = "weights", limit: float | None = None, colorbar: bool = True,
             colorbar_label: str | None = None, tokens=None, annotate: bool | None = None):
    """Draw ``arr`` (T_q, T_k) on ``ax`` and return its image: ``kind`` "weights" (viridis on 0..1) or
    "scores" (RdBu_r on ±``limit``, -inf cells grey); ``tokens`` (one character per position) label both axes."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}; got {kind!r}")
    cmap_name, label, fmt = KINDS[kind]
    norm = Normalize(-limit, limit) if kind == "scores" else Normalize(0.0, 1.0)
    n_rows, n_cols = arr.shape
    if tokens is not None and not (len(tokens) == n_rows == n_cols):
        raise ValueError(f"tokens must give one character per position: expected {n_cols}, got {len(tokens)}")
    cmap = ListedColormap(COLOUR_MAPS[cmap_name], name=cmap_name).with_extremes(bad=MASKED)
    shown = np.ma.masked_invalid(arr)  # -inf (a masked score) takes the grey "bad" colour
    # "nearest" keeps each cell a crisp square at any size
    im = ax.imshow(shown, cmap=cmap, norm=norm, interpolation="nearest")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    # fixed label places: matplotlib otherwise measures every tick label on every draw
    ax.xaxis.set_label_coords(0.5, -0.1)
    ax.yaxis.set_label_coords(-0.12, 0.5)
    ax.tick_params(labelsize=_pt(TICK_PX), length=2)
    if colorbar:
        bar = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        bar.set_label(colorbar_label or label)
        bar.ax.tick_params(labelsize=_pt(TICK_PX))
    if annotate is None:
        annotate = max(n_rows, n_cols) <= ANNOTATE_MAX_T
    labels = None if tokens is None else [token_label(ch) for ch in tokens]
    if annotate:
        colors = cmap(norm(shown))
        for i in range(n_rows):
            for j in range(n_cols):
                v = arr[i, j]
                number = "−∞" if np.isneginf(v) else fmt.format(v).replace("-", "−")  # a true minus sign
                ax.text(j, i, number, ha="center", va="center", color=contrast_color(colors[i, j]),
                        fontsize=_pt(CELL_PX))
    for axis, n in ((ax.xaxis, n_cols), (ax.yaxis, n_rows)):
        step = 1 if labels is not None or n <= 16 else max(1, n // 8)  # every position while legible
        axis.set_major_locator(FixedLocator(range(0, n, step)))
        axis.set_ticklabels([labels[i] if labels is not None else str(i) for i in range(0, n, step)])
    return im


def _finite_limit(arrays) -> float:
    finite = [np.abs(a[np.isfinite(a)]).max() for a in arrays if np.isfinite(a).any()]
    return max(finite, default=1.0) or 1.0


def attention_heatmap(matrix, ax=None, tokens=None, annotate: bool | None = None, title: str | None = None,
                      kind: str = "weights", limit: float | None = None, colorbar_label: str | None = None):
    """Draw one (T, T) matrix and return its Axes (chapters 1, 2 and 5).

    ``kind="weights"`` (default) uses viridis on a fixed 0..1 scale, so two pictures compare by
    colour; ``kind="scores"`` a diverging scale centred on 0, ±``limit`` (default: the largest finite
    |score|), with -inf cells grey. ``annotate=None`` writes numbers in the cells when T <= 8;
    ``tokens`` (a string or list of characters) labels both axes. With ``ax=None`` a new pyplot figure
    is made (``ax.figure``), which a notebook shows at the end of the cell: end with ``plt.show()``.
    """
    arr = to_numpy(matrix)
    if kind == "scores" and limit is None:
        limit = _finite_limit([arr])
    if ax is None:
        ax = new_figure(pyplot=True).add_subplot()
    _heatmap(ax, arr, kind, limit, colorbar_label=colorbar_label, tokens=tokens, annotate=annotate)
    if title is not None:
        ax.set_title(title, fontsize=_pt(12))
    return ax


def show_heatmaps(matrices: Sequence, titles: Sequence[str], kinds: Sequence[str] | None = None,
                  tokens=None, annotate: bool | None = None) -> Figure:
    """Draw several (T, T) matrices side by side and return the Figure (chapter 4: scores, masked
    scores and weights; chapter 6: the weights of several heads on one line of text).

    ``kinds`` gives each panel's kind ("weights" by default, or "scores"); panels of one kind share
    one colour scale and one colour bar (scores: ±the largest finite |score| of all score panels).
    """
    mats = [to_numpy(m) for m in matrices]
    kinds = list(kinds) if kinds is not None else ["weights"] * len(mats)
    if not mats or len(titles) != len(mats) or len(kinds) != len(mats):
        raise ValueError(f"give one title and one kind per matrix: got {len(mats)} matrices, "
                         f"{len(titles)} titles and {len(kinds)} kinds")
    limit = _finite_limit([m for m, k in zip(mats, kinds) if k == "scores"])
    fig = new_figure(figsize=(2.6 * len(mats) + 1.0, 3.0), pyplot=True, layout="constrained")
    axes = fig.subplots(1, len(mats), squeeze=False)[0]
    images = []
    for n, (ax, m, t, k) in enumerate(zip(axes, mats, titles, kinds)):
        images.append(_heatmap(ax, m, k, limit, colorbar=False, tokens=tokens, annotate=annotate))
        ax.set_title(t, fontsize=_pt(12))
        if n:
            ax.set_ylabel("")
    for kind in dict.fromkeys(kinds):
        group = [(im, ax) for im, ax, k in zip(images, axes, kinds) if k == kind]
        bar = fig.colorbar(group[0][0], ax=[ax for _, ax in group], shrink=0.8, pad=0.02)
        bar.set_label(KINDS[kind][1])
        bar.ax.tick_params(labelsize=_pt(TICK_PX))
    return fig

