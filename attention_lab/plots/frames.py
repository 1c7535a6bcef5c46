"""The explorers' fast redraw: a :class:`Frame` renders a figure of heatmaps again after each change,
blends cell numbers and tick labels in from cached glyphs (:class:`_Stamper`) and encodes the pixels
with :func:`fast_png`.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont, get_font

from .heatmaps import CSS_DPI, HeatmapArtist

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

