"""Every picture of the course, drawn with matplotlib.

Notebook figures: :func:`attention_heatmap` draws one (T, T) matrix (chapters 1, 2, 4, 5, 6) and
:func:`show_heatmaps` draws several side by side, each on the colour scale of its kind (chapter 4:
scores, masked scores, weights). The explorers (:mod:`attention_lab.explorers`) draw with the same
:class:`HeatmapArtist` into a :class:`Frame`, which redraws a figure fast and returns its picture.

Conventions, the same in every picture: keys along the x axis ("key position"), queries down the y
axis ("query position"); one colour map per meaning: ``viridis`` on a fixed 0..1 scale for weights,
the diverging ``RdBu_r`` centred on 0 for scores, light grey for a masked (-inf) score; numbers in the
cells when T <= 8; an opaque white background, so a picture reads the same on a light or a dark page.
Sizes of text are given in CSS pixels (``*_PX``): a figure inch is :data:`CSS_DPI` CSS pixels, and
pictures carry :data:`SCALE` times as many pixels, so they stay sharp on high-density screens.
Nothing here prints, seeds, or changes matplotlib's global settings.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Sequence

import numpy as np
from importlib.resources import files

from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont, get_font
from matplotlib.ticker import FixedLocator, NullLocator

ANNOTATE_MAX_T = 8  # largest T that gets numbers in its cells when annotate is left to decide
CSS_DPI = 80  # CSS pixels per figure inch: a (3.6, 3.2) inch figure shows as 288 x 256 CSS px
SCALE = 2  # picture pixels per CSS pixel
CELL_PX = 9.0  # numbers in the cells, CSS px
TICK_PX = 9.0  # tick labels (positions or characters), CSS px
# the colour maps as 256 entries each, the one table the hosted book's page reads too
# (tools/colour_maps.py writes it from matplotlib's viridis and RdBu_r)
COLOUR_MAPS = json.loads(files("attention_lab").joinpath("data", "colour_maps.json").read_text())
MASKED = COLOUR_MAPS["masked"]  # a score of -inf: no colour on the diverging scale means "masked"

KINDS = {
    # kind: (colour map, colour bar label, number format)
    "weights": ("viridis", "attention weight", "{:.2f}"),
    "scores": ("RdBu_r", "score", "{:.1f}"),
}

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
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = Figure(figsize=figsize, dpi=CSS_DPI * SCALE, facecolor="white", layout=layout)
        FigureCanvasAgg(fig)
    return fig


class HeatmapArtist:
    """One heatmap on an Axes, made once and updated in place by :meth:`update`.

    ``kind`` is "weights" (viridis, ``vmin``..``vmax`` = 0..1) or "scores" (RdBu_r, symmetric
    ``-limit``..``limit``; -inf cells are masked grey). With ``stamped=True`` (the explorers) the
    cell numbers and tick labels are not matplotlib Text artists: :meth:`stamps` lists them and a
    :class:`Frame` blends them into the rendered picture, which is most of what makes a redraw fast.
    """

    def __init__(self, ax, kind: str = "weights", limit: float | None = None, colorbar: bool = True,
                 colorbar_label: str | None = None, stamped: bool = False):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}; got {kind!r}")
        cmap, label, self.fmt = KINDS[kind]
        if kind == "scores":
            limit = 1.0 if limit is None else float(limit)
            self.norm = Normalize(-limit, limit)
        else:
            self.norm = Normalize(0.0, 1.0)
        self.ax, self.kind, self.stamped = ax, kind, stamped
        self.cmap = ListedColormap(COLOUR_MAPS[cmap], name=cmap).with_extremes(bad=MASKED)
        # "nearest" keeps each cell a crisp square at any size
        self.im = ax.imshow(np.zeros((1, 1)), cmap=self.cmap, norm=self.norm, interpolation="nearest")
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        # fixed label places: matplotlib otherwise measures every tick label on every draw
        ax.xaxis.set_label_coords(0.5, -0.1)
        ax.yaxis.set_label_coords(-0.12, 0.5)
        if stamped:
            ax.xaxis.set_major_locator(NullLocator())
            ax.yaxis.set_major_locator(NullLocator())
        else:
            ax.tick_params(labelsize=_pt(TICK_PX), length=2)
        self.colorbar = None
        if colorbar:
            self.colorbar = ax.figure.colorbar(self.im, ax=ax, fraction=0.046, pad=0.04)
            self.colorbar.set_label(colorbar_label or label)
            self.colorbar.ax.tick_params(labelsize=_pt(TICK_PX))
        self.matrix = None
        self.labels: list[str] | None = None
        self._cells: list[tuple[int, int, str, str]] = []
        self._texts = []
        self._lookups: dict = {}  # paint()'s pixel -> cell lookups, by matrix shape and figure size

    def update(self, matrix, tokens=None, annotate: bool | None = None) -> np.ndarray:
        """Draw ``matrix`` (T_q, T_k); ``tokens`` (one character per position) label both axes."""
        arr = to_numpy(matrix)
        n_rows, n_cols = arr.shape
        if tokens is not None and not (len(tokens) == n_rows == n_cols):
            raise ValueError(f"tokens must give one character per position: expected {n_cols}, got {len(tokens)}")
        if annotate is None:
            annotate = max(n_rows, n_cols) <= ANNOTATE_MAX_T
        shown = np.ma.masked_invalid(arr)  # -inf (a masked score) takes the grey "bad" colour
        self.im.set_data(shown)
        self.im.set_extent((-0.5, n_cols - 0.5, n_rows - 0.5, -0.5))
        self.matrix = arr
        self.labels = None if tokens is None else [token_label(ch) for ch in tokens]
        self._cells = []
        if annotate:
            colors = self.cmap(self.norm(shown))
            self._cells = [(j, i, self._number(arr[i, j]), contrast_color(colors[i, j]))
                           for i in range(n_rows) for j in range(n_cols)]
        if not self.stamped:
            self._draw_texts(n_rows, n_cols)
        return arr

    def _number(self, v: float) -> str:
        if np.isneginf(v):
            return "−∞"
        return self.fmt.format(v).replace("-", "−")

    def _draw_texts(self, n_rows: int, n_cols: int):
        for t in self._texts:
            t.remove()
        self._texts = [self.ax.text(j, i, s, ha="center", va="center", color=c, fontsize=_pt(CELL_PX))
                       for j, i, s, c in self._cells]
        for axis, n in ((self.ax.xaxis, n_cols), (self.ax.yaxis, n_rows)):
            step = self._step(n)
            axis.set_major_locator(FixedLocator(range(0, n, step)))
            axis.set_ticklabels([self._tick(i) for i in range(0, n, step)])

    def _step(self, n: int) -> int:
        # every position while that stays legible, else every few
        return 1 if self.labels is not None or n <= 16 else max(1, n // 8)

    def _tick(self, i: int) -> str:
        return self.labels[i] if self.labels is not None else str(i)

    def cell_colors(self) -> np.ndarray:
        """The (T_q, T_k, 4) uint8 colour of every cell, as the colour map gives it to the image."""
        return self.cmap(self.norm(np.ma.masked_invalid(self.matrix)), bytes=True)

    def paint(self, rgba: np.ndarray) -> None:
        """Fill the heatmap's cells into ``rgba``, the figure's (H, W, 4) pixels, with numpy.

        The same pixels matplotlib's "nearest" image draws (tests/test_plots.py compares them), in a
        fraction of its time: which cell each pixel column and row shows is asked of matplotlib itself,
        once per matrix shape (:meth:`_cell_lookup`), so it holds for every matplotlib version; each
        pixel then takes its cell's colour, :meth:`cell_colors`, one colour-map lookup per cell.
        """
        if self.matrix is None:
            return
        rows, i, cols, j = self._lookups[self._lookup_key(rgba)]
        if len(rows) and len(cols):
            band = self.cell_colors()[:, j]  # (T_q, pixel columns, 4): one pixel row per cell row
            if rows[-1] - rows[0] + 1 == len(rows) and cols[-1] - cols[0] + 1 == len(cols):
                rgba[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1] = band[i]  # copied down each cell's pixel rows
            else:  # a clip that is not a rectangle (never in this course's figures)
                rgba[np.ix_(rows, cols)] = band[i]

    def _lookup_key(self, rgba: np.ndarray) -> tuple:
        return self.matrix.shape, rgba.shape, tuple(self.ax.bbox.bounds), self.ax.get_xlim(), self.ax.get_ylim()

    def find_cells(self, rgba: np.ndarray) -> None:
        """Make sure :meth:`paint` knows which cell each pixel shows for the matrix shown now; this may
        draw into ``rgba`` (the canvas' buffer): call it before the frame's background is restored."""
        if self.matrix is not None and self._lookup_key(rgba) not in self._lookups:
            if len(self._lookups) > 64:
                self._lookups.clear()  # bounded: a few shapes are met again and again
            self._lookups[self._lookup_key(rgba)] = self._cell_lookup(rgba)

    def _cell_lookup(self, rgba: np.ndarray):
        """(pixel rows, their cell rows, pixel columns, their cell columns) of the image as matplotlib
        draws it now. Found by drawing, into ``rgba`` (the canvas' buffer, which the caller restores
        afterwards), an image of the same extent whose colour is its cell's index, clipped to two thin
        strips across the axes: one crossing every pixel column, one every pixel row. A strip costs a
        few hundred pixels of matplotlib's resampling, not the whole heatmap's."""
        from matplotlib.image import AxesImage
        from matplotlib.transforms import Bbox

        n_rows, n_cols = self.matrix.shape
        if max(n_rows, n_cols) > 255:
            raise ValueError(f"a heatmap shows at most 255 positions per axis; got {self.matrix.shape}")
        index = np.zeros((n_rows, n_cols, 4), np.uint8)
        index[..., 0] = np.arange(n_rows)[:, None]  # red: the cell's row
        index[..., 1] = np.arange(n_cols)[None, :]  # green: its column
        index[..., 3] = 255
        probe = AxesImage(self.ax, interpolation="nearest", origin=self.im.origin, extent=self.im.get_extent())
        probe.set_interpolation_stage(self.im.get_interpolation_stage())
        probe.set_data(index)
        probe.set_transform(self.im.get_transform())
        H = rgba.shape[0]
        box = self.ax.bbox
        x_mid, y_mid = round((box.x0 + box.x1) / 2), round((box.y0 + box.y1) / 2)
        found = []
        for strip in (Bbox([[box.x0, y_mid], [box.x1, y_mid + 2]]),  # across every column
                      Bbox([[x_mid, box.y0], [x_mid + 2, box.y1]])):  # down every row
            rgba[..., 3] = 0  # what the probe does not cover stays transparent
            probe.set_clip_box(strip)
            probe.set_clip_path(self.im.get_clip_path())
            self.ax.figure.draw_artist(probe)
            covered = rgba[..., 3] == 255
            found.append((covered, rgba[..., 0].copy(), rgba[..., 1].copy()))
        (c_cov, _, green), (r_cov, red, _) = found
        line = H - 1 - y_mid  # a buffer row inside the first strip (row 0 is the top)
        cols = np.flatnonzero(c_cov[line])
        x_col = x_mid  # a buffer column inside the second strip
        rows = np.flatnonzero(r_cov[:, x_col])
        return rows, red[rows, x_col].astype(np.intp), cols, green[line, cols].astype(np.intp)

    def stamps(self) -> list[tuple]:
        """The texts a Frame blends in: ``(x, y, text, color, size_px, anchor)`` in display pixels.

        ``y`` counts from the bottom (matplotlib's display coordinates); ``anchor`` is the text
        box's point placed at (x, y): "center", "top" (tick labels under the x axis) or "right"
        (tick labels left of the y axis).
        """
        if self.matrix is None:
            return []
        n_rows, n_cols = self.matrix.shape
        data = self.ax.transData.transform
        gap = 3 * self.ax.figure.dpi / CSS_DPI  # between the axes and a tick label
        items = []
        if self._cells:
            points = data(np.array([(j, i) for j, i, _, _ in self._cells], dtype=float))
            items += [(x, y, s, c, CELL_PX, "center") for (x, y), (_, _, s, c) in zip(points, self._cells)]
        x_step, y_step = self._step(n_cols), self._step(n_rows)
        for j in range(0, n_cols, x_step):
            x, y = data((j, n_rows - 0.5))
            items.append((x, y - gap, self._tick(j), "black", TICK_PX, "top"))
        for i in range(0, n_rows, y_step):
            x, y = data((-0.5, i))
            items.append((x - gap, y, self._tick(i), "black", TICK_PX, "right"))
        return items


class _Stamper:
    """Blends short strings into an RGBA buffer from glyph bitmaps cached by (text, size), each placed
    on its baseline as matplotlib places text (so "g", "d" and "," line up with their neighbours)."""

    def __init__(self, scale: float):
        self._font = get_font(findfont(FontProperties()))  # matplotlib's default font
        self.scale = scale
        self._cache: dict[tuple[str, float], tuple[np.ndarray, float]] = {}

    def sprite(self, s: str, px: float) -> tuple[np.ndarray, float]:
        """The coverage (0..1) bitmap of ``s`` at ``px`` CSS pixels, and its depth below the baseline."""
        key = (s, px)
        if key not in self._cache:
            if len(self._cache) > 4096:
                self._cache.clear()  # bounded: typed text would otherwise pile up
            self._font.set_size(px * self.scale, 72)  # at 72 dpi a point is a pixel
            self._font.set_text(s, 0.0)
            self._font.draw_glyphs_to_bitmap(antialiased=True)
            bitmap = np.asarray(self._font.get_image(), dtype=np.float32) / 255.0
            self._cache[key] = (bitmap, self._font.get_descent() / 64)
        return self._cache[key]

    def stamp(self, rgba: np.ndarray, items) -> None:
        H, W = rgba.shape[:2]
        for x, y, s, color, px, anchor in items:
            a, descent = self.sprite(s, px)
            h, w = a.shape
            digits = self.sprite("0", px)[0].shape[0]  # the height of a digit, baseline to top
            # the baseline, in rows from the top: digits centred on y, or hanging from y ("top")
            baseline = H - y + (digits if anchor == "top" else digits / 2)
            top = int(round(baseline - (h - descent)))
            left = int(round(x - (w if anchor == "right" else w / 2)))
            if top < 0 or left < 0 or top + h > H or left + w > W:
                continue
            rgb = np.array((0, 0, 0) if color == "black" else (255, 255, 255), np.float32)
            region = rgba[top : top + h, left : left + w, :3].astype(np.float32)
            a3 = a[..., None]
            rgba[top : top + h, left : left + w, :3] = (region * (1 - a3) + rgb * a3 + 0.5).astype(np.uint8)


class Frame:
    """A figure drawn once and then redrawn fast; :meth:`png` and :meth:`webp` return its picture.

    The first call draws everything except the artists that change (each heatmap's image and the
    spines over it, and ``extra``, e.g. a marker) and saves that as the background. Every call restores
    the background, paints the heatmaps' cells with numpy (:meth:`HeatmapArtist.paint`: the pixels
    matplotlib would draw, without its image resampling, which took most of an update), draws the spines
    and ``extra`` with matplotlib, blends in the heatmaps' cell numbers and tick labels
    (:meth:`HeatmapArtist.stamps`) and encodes the pixels. Used by every explorer.
    """

    def __init__(self, fig: Figure, heatmaps: Sequence[HeatmapArtist], extra: Sequence = ()):
        self.fig = fig
        self.heatmaps, self.extra = list(heatmaps), list(extra)
        # hidden while the background is drawn; the images are then painted, the rest drawn
        self.dynamic = [a for h in self.heatmaps for a in (h.im, *h.ax.spines.values())] + self.extra
        self.drawn = [a for h in self.heatmaps for a in h.ax.spines.values()] + self.extra
        self._background = None
        self._stamper = _Stamper(fig.dpi / CSS_DPI)

    @property
    def css_size(self) -> tuple[int, int]:
        """(width, height) in CSS pixels: the size a picture is shown at."""
        w, h = self.fig.canvas.get_width_height()
        return round(w * CSS_DPI / self.fig.dpi), round(h * CSS_DPI / self.fig.dpi)

    def pixels(self) -> np.ndarray:
        """The frame as an (H, W, 4) uint8 RGBA array."""
        canvas = self.fig.canvas
        if self._background is None:
            for a in self.dynamic:
                a.set_visible(False)
            canvas.draw()
            self._background = canvas.copy_from_bbox(self.fig.bbox)
            for a in self.dynamic:
                a.set_visible(True)
        # the canvas' own buffer: the cells are painted and the texts blended straight into it (the
        # next frame restores the whole background, so nothing of them stays behind)
        rgba = np.asarray(canvas.buffer_rgba())
        for heat in self.heatmaps:
            heat.find_cells(rgba)
        canvas.restore_region(self._background)
        for heat in self.heatmaps:
            heat.paint(rgba)
        for a in self.drawn:  # over the cells, as the spines are over the image in a full draw
            self.fig.draw_artist(a)
        for heat in self.heatmaps:
            self._stamper.stamp(rgba, heat.stamps())
        return rgba

    def png(self) -> bytes:
        """The frame as PNG bytes, fast (the live picture in a kernel)."""
        return fast_png(self.pixels())

    def webp(self) -> bytes:
        """The frame as lossless WebP bytes: the same colours as :meth:`png`, about a third of the size
        (``Explorer.render(values, fmt="webp")``, for a picture saved to a file)."""
        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(self.pixels()[..., :3])).save(
            buf, format="webp", lossless=True, quality=100, method=2)
        return buf.getvalue()


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def fast_png(rgba: np.ndarray) -> bytes:
    """Encode an (H, W, 4) uint8 frame as a PNG: no row filters, zlib level 1; RGB when every pixel is
    opaque (an explorer's frame is: its figure is white-backed), else RGBA.

    Choosing a filter for every row is most of Pillow's encoding time; a heatmap frame is flat colour,
    which zlib alone packs to about the same size in a third of the time. Leaving out an opaque alpha
    channel gives zlib a quarter less to read, and the browser a quarter less to decode.
    """
    H, W = rgba.shape[:2]
    opaque = bool(rgba[..., 3].min() == 255)
    channels, color_type = (3, 2) if opaque else (4, 6)
    raw = np.empty((H, 1 + channels * W), np.uint8)
    raw[:, 0] = 0  # filter type None on every row
    pixels = raw[:, 1:].reshape(H, W, channels)
    for c in range(channels):  # one channel at a time: numpy copies a plane faster than a strided block
        pixels[..., c] = rgba[..., c]
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, color_type, 0, 0, 0))
            + _png_chunk(b"IDAT", zlib.compress(raw, 1)) + _png_chunk(b"IEND", b""))


def variance_panel(ax, d_values: Sequence[int], variances: Sequence[float]):
    """Draw Var(q·k) against d_k, raw and divided by d_k (= the variance of q·k/√d_k), on log-log
    axes; return the ring marker that an explorer moves to the current d_k (chapter 3)."""
    ax.plot(d_values, variances, "o-", color="#d95f02", ms=3, label="raw q·k")
    ax.plot(d_values, [v / d for v, d in zip(variances, d_values)], "s-", color="#1b9e77", ms=3, label="q·k / √d_k")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set(xlabel="d_k", ylabel="Var(q·k)")
    ax.set_title("variance of the scores", fontsize=_pt(12))
    ax.legend(fontsize=_pt(TICK_PX), loc="upper left")
    ax.grid(alpha=0.3)
    (marker,) = ax.plot([1], [1], "o", ms=9, mfc="none", mec="black", mew=1.5)
    return marker


def _finite_limit(arrays) -> float:
    finite = [np.abs(a[np.isfinite(a)]).max() for a in arrays if np.isfinite(a).any()]
    return max(finite, default=1.0) or 1.0


def attention_heatmap(matrix, ax=None, tokens=None, annotate: bool | None = None, title: str | None = None,
                      kind: str = "weights", limit: float | None = None, colorbar_label: str | None = None):
    """Draw one (T, T) matrix and return its Axes (chapters 1, 2, 4, 5 and 6).

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
    HeatmapArtist(ax, kind=kind, limit=limit, colorbar_label=colorbar_label).update(arr, tokens, annotate)
    if title is not None:
        ax.set_title(title, fontsize=_pt(12))
    return ax


def show_heatmaps(matrices: Sequence, titles: Sequence[str], kinds: Sequence[str] | None = None,
                  tokens=None, annotate: bool | None = None) -> Figure:
    """Draw several (T, T) matrices side by side and return the Figure (chapter 4: scores, masked
    scores and weights).

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
    artists = []
    for n, (ax, m, t, k) in enumerate(zip(axes, mats, titles, kinds)):
        art = HeatmapArtist(ax, kind=k, limit=limit, colorbar=False)
        art.update(m, tokens, annotate)
        ax.set_title(t, fontsize=_pt(12))
        if n:
            ax.set_ylabel("")
        artists.append(art)
    for kind in dict.fromkeys(kinds):
        group = [a for a, k in zip(artists, kinds) if k == kind]
        bar = fig.colorbar(group[0].im, ax=[a.ax for a in group], shrink=0.8, pad=0.02)
        bar.set_label(KINDS[kind][1])
        bar.ax.tick_params(labelsize=_pt(TICK_PX))
    return fig


# ---- diagrams (chapters 2 and 5) ----------------------------------------------------------------

DIAGRAM_PX = 688  # a diagram's width, CSS px: the book's text column at a 1280 px window
DIAGRAM_TITLE_PX = 13.0  # a box's name
DIAGRAM_TEXT_PX = 12.0  # the lines under it, labels and the legend
FILL = {  # a box's colour says what it holds, the same in every diagram
    "input": "#e6e6e6",  # x, grey
    "learned": "#fdd9a8",  # weight matrices: the only learned parameters on a picture (orange)
    "computed": "#cfe3f5",  # tensors computed from x (blue)
    "buffer": "white",  # tril, drawn dashed: stored with the module, never learned
    "step": "white",  # scale, mask and softmax: no parameters
}
LEGEND = {"learned": "learned parameters", "computed": "computed from x", "buffer": "buffer, not learned",
          "step": "step, no parameters"}


def _diagram(width_units: float, height_units: float, y_down: bool):
    """A blank pyplot figure DIAGRAM_PX wide, drawn in units of its own (y down or up); returns (fig, ax)."""
    px = DIAGRAM_PX / width_units  # CSS px per unit
    fig = new_figure((DIAGRAM_PX / CSS_DPI, height_units * px / CSS_DPI), pyplot=True)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width_units)
    ax.set_ylim((height_units, 0) if y_down else (0, height_units))
    ax.set_axis_off()
    return fig, ax


def _box(ax, cx, cy, w, h, title, lines, kind):
    """A rounded box of colour FILL[kind], its title in bold and lines of text under it; returns its
    left and right edges. A line ending in ``.T`` is code: monospace."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((cx - w / 2, cy - h / 2), w, h, boxstyle="round,pad=0,rounding_size=7",
                                facecolor=FILL[kind], edgecolor="#444444", linewidth=1.1,
                                linestyle="--" if kind == "buffer" else "-"))
    down = 1 if ax.yaxis_inverted() else -1  # towards the bottom of the picture
    step = DIAGRAM_TEXT_PX * 1.4 * ax.get_xlim()[1] / DIAGRAM_PX  # one line, in drawing units
    top = cy - down * len(lines) * step / 2
    ax.text(cx, top, title, ha="center", va="center", fontsize=_pt(DIAGRAM_TITLE_PX), fontweight="bold")
    for n, line in enumerate(lines, 1):
        code = line.endswith(".T")
        ax.text(cx, top + down * n * step, line, ha="center", va="center", color="#222222",
                fontsize=_pt(DIAGRAM_TEXT_PX - code), family="monospace" if code else None)
    return cx - w / 2, cx + w / 2


def _arrow(ax, start, end):
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#444444",
                                 linewidth=1.2, shrinkA=2, shrinkB=2))


def _legend(ax, kinds, x, y, dx, dy):
    """One swatch and label per kind, starting at (x, y), each (dx, dy) from the last."""
    from matplotlib.patches import Rectangle

    for n, kind in enumerate(kinds):
        sx, sy = x + n * dx, y + n * dy
        ax.add_patch(Rectangle((sx, sy - 7), 20, 14, facecolor=FILL[kind], edgecolor="#444444", linewidth=0.9,
                               linestyle="--" if kind == "buffer" else "-"))
        ax.text(sx + 28, sy, LEGEND[kind], va="center", fontsize=_pt(DIAGRAM_TEXT_PX), color="#262626")


def _shape3(name: str, t) -> tuple[int, int, int]:
    shape = tuple(getattr(t, "shape", ()))
    if len(shape) != 3:
        raise ValueError(f"{name} must be a tensor with three axes, (B, T, ...); got shape {shape}")
    return shape


def qkv_flow(x, q, k, v, scores) -> Figure:
    """Draw chapter 2's flow, x -> W_Q, W_K, W_V -> q, k, v -> scores, with shapes; return the Figure.

    Every number on the picture is read from the tensors given: ``x`` (B, T, C), ``q``, ``k``, ``v``
    (B, T, hs) and ``scores`` (B, T, T), so re-executing the chapter redraws it true. The weight
    matrices are shown as the maths writes them, (C, hs) = ``layer.weight.T``. A pyplot figure
    :data:`DIAGRAM_PX` CSS px wide: a notebook shows it at the end of the cell (``plt.show()``).
    """
    B, T, C = _shape3("x", x)
    hs = _shape3("q", q)[-1]
    for name, t in (("q", q), ("k", k), ("v", v)):
        if _shape3(name, t) != (B, T, hs):
            raise ValueError(f"{name} must have shape (B, T, hs) = {(B, T, hs)}, like x's (B, T) and q's "
                             f"head size; got {tuple(t.shape)}")
    if _shape3("scores", scores) != (B, T, T):
        raise ValueError(f"scores must have shape (B, T, T) = {(B, T, T)}; got {tuple(scores.shape)}")

    fig, ax = _diagram(688, 300, y_down=False)
    rows = {"Q": 240, "K": 156, "V": 72}  # the heights of the three paths
    x_right = _box(ax, 56, rows["K"], 100, 72, "x", ["(B, T, C)", f"({B}, {T}, {C})"], "input")[1]
    right = {}
    for r, y in rows.items():
        layer = {"Q": "query", "K": "key", "V": "value"}[r]
        w_left, w_right = _box(ax, 212, y, 132, 72, f"$\\mathbf{{W_{r}}}$",
                               [f"{layer}.weight.T", f"(C, hs) = ({C}, {hs})"], "learned")
        _arrow(ax, (x_right, rows["K"]), (w_left, y))
        t_left, right[r] = _box(ax, 398, y, 118, 72, r.lower(), ["(B, T, hs)", f"({B}, {T}, {hs})"], "computed")
        _arrow(ax, (w_right, y), (t_left, y))
    # q and k meet in one matrix product; v waits
    mid, op_x = (rows["Q"] + rows["K"]) / 2, 516
    ax.text(op_x, mid, "q @ kᵀ", ha="center", va="center", fontsize=_pt(DIAGRAM_TEXT_PX),
            bbox={"boxstyle": "round,pad=0.45,rounding_size=0.8", "facecolor": "white", "edgecolor": "#444444"})
    _arrow(ax, (right["Q"], rows["Q"]), (op_x - 30, mid + 8))
    _arrow(ax, (right["K"], rows["K"]), (op_x - 30, mid - 8))
    s_left, _ = _box(ax, 630, mid, 108, 72, "scores", ["(B, T, T)", f"({B}, {T}, {T})"], "computed")
    _arrow(ax, (op_x + 34, mid), (s_left, mid))
    ax.text(right["V"] + 12, rows["V"], "waits for the\nweights (chapter 4)", ha="left", va="center",
            fontsize=_pt(DIAGRAM_TEXT_PX), color="#555555", style="italic")
    _legend(ax, ["learned", "computed"], 16, 15, 170, 0)
    return fig


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
        ax.set_xlabel("scale s of the logits")
        ax.set_ylabel(ylabel)
        ax.set_xlim(min(scales), max(scales))
        ax.tick_params(labelsize=_pt(TICK_PX))
        ax.grid(alpha=0.3)
    ax_w.set_ylim(0, 1.02)
    ax_g.set_ylim(bottom=0)
    ax_w.set_title("the softmax saturates", fontsize=_pt(12))
    ax_g.set_title("and its gradient vanishes", fontsize=_pt(12))
    ax_w.legend(fontsize=_pt(TICK_PX), loc="lower right")
    return fig


def head_diagram(head, x) -> Figure:
    """Draw a head like Fig. 6's ``Head`` as a block diagram with the shape of every tensor (chapter 5).

    The shapes are read, not written: ``head`` is run on ``x`` (B, T, C) through its ``key``,
    ``query`` and ``value`` layers and as a whole, and the mask's size is ``head.tril``'s, so the
    picture follows the module and the input it is given. Colours as in :func:`qkv_flow`; the ``tril``
    buffer is dashed and the step without parameters (scale, mask, softmax) white. A pyplot figure
    :data:`DIAGRAM_PX` CSS px wide: a notebook shows it at the end of the cell (``plt.show()``).
    """
    got = tuple(getattr(x, "shape", ()))
    if len(got) != 3:
        raise ValueError(f"x must be a tensor of shape (B, T, C), the head's input; got shape {got}")
    missing = [n for n in ("key", "query", "value", "tril") if not hasattr(head, n)]
    if missing:
        raise ValueError(f"head must have key, query, value and tril, like Fig. 6's Head; it has no "
                         f"{', '.join(missing)}")
    B, T, _ = (int(n) for n in got)
    k, q, v = head.key(x), head.query(x), head.value(x)  # (B, T, hs) each
    out = head(x)  # (B, T, hs)
    hs = int(k.shape[-1])
    bs = tuple(int(n) for n in head.tril.shape)

    def shape(names, sizes):
        return f"({names}) = {tuple(int(n) for n in sizes)}"

    fig, ax = _diagram(700, 600, y_down=True)
    cols = {"query": 130, "key": 350, "value": 590}  # centres of the three branches
    tensors = {"query": ("q", q), "key": ("k", k), "value": ("v", v)}
    _box(ax, 350, 38, 300, 50, "x", [shape("B, T, C", x.shape)], "input")
    for name, cx in cols.items():
        layer = getattr(head, name)
        bias = "no bias" if layer.bias is None else "with bias"
        _arrow(ax, (350 + (cx - 350) * 0.25, 63), (cx, 100))
        _box(ax, cx, 125, 190, 50, name, [f"Linear({layer.in_features}, {layer.out_features}), {bias}"], "learned")
        _arrow(ax, (cx, 150), (cx, 185))
        symbol, t = tensors[name]
        _box(ax, cx, 210, 190, 50, symbol, [shape("B, T, hs", t.shape)], "computed")
    _arrow(ax, (cols["query"], 235), (200, 275))
    _arrow(ax, (cols["key"], 235), (280, 275))
    _box(ax, 240, 300, 220, 50, "scores = q @ kᵀ", [shape("B, T, T", (B, T, T))], "computed")
    _arrow(ax, (240, 325), (240, 360))
    _box(ax, 240, 390, 250, 60, f"÷ √{hs}, mask, softmax", ["future → −∞, rows sum to 1"], "step")
    _box(ax, 485, 390, 170, 60, "tril (buffer)", [f"{bs}, block_size {bs[0]}"], "buffer")
    _arrow(ax, (400, 390), (365, 390))
    ax.text(485, 431, f"sliced to tril[:{T}, :{T}]", ha="center", va="top", fontsize=_pt(DIAGRAM_TEXT_PX),
            color="#262626")
    _arrow(ax, (240, 420), (240, 450))
    _box(ax, 240, 475, 220, 50, "weights", [shape("B, T, T", (B, T, T))], "computed")
    _arrow(ax, (240, 500), (300, 540))
    _arrow(ax, (cols["value"], 235), (cols["value"], 540))
    _box(ax, 415, 565, 370, 50, "out = weights @ v", [shape("B, T, hs", out.shape)], "computed")
    _legend(ax, ["learned", "buffer", "computed", "step"], 14, 522, 0, 20)
    return fig


# ---- chapter 6: a trained head ----------------------------------------------------------------

MODEL_COLORS = ("#1b9e77", "#d95f02", "#7570b3")  # one per model, in the order given


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
        ax.set_xlabel("training step")
        ax.tick_params(labelsize=_pt(TICK_PX))
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=_pt(TICK_PX), loc="outside lower center", ncols=len(curves) * 2,
               frameon=False)
    return fig


def distance_bars(profiles: dict, max_distance: int = 8, level: tuple[str, float] | None = None) -> Figure:
    """Draw mean attention weight against distance (0 = the query's own position, 1 = the one before,
    ...) as side-by-side bars, one colour per head, and return the Figure (chapter 6).

    ``profiles`` maps a head's name to its weights by distance (entry d = distance d); the first
    ``max_distance`` distances are drawn, on the 0..1 scale of every weight in the course. ``level``,
    ``(label, weight)``, is drawn as a dotted line named in the legend (e.g. an even spread). A pyplot
    figure: end the cell with ``plt.show()``.
    """
    if not profiles:
        raise ValueError("profiles must name at least one head")
    fig = new_figure(figsize=(6.8, 2.9), pyplot=True, layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(profiles)
    for n, ((name, values), color) in enumerate(zip(profiles.items(), MODEL_COLORS)):
        ys = [float(v) for v in list(values)[:max_distance]]
        xs = [d - 0.4 + width * (n + 0.5) for d in range(len(ys))]
        bars = ax.bar(xs, ys, width=width, color=color, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=_pt(TICK_PX - 1), padding=1)
    if level is not None:
        ax.axhline(level[1], color="0.45", ls=":", lw=1, label=level[0])
    ax.set_xticks(range(max_distance))
    ax.set_xlabel("distance back from the query (characters)")
    ax.set_ylabel("mean attention weight")
    ax.set_ylim(0, 1)
    ax.tick_params(labelsize=_pt(TICK_PX))
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=_pt(TICK_PX), loc="upper right")
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
    ax.set_xlabel("mean weight on a key with another character")
    ax.set_ylabel("mean weight on a key with the same character")
    ax.tick_params(labelsize=_pt(TICK_PX))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=_pt(TICK_PX), loc="lower right")
    return fig
