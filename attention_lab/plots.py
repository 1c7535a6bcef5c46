"""Heatmaps of attention weights, drawn with matplotlib.

Used by every chapter: chapter 1 draws the normalized ``tril`` average (Fig. 2), chapter 2 the raw
score grid, chapter 3 the softmax weights before and after scaling, chapter 4 the masked weights
(Fig. 5) and chapter 5 the weights of one head (Fig. 6). The explorers in
:mod:`attention_lab.explorers` draw with the same :class:`HeatmapArtist`, so a picture in a widget
and a picture in a figure look alike.

Conventions: keys run along the x axis ("key position"), queries down the y axis ("query
position"); weights use a fixed 0..1 colour scale and the perceptually uniform ``viridis`` map;
cells carry their numbers when T is small; the figure background is opaque white so the plot stays
readable on a dark page. Nothing here prints, seeds, or changes matplotlib's global settings.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter

# largest T that gets numbers in its cells when annotate is left to decide
ANNOTATE_MAX_T = 8

# visible stand-ins for characters that would otherwise print as nothing
_VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def token_label(ch: str) -> str:
    """Return a character as it should appear on an axis: spaces and newlines made visible."""
    return _VISIBLE.get(ch, ch)


def to_numpy(matrix) -> np.ndarray:
    """Return a 2-D float array from a tensor or array-like (detached, on the CPU)."""
    if hasattr(matrix, "detach"):
        matrix = matrix.detach().cpu().numpy()
    arr = np.asarray(matrix, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D (T, T) matrix of weights; got an array of shape {arr.shape}")
    return arr


def _check_tokens(tokens, n_rows: int, n_cols: int) -> list[str] | None:
    if tokens is None:
        return None
    chars = list(tokens)
    if len(chars) != n_cols or len(chars) != n_rows:
        raise ValueError(
            f"tokens must give one character per position: expected {n_cols}, got {len(chars)}"
        )
    return [token_label(ch) for ch in chars]


def contrast_color(rgba) -> str:
    """Return "black" or "white", whichever reads better on a cell of colour ``rgba``."""
    r, g, b = (float(c) for c in rgba[:3])
    # relative luminance (sRGB weights); viridis' yellow end is light, its purple end dark
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "black" if luminance > 0.45 else "white"


class HeatmapArtist:
    """One heatmap on an existing Axes, created once and updated in place.

    :func:`attention_heatmap` uses it for a single picture; the explorers keep one per figure and
    call :meth:`update` on every change, which only moves data and text (no new figure, axes or
    colorbar), so an update is cheap.
    """

    def __init__(
        self,
        ax,
        vmin: float = 0.0,
        vmax: float = 1.0,
        cmap: str = "viridis",
        colorbar: bool = True,
        colorbar_label: str = "attention weight",
        xlabel: str = "key position",
        ylabel: str = "query position",
        max_annotate: int = ANNOTATE_MAX_T,
        fmt: str = "{:.2f}",
        fontsize: float = 7.0,
        stamp: bool = False,
    ):
        self.ax = ax
        # stamp=True: cell numbers are blended into the rendered frame by stamp_cells (fast path)
        self.stamper = TextStamper(fontsize, ax.figure.dpi) if stamp else None
        self._cells = []
        self.fmt = fmt
        self.fontsize = fontsize
        self.max_annotate = max_annotate
        self.cmap = colormaps[cmap]
        self.norm = Normalize(vmin=vmin, vmax=vmax)
        # interpolation "nearest" keeps each cell a crisp square at any size
        self.im = ax.imshow(
            np.zeros((1, 1)), cmap=self.cmap, norm=self.norm, interpolation="nearest", aspect="equal"
        )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        # fixed label places: matplotlib otherwise measures every tick label on every draw
        ax.xaxis.set_label_coords(0.5, -0.11)
        ax.yaxis.set_label_coords(-0.13, 0.5)
        self.colorbar = None
        if colorbar:
            self.colorbar = ax.figure.colorbar(self.im, ax=ax, fraction=0.046, pad=0.04)
            self.colorbar.set_label(colorbar_label)
        # a pool of cell texts, made once and reused: creating text artists is what makes redraws slow
        self._texts = [
            ax.text(0, 0, "", ha="center", va="center", fontsize=fontsize, visible=False)
            for _ in range(max_annotate * max_annotate)
        ]
        self._shape = None
        self._tokens = None
        self._n_ticks = 0
        self._tick_size = None
        self._labels = None
        self._steps = (1, 1)

    def update(self, matrix, tokens=None, annotate: bool | None = None, title: str | None = None):
        """Draw ``matrix`` (T_q, T_k); ``tokens`` labels both axes; returns the numpy array drawn."""
        arr = to_numpy(matrix)
        n_rows, n_cols = arr.shape
        labels = _check_tokens(tokens, n_rows, n_cols)
        if annotate is None:
            annotate = max(n_rows, n_cols) <= ANNOTATE_MAX_T
        if annotate and max(n_rows, n_cols) > self.max_annotate:
            raise ValueError(
                f"annotate=True writes at most {self.max_annotate}x{self.max_annotate} cells; "
                f"got a {n_rows}x{n_cols} matrix (pass annotate=False)"
            )
        self.im.set_data(arr)
        self.im.set_extent((-0.5, n_cols - 0.5, n_rows - 0.5, -0.5))
        ax = self.ax
        if self._shape != arr.shape or self._tokens != labels:
            self._set_ticks(n_rows, n_cols, labels)
            self._shape, self._tokens = arr.shape, labels
        if title is not None:
            # an explicit y skips the title's automatic placement, which is slow
            ax.set_title(title, fontsize=9, y=1.0, pad=4)
        k = 0
        self._cells = []
        if annotate and self.stamper is not None:
            colors = self.cmap(self.norm(arr))
            fontsize = self.fontsize if max(n_rows, n_cols) <= 6 else self.fontsize - 1
            self._cells = [
                (j, i, self.fmt.format(arr[i, j]), (0, 0, 0) if contrast_color(colors[i, j]) == "black" else (1, 1, 1), fontsize)
                for i in range(n_rows) for j in range(n_cols)
            ]
        elif annotate:
            colors = self.cmap(self.norm(arr))
            fontsize = self.fontsize if max(n_rows, n_cols) <= 6 else self.fontsize - 1
            for i in range(n_rows):
                for j in range(n_cols):
                    t = self._texts[k]
                    t.set_position((j, i))
                    t.set_text(self.fmt.format(arr[i, j]))
                    t.set_color(contrast_color(colors[i, j]))
                    t.set_fontsize(fontsize)
                    t.set_visible(True)
                    k += 1
        for t in self._texts[k:]:
            if t.get_visible():
                t.set_visible(False)
        return arr

    def stamp_cells(self, rgba: np.ndarray) -> None:
        """Write the last update's cell numbers and token labels into a rendered RGBA frame.

        Only with ``stamp=True``; the frame must be the figure as just drawn (same size and layout).
        """
        if self.stamper is None:
            return
        H = rgba.shape[0]
        to_px = self.ax.transData.transform
        items = []
        if self._cells:
            pts = to_px(np.array([(j, i) for j, i, *_ in self._cells], dtype=float))
            items += [(x, H - y, s, c, fs) for (x, y), (_, _, s, c, fs) in zip(pts, self._cells)]
        if self._shape is not None:
            # tick labels: the tokens, or every `step`-th position number
            n_rows, n_cols = self._shape
            size = self._tick_size - 1
            gap = 3.0  # pixels between the axes and a label
            xs = to_px(np.array([(j, n_rows - 0.5) for j in range(n_cols)], dtype=float))
            ys = to_px(np.array([(-0.5, i) for i in range(n_rows)], dtype=float))
            for j, (x, y) in enumerate(xs):
                lab = self._tick_text(j, self._steps[0])
                if lab:
                    h = self.stamper.sprite(lab, size + 1).shape[0]
                    items.append((x, H - y + gap + h / 2, lab, (0, 0, 0), size))
            for i, (x, y) in enumerate(ys):
                lab = self._tick_text(i, self._steps[1])
                if lab:
                    w = self.stamper.sprite(lab, size + 1).shape[1]
                    items.append((x - gap - w / 2, H - y, lab, (0, 0, 0), size))
        if items:
            self.stamper.stamp(rgba, items)

    def _tick_text(self, i: int, step: int) -> str:
        if i % step:
            return ""
        return self._labels[i] if self._labels is not None else str(i)

    def _set_ticks(self, n_rows: int, n_cols: int, labels):
        # one tick per position, made once and reused: only the labels' text changes per frame
        # (matplotlib draws just the ticks inside the view, and an empty label costs nothing)
        n = max(n_rows, n_cols)
        if self.stamper is not None:
            # stamped labels need no tick machinery at all, the cheapest axis to draw
            if self._n_ticks == 0:
                self.ax.set_xticks([])
                self.ax.set_yticks([])
                self._n_ticks = -1
        elif n > self._n_ticks:
            self._n_ticks = max(n, 2 * self._n_ticks)
            locator = np.arange(self._n_ticks)
            self.ax.xaxis.set_major_locator(FixedLocator(locator))
            self.ax.yaxis.set_major_locator(FixedLocator(locator))
            self.ax.xaxis.set_major_formatter(FuncFormatter(lambda v, pos: self._tick_label(v, n_cols=True)))
            self.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, pos: self._tick_label(v, n_cols=False)))
        size = 7 if n <= 16 else 6
        if size != self._tick_size:
            if self.stamper is None:
                self.ax.tick_params(labelsize=size)
            self._tick_size = size
        self._labels = labels
        # label every position while that stays legible, else every few
        self._steps = (
            1 if labels is not None or n_cols <= 16 else max(1, n_cols // 8),
            1 if labels is not None or n_rows <= 16 else max(1, n_rows // 8),
        )

    def _tick_label(self, v, n_cols: bool) -> str:
        i = int(round(v))
        step = self._steps[0] if n_cols else self._steps[1]
        if i % step:
            return ""
        if self.stamper is not None:
            return ""  # stamped into the frame by stamp_cells, like the cell numbers
        if self._labels is not None:
            return self._labels[i] if 0 <= i < len(self._labels) else ""
        return str(i)


class TextStamper:
    """Writes short strings into an RGBA buffer from cached glyph bitmaps.

    Drawing 64 cell numbers as matplotlib Text artists is most of a frame's cost; the numbers
    come from a small set ("0.00" .. "1.00"), so each is rasterized once with FreeType (the same
    font matplotlib uses) and then only blended into the frame. Used by the explorers' heatmaps.
    """

    def __init__(self, fontsize: float, dpi: float):
        from matplotlib.font_manager import FontProperties, findfont, get_font

        self._font = get_font(findfont(FontProperties()))
        self.fontsize, self.dpi = fontsize, dpi
        self._cache: dict[tuple[str, float], np.ndarray] = {}

    def sprite(self, s: str, fontsize: float) -> np.ndarray:
        """The coverage (0..1) bitmap of ``s`` at ``fontsize`` points."""
        key = (s, fontsize)
        if key not in self._cache:
            if len(self._cache) > 2048:
                self._cache.clear()  # bounded: free-form strings would otherwise pile up
            font = self._font
            font.set_size(fontsize, self.dpi)
            font.set_text(s, 0.0)
            font.draw_glyphs_to_bitmap(antialiased=True)
            self._cache[key] = np.asarray(font.get_image(), dtype=np.float32) / 255.0
        return self._cache[key]

    def stamp(self, rgba: np.ndarray, items) -> None:
        """Blend ``items`` = [(x_px, y_px_from_top, text, (r, g, b), fontsize)] centred into ``rgba``."""
        H, W = rgba.shape[:2]
        for x, y, s, color, fontsize in items:
            a = self.sprite(s, fontsize + 1)  # FreeType alone renders a touch smaller than Text
            h, w = a.shape
            top, left = int(round(y - h / 2)), int(round(x - w / 2))
            if top < 0 or left < 0 or top + h > H or left + w > W:
                continue
            region = rgba[top : top + h, left : left + w, :3].astype(np.float32)
            a3 = a[..., None]
            rgba[top : top + h, left : left + w, :3] = (region * (1 - a3) + np.asarray(color, np.float32) * 255 * a3 + 0.5).astype(np.uint8)


def new_figure(figsize=(3.6, 3.2), dpi: int = 80, pyplot: bool = False) -> Figure:
    """Return a matplotlib Figure with an Agg canvas and an opaque white background.

    By default it is made directly, not through pyplot: it is registered nowhere, never shows up in
    a notebook by itself and needs no ``plt.close`` (the explorers draw into such figures). With
    ``pyplot=True`` it is a pyplot figure, which a notebook shows once, at the end of the cell, the
    way every matplotlib plot shows (the notebook-facing functions below use this).
    """
    if pyplot:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=figsize, dpi=dpi, facecolor="white")
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = Figure(figsize=figsize, dpi=dpi, facecolor="white")
        FigureCanvasAgg(fig)
    fig.patch.set_alpha(1.0)
    return fig


def attention_heatmap(
    weights,
    ax=None,
    tokens=None,
    annotate: bool | None = None,
    title: str | None = None,
    vmin: float = 0.0,
    vmax: float = 1.0,
    colorbar: bool = True,
    cmap: str = "viridis",
    colorbar_label: str = "attention weight",
):
    """Draw one (T, T) attention matrix and return its matplotlib Axes.

    Used in chapters 1 to 5 for the Figs. 2, 5 and 6 pictures. ``weights`` is a (T, T) tensor or
    array; keys along x, queries along y; a fixed ``vmin``..``vmax`` colour scale (0..1 by default,
    so two pictures compare by colour); ``annotate=None`` writes the numbers in the cells when
    T <= 8; ``tokens`` (a string or list of characters, one per position) labels both axes.
    With ``ax=None`` a new white-backed pyplot figure is made (``ax.figure`` holds it); a notebook
    shows it at the end of the cell, so end the call with ``;`` or ``plt.show()``.
    """
    if ax is None:
        ax = new_figure(pyplot=True).add_subplot()
    HeatmapArtist(ax, vmin=vmin, vmax=vmax, cmap=cmap, colorbar=colorbar, colorbar_label=colorbar_label).update(
        weights, tokens=tokens, annotate=annotate, title=title
    )
    return ax


def show_heatmaps(
    matrices: Sequence,
    titles: Sequence[str] | None = None,
    tokens=None,
    annotate: bool | None = None,
    vmin: float = 0.0,
    vmax: float = 1.0,
    cmap: str = "viridis",
    colorbar_label: str = "attention weight",
    figsize: tuple[float, float] | None = None,
    dpi: int = 80,
) -> Figure:
    """Draw several (T, T) matrices side by side with one shared colorbar; return the Figure.

    Modelled on d2l's ``show_heatmaps``. Used in chapter 3 (weights before and after scaling) and
    chapter 4 (before and after masking). ``titles`` gives one title per matrix. The figure is a
    pyplot figure, shown once at the end of a notebook cell.
    """
    mats = [to_numpy(m) for m in matrices]
    if not mats:
        raise ValueError("matrices must hold at least one (T, T) matrix; got none")
    if titles is not None and len(titles) != len(mats):
        raise ValueError(f"titles must give one title per matrix: expected {len(mats)}, got {len(titles)}")
    n = len(mats)
    fig = new_figure(figsize=figsize or (2.9 * n + 0.8, 3.0), dpi=dpi, pyplot=True)
    axes = fig.subplots(1, n, squeeze=False)[0]
    artists = []
    for i, (ax, m) in enumerate(zip(axes, mats)):
        art = HeatmapArtist(ax, vmin=vmin, vmax=vmax, cmap=cmap, colorbar=False)
        art.update(m, tokens=tokens, annotate=annotate, title=None if titles is None else titles[i])
        if i > 0:
            ax.set_ylabel("")
        artists.append(art)
    cbar = fig.colorbar(artists[0].im, ax=list(axes), fraction=0.046, pad=0.04)
    cbar.set_label(colorbar_label)
    return fig


def figure_png(fig: Figure, colors: int | None = None, compress_level: int = 1) -> bytes:
    """Render ``fig`` with Agg and return PNG bytes.

    ``colors`` (e.g. 64) quantizes to a palette, which makes a pre-rendered picture 3 to 5 times
    smaller; live pictures skip it because speed matters more there than size.
    """
    fig.canvas.draw()
    return rgba_png(np.asarray(fig.canvas.buffer_rgba()), colors=colors, compress_level=compress_level)


def rgba_png(rgba: np.ndarray, colors: int | None = None, compress_level: int = 1) -> bytes:
    """Encode an (H, W, 4) uint8 RGBA buffer as PNG bytes (opaque RGB, optionally palettized)."""
    from PIL import Image as PILImage

    img = PILImage.fromarray(np.ascontiguousarray(rgba[..., :3]))
    buf = io.BytesIO()
    if colors is not None:
        # median cut, no dithering: flat cells stay flat and compress well
        img = img.quantize(colors=colors, method=PILImage.Quantize.MEDIANCUT, dither=PILImage.Dither.NONE)
        img.save(buf, format="png", optimize=True)
    else:
        img.save(buf, format="png", compress_level=compress_level)
    return buf.getvalue()
