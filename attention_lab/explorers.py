"""Explorers: small widgets that redraw attention pictures as the reader moves a control.

One factory per chapter, each returning the widget (an :class:`Explorer`, a ``ipywidgets.VBox``)
and displaying nothing:

=====================  =======  =====================================================
factory                chapter  what the controls change
=====================  =======  =====================================================
``average_explorer``   1        T -> the normalized ``tril`` average (rows of 1/(t+1))
``scores_explorer``    2        d_k, T -> the raw q·k score grid of a fixed input
``scaling_explorer``   3        d_k, scaling on/off -> softmax weights (no mask), how
                                peaked the rows are, Var(q·k) against d_k
``masking_explorer``   4        T, mask on/off -> weights with the future zeroed
``head_explorer``      5        d_k, T, seed, text -> the weights of one causal head,
                                the reference head or the learner's own ``Head``
=====================  =======  =====================================================

What an explorer exposes (for notebooks and tests): ``controls`` (dict of the live controls by
name), ``image`` (the live ``ipywidgets.Image``), ``caption`` (the HTML line under it: "Showing: " and
the picture's text description, updated with every render), ``weights`` (the numpy array last drawn),
``result`` (everything the last drawing computed), ``message`` (the text in the message area,
``""`` when all is well) and ``message_area`` (its HTML widget), ``update_now()``, ``renders``
(how many pictures were produced), and for the static grid ``static_controls``, ``static_stack``,
``static_images`` (the pictures, ``ipywidgets.HTML``) / ``static_pngs`` / ``static_weights``
(dicts keyed by the grid values) and ``static_links``.

Design
------
*Drawing.* Each explorer owns one matplotlib ``Figure`` made directly (not via pyplot, so nothing
leaks into the notebook and no global state changes), with its axes, image, colorbar and a pool of
cell texts created once. An update computes the matrix, moves data into those artists
(``im.set_data``), redraws only the image and spines over a saved background (labels, colorbar,
side plot), stamps the title, cell numbers and tick labels from cached glyph bitmaps, and encodes
PNG bytes (unfiltered, zlib level 1) onto an ``ipywidgets.Image``. Only core ipywidgets and matplotlib are used, so the same code runs
on ipywidgets 7.7.1 (Colab) and 8.x.

*No backlog.* ipykernel hands a frontend's slider messages to the event loop one per turn, and
runs whatever is ready in between, so drawing on every change (even deferred with ``call_soon``)
queues one picture per intermediate value: measured in a real kernel, 40 drag messages gave 40
renders and a picture 1.4 to 1.9 s behind the slider. So a change after a pause is drawn at once,
and changes that arrive within ``REDRAW_INTERVAL_S`` (30 ms) of the last picture book a single
render with ``loop.call_later``; it reads the controls' *latest* values when it runs, so the picture
follows the newest value and skips the stale ones (`python tools/bench_explorers.py --burst` sends
such a burst to a real kernel and counts the pictures). With no running loop (a plain script or a
unit test) the render happens at once, synchronously. ``update_now()`` always renders
synchronously; call it in a cell that sets a control and then reads ``weights`` at once.

*Alive with no kernel.* On ipywidgets >= 8 (where ``ipywidgets.Stack`` exists) the factory also
pre-renders a grid of pictures with the same drawing code (palette PNGs, 64 colours), each an
``ipywidgets.HTML`` holding ``<img src="data:image/png;base64,..." alt="...">`` and its caption, puts
them in ``Stack`` widgets and ``jslink``s static controls to the stacks' ``selected_index`` (nested stacks
for two controls: the outer one linked to the first control, every inner one to the second). The
static controls' ranges are exactly the grid (``SelectionSlider`` / ``ToggleButtons``, linked by
``index``). The top level is ``Stack([static_panel, live_panel])`` with the static panel selected,
which is what the saved widget state shows in the hosted book, where the html-manager switches
pictures without Python. In a kernel, the first change of a static control copies its value to the
live control and switches to the live panel, whose controls cover the full range. On ipywidgets 7
there is no grid: the live panel only.

*Text alternatives.* No ``ipywidgets.Image`` gets a ``tooltip`` (ipywidgets 8.1's Image view throws
on one: it reads ``description.length``; fixed upstream in PR 3921, unreleased). A static picture's
description is its ``<img>``'s ``alt`` (the caption under it repeats it, ``aria-hidden``); the live
picture's is the caption line under it. One caption is visible at a time: the static and the live
panels are children of the same ``Stack``.

*Bad input.* Anything the reader can get wrong (a value out of range, T above the block size,
d_k < 1, characters outside the vocabulary, empty text, a learner's head that raises or returns
the wrong shape) is reported in the explorer's message area, saying what is wrong and how to fix
it; the previous picture stays and nothing is raised into the kernel. Factory arguments are
checked up front with ``ValueError``.
"""

from __future__ import annotations

import asyncio
import base64
import html
import math
import struct
import time
import zlib
from collections import OrderedDict

import ipywidgets as widgets
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab import plots, text
from attention_lab.reference import ReferenceHead

C = 384  # the lesson's d_model: width of x
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128)
STATIC_COLORS = 64  # palette size of the pre-rendered pictures


class BadInput(Exception):
    """A value the reader chose that cannot be drawn; the message says what is wrong and how to fix it."""


def has_stack() -> bool:
    """True where ``ipywidgets.Stack`` exists (ipywidgets >= 8), i.e. where a static grid is built."""
    return hasattr(widgets, "Stack")


# while a control is dragged, the live picture is redrawn at most once per this interval (and once more
# for the final value); a single change after a pause is drawn at once
REDRAW_INTERVAL_S = 0.03


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _check_int(name: str, value, lo: int, hi: int | None = None) -> int:
    # factory arguments: a ValueError naming the argument, expected vs got
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number; got {value!r}")
    if value < lo or (hi is not None and value > hi):
        want = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
        raise ValueError(f"{name} must be {want}; got {name}={value}")
    return int(value)


def _check_grid(name: str, values, lo: int, hi: int) -> tuple:
    vals = tuple(values)
    if not vals:
        raise ValueError(f"{name} must list at least one value; got an empty grid")
    for v in vals:
        _check_int(f"each value of {name}", v, lo, hi)
    if list(vals) != sorted(set(vals)):
        raise ValueError(f"{name} must be increasing with no repeats; got {vals}")
    return vals


def _value_in(name: str, value, lo: int, hi: int, fix: str) -> int:
    # live values: a BadInput for the message area instead of an exception in the kernel
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise BadInput(f"{name} must be a whole number; got {value!r}. {fix}")
    if not lo <= value <= hi:
        raise BadInput(f"{name}={value} is out of range: it must be from {lo} to {hi}. {fix}")
    return int(value)


def _seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _linear_like(g: torch.Generator, out_features: int, in_features: int) -> torch.Tensor:
    # the same distribution nn.Linear starts from: uniform on ±1/sqrt(in_features)
    bound = 1.0 / math.sqrt(in_features)
    return (torch.rand(out_features, in_features, generator=g) * 2 - 1) * bound


def entropy_bits(weights: np.ndarray) -> np.ndarray:
    """Entropy of each row of a weight matrix, in bits (0 log 0 taken as 0)."""
    p = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1)


class Explorer(widgets.VBox):
    """Base class of the explorers: live controls, one figure, coalesced redraws, static grid.

    Subclasses define ``_build(fig) -> artists``, ``_compute(values) -> dict`` (with a
    ``"weights"`` numpy array; raise :class:`BadInput` for bad values), ``_draw(artists, result,
    values)`` and ``_alt(values) -> str`` (a text description of the picture).
    """

    figsize = (3.6, 3.2)
    dpi = 80
    label = "explorer"

    def _setup(self, controls: dict, grid: list, static: bool | None, notes: str = ""):
        # called by subclasses after their own state is ready
        self.controls = controls
        self.weights = None
        self.result = None
        self.renders = 0
        self._message = ""
        self._pending = False
        self._scheduled = False
        self._last_render = 0.0
        self._hold = False
        self._fig = plots.new_figure(self.figsize, self.dpi)
        self._art = self._build(self._fig)
        self._background = None
        self._title_sprites = {}
        self._title_step = None
        # no `tooltip` on an Image: ipywidgets 8.1's view throws on it (PR 3921); the text alternative
        # is the caption under the picture, updated with every render
        self.image = widgets.Image(format="png")
        self.caption = widgets.HTML(value=_caption_html(self.label))
        self.message_area = widgets.HTML(value="")
        live_panel = widgets.VBox([widgets.HBox(list(controls.values())), self.image, self.caption])

        self.static_controls = {}
        self.static_stack = None
        self.static_images = {}
        self.static_pngs = {}
        self.static_weights = {}
        self.static_links = []
        self._top = None
        if static is None:
            static = has_stack()
        if static and not has_stack():
            raise ValueError("static=True needs ipywidgets >= 8 (ipywidgets.Stack); got ipywidgets " + widgets.__version__)
        if static and grid:
            try:
                static_panel = self._build_static(grid, notes)
            except BadInput as err:
                static_panel = None
                self._show_message(f"no pre-rendered pictures: {err}")
            if static_panel is not None:
                self._top = widgets.Stack([static_panel, live_panel], selected_index=0)
        self.children = [self._top if self._top is not None else live_panel, self.message_area]
        for ctrl in controls.values():
            ctrl.observe(self._on_change, names="value")
        self.update_now()

    # ---- public -------------------------------------------------------------------------------

    @property
    def message(self) -> str:
        """The text in the message area ("" when the picture is up to date)."""
        return self._message

    def values(self) -> dict:
        """The live controls' current values, by name."""
        return {name: ctrl.value for name, ctrl in self.controls.items()}

    def render_png(self, values: dict, colors: int | None = None) -> tuple[bytes, dict]:
        """Compute and draw ``values`` on this explorer's figure; return (PNG bytes, result).

        Raises :class:`BadInput` for values that cannot be drawn. Does not touch the widgets.
        """
        result = self._compute(values)
        self._draw(self._art, result, values)
        return self._frame(colors), result

    def _frame(self, colors: int | None) -> bytes:
        # blit: the static parts (axis labels, colorbar, side plot) are drawn once into a saved
        # background, then every frame restores it and draws only the artists that change (the
        # image, the spines over its edges); the titles, numbers and readout are stamped in
        canvas = self._fig.canvas
        dynamic = self._dynamic(self._art)
        if self._background is None:
            for heat in self._heatmaps(self._art):
                # the title is stamped (see _stamp_title): matplotlib's text layout costs ~10 ms
                if self._title_step is None:
                    self._title_step = _line_step(heat.ax.title, self._fig)
                heat.ax.title.set_visible(False)
            for a in dynamic:
                a.set_visible(False)
            canvas.draw()
            self._background = canvas.copy_from_bbox(self._fig.bbox)
            for a in dynamic:
                a.set_visible(True)
        canvas.restore_region(self._background)
        for a in dynamic:
            self._fig.draw_artist(a)
        rgba = np.array(canvas.buffer_rgba())  # a copy: the cell numbers are blended into it
        for heat in self._heatmaps(self._art):
            heat.stamp_cells(rgba)
            self._stamp_title(heat, rgba)
        self._stamp_extra(self._art, rgba)
        if colors is None:
            return _fast_png(rgba)
        return plots.rgba_png(rgba, colors=colors)

    def _stamp_title(self, heat, rgba: np.ndarray) -> None:
        # the axes title as matplotlib places it (centred on its anchor, the last line's baseline
        # on the anchor, earlier lines above), from glyph bitmaps cached by text
        title = heat.ax.title
        s = title.get_text()
        if not s or heat.stamper is None:
            return
        H = rgba.shape[0]
        x, y = title.get_transform().transform(title.get_position())
        size = title.get_fontsize()
        lines = s.split("\n")
        items = []
        for n, line in enumerate(lines):
            if not line:
                continue
            sprite, descent = self._title_sprite(heat.stamper, line, size)
            h = sprite.shape[0]
            baseline = H - y - (len(lines) - 1 - n) * self._title_step  # rows from the top
            top = baseline - (h - descent)
            # stamp() centres on (x, y) and adds 1 pt: ask for size - 1 so it finds this sprite
            items.append((x, top + h / 2, line, (0, 0, 0), size - 1))
        heat.stamper.stamp(rgba, items)

    def _title_sprite(self, stamper, s: str, size: float):
        # the sprite stamper.stamp will use (its cache, at size + 1) and its descent below the baseline
        key = (s, size)
        if key not in self._title_sprites:
            if len(self._title_sprites) > 512:
                self._title_sprites.clear()
            sprite = stamper.sprite(s, size)
            font = _title_font()
            font.set_size(size, stamper.dpi)
            font.set_text(s, 0.0)
            self._title_sprites[key] = (sprite, font.get_descent() / 64.0)
        return self._title_sprites[key]

    def update_now(self) -> bool:
        """Redraw from the controls' current values, synchronously; False if the input was bad."""
        self._pending = False
        values = self.values()
        try:
            png, result = self.render_png(values)
        except BadInput as err:
            self._show_message(str(err))
            return False
        except Exception as err:  # noqa: BLE001  the kernel must stay alive whatever goes wrong
            self._show_message(
                f"could not draw this picture ({type(err).__name__}: {err}). "
                "Try other values, or rebuild the explorer."
            )
            return False
        self.image.value = png
        self.caption.value = _caption_html(self._alt(values))
        self.weights = result["weights"]
        self.result = result
        self.renders += 1
        self._last_render = time.monotonic()
        self._show_message("")
        return True

    # ---- scheduling ---------------------------------------------------------------------------

    def _on_change(self, change):
        if self._hold:
            return
        self._go_live()
        self._pending = True
        loop = _running_loop()
        if loop is None:
            self._flush()
            return
        if self._scheduled:
            return  # a render is booked; it reads the controls' latest values when it runs
        wait = self._last_render + REDRAW_INTERVAL_S - time.monotonic()
        if wait <= 0:
            self._flush()  # idle: draw this change at once
        else:
            # a drag: the kernel hands over one slider message per loop turn, so drawing each would
            # queue a picture per intermediate value; book one render after the interval instead
            self._scheduled = True
            loop.call_later(wait, self._flush)

    def _flush(self):
        self._scheduled = False
        if self._pending:
            self.update_now()

    def _go_live(self):
        if self._top is not None and self._top.selected_index != 1:
            self._top.selected_index = 1

    def _show_message(self, msg: str):
        self._message = msg
        if msg:
            self.message_area.value = (
                '<div style="color:#8b1a1a;background:#fff4f4;border-left:3px solid #c0392b;'
                f'padding:2px 6px">⚠ {html.escape(msg)}</div>'
            )
        else:
            self.message_area.value = ""

    # ---- static grid --------------------------------------------------------------------------

    def _static_control(self, name: str, values: tuple):
        live = self.controls[name]
        if isinstance(live, widgets.ToggleButtons):
            options = [(lab, val) for lab, val in zip(live._options_labels, live._options_values) if val in values]
            ctrl = widgets.ToggleButtons(options=options, value=live.value, description=live.description)
        else:
            value = min(values, key=lambda v: abs(v - live.value))
            ctrl = widgets.SelectionSlider(
                options=list(values), value=value, description=live.description,
                style={"description_width": "initial"},
            )

        def follow(change, name=name):
            # a kernel is alive: hand over to the live controls at the same value
            self._go_live()
            self.controls[name].value = change["new"]

        ctrl.observe(follow, names="value")
        return ctrl

    def _static_image(self, key: tuple, values: dict):
        # an HTML <img> with a data URI: the only way to give each pre-rendered picture a real alt
        # text (ipywidgets.Image has none), with its caption under it
        png, result = self.render_png(values, colors=STATIC_COLORS)
        picture = widgets.HTML(value=_picture_html(png, self._alt(values)))
        self.static_images[key] = picture
        self.static_pngs[key] = png
        self.static_weights[key] = result["weights"]
        return picture

    def _build_static(self, grid: list, notes: str):
        base = self.values()
        names = [name for name, _ in grid]
        self.static_controls = {name: self._static_control(name, vals) for name, vals in grid}
        if len(grid) == 1:
            (name, vals), = grid
            images = [self._static_image((v,), {**base, name: v}) for v in vals]
            stack = widgets.Stack(images, selected_index=self.static_controls[name].index)
            self.static_links.append(widgets.jslink((self.static_controls[name], "index"), (stack, "selected_index")))
        elif len(grid) == 2:
            (outer, outer_vals), (inner, inner_vals) = grid
            inner_stacks = []
            for a in outer_vals:
                images = [self._static_image((a, b), {**base, outer: a, inner: b}) for b in inner_vals]
                inner_stacks.append(widgets.Stack(images, selected_index=self.static_controls[inner].index))
            stack = widgets.Stack(inner_stacks, selected_index=self.static_controls[outer].index)
            self.static_links.append(widgets.jslink((self.static_controls[outer], "index"), (stack, "selected_index")))
            for s in inner_stacks:
                self.static_links.append(widgets.jslink((self.static_controls[inner], "index"), (s, "selected_index")))
        else:
            raise ValueError(f"a static grid has one or two controls; got {len(grid)}: {names}")
        self.static_stack = stack
        note = widgets.HTML(
            value='<small>Pre-rendered pictures: these controls work in the page without Python. '
            f"Run the notebook (Binder or Colab) for the full range{notes}.</small>"
        )
        return widgets.VBox([widgets.HBox(list(self.static_controls.values())), stack, note])

    # ---- for subclasses -----------------------------------------------------------------------

    def _build(self, fig):
        raise NotImplementedError

    def _compute(self, values: dict) -> dict:
        raise NotImplementedError

    def _draw(self, art, result: dict, values: dict):
        raise NotImplementedError

    def _alt(self, values: dict) -> str:
        return self.label

    def _dynamic(self, art) -> list:
        # the artists redrawn on every frame: the heatmap's image and the spines over its edges
        return _heat_dynamic(art)

    def _stamp_extra(self, art, rgba: np.ndarray) -> None:
        # text that changes every frame, blended in like the cell numbers (see plots.TextStamper)
        return None

    def _heatmaps(self, art) -> list:
        return [art] if isinstance(art, plots.HeatmapArtist) else [art["heat"]]


def _heat_dynamic(heat) -> list:
    return [heat.im, *heat.ax.spines.values()]


def _title_font():
    # the font TextStamper draws with (matplotlib's default), for the metrics of a title line
    from matplotlib.font_manager import FontProperties, findfont, get_font

    return get_font(findfont(FontProperties()))


def _line_step(text_artist, fig) -> float:
    # matplotlib's distance between two lines of this text, in pixels (measured once, while visible)
    renderer = fig.canvas.get_renderer()
    s = text_artist.get_text()
    try:
        text_artist.set_text("A")
        one = text_artist.get_window_extent(renderer).height
        text_artist.set_text("A\nA")
        two = text_artist.get_window_extent(renderer).height
    finally:
        text_artist.set_text(s)
    return two - one


def _caption_html(alt: str) -> str:
    # the one visible line under a live picture: its text alternative, for every reader
    return f'<div style="line-height:1.4">Showing: {html.escape(alt, quote=False)}</div>'


def _png_size(png: bytes) -> tuple[int, int]:
    return struct.unpack(">II", png[16:24])  # IHDR: width, height


def _picture_html(png: bytes, alt: str) -> str:
    # a pre-rendered picture with its alt text and a visible caption; the caption repeats the alt
    # text, so it is hidden from screen readers (they read the alt), and one is shown at a time
    w, h = _png_size(png)
    data = base64.b64encode(png).decode("ascii")
    return (f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}" width="{w}" '
            f'height="{h}" style="display:block;max-width:100%;height:auto">'
            f'<div aria-hidden="true" style="line-height:1.4">Showing: {html.escape(alt, quote=False)}</div>')


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def _fast_png(rgba: np.ndarray) -> bytes:
    """Encode an (H, W, 4) uint8 frame as an opaque RGB PNG, fast: no filters, zlib level 1.

    Pillow picks a filter for every row, which is most of its encoding time; a heatmap frame is
    flat colour that zlib alone packs to about the same size in a third of the time.
    """
    H, W = rgba.shape[:2]
    raw = np.empty((H, 1 + 3 * W), np.uint8)
    raw[:, 0] = 0  # filter type None on every row
    raw[:, 1:] = rgba[..., :3].reshape(H, 3 * W)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))
            + _png_chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)) + _png_chunk(b"IEND", b""))


def _heatmap_build(fig, **kwargs):
    fig.subplots_adjust(left=0.16, right=0.86, bottom=0.15, top=0.86)
    ax = fig.add_subplot()
    return plots.HeatmapArtist(ax, stamp=True, **kwargs)


def _int_slider(value: int, lo: int, hi: int, description: str) -> widgets.IntSlider:
    return widgets.IntSlider(
        value=value, min=lo, max=hi, description=description, style={"description_width": "initial"}
    )


# ---- chapter 1 ---------------------------------------------------------------------------------


class AverageExplorer(Explorer):
    """Chapter 1: T -> the normalized ``tril`` matrix, row t holding 1/(t+1)."""

    label = "plain causal average: the normalized tril matrix"

    def __init__(self, T: int = 8, max_T: int = 16, grid_T=None, static: bool | None = None):
        super().__init__()
        self.max_T = _check_int("max_T", max_T, 1, 64)
        T = _check_int("T", T, 1, self.max_T)
        grid_T = _check_grid("grid_T", range(1, self.max_T + 1) if grid_T is None else grid_T, 1, self.max_T)
        controls = {"T": _int_slider(T, 1, self.max_T, "T (sequence length)")}
        self._setup(controls, [("T", grid_T)], static)

    def _build(self, fig):
        return _heatmap_build(fig)

    def _compute(self, values):
        T = _value_in("T", values["T"], 1, self.max_T, f"Pick T between 1 and {self.max_T}.")
        w = torch.tril(torch.ones(T, T))  # (T, T): 1 on/below the diagonal
        w = w / w.sum(dim=1, keepdim=True)  # rows sum to 1: row t is 1/(t+1)
        return {"weights": w.numpy()}

    def _draw(self, art, result, values):
        art.update(result["weights"], title=f"plain average, T={values['T']}")

    def _alt(self, values):
        return f"normalized tril matrix for T={values['T']}: row t holds 1/(t+1) on and left of the diagonal"


def average_explorer(T: int = 8, max_T: int = 16, grid_T=None, static: bool | None = None) -> AverageExplorer:
    """Chapter 1: a T slider and the normalized ``tril`` matrix (each row's 1/(t+1)).

    ``grid_T`` (default 1..max_T) are the T values pre-rendered for the static book;
    ``static=None`` builds them where ipywidgets >= 8 allows, ``False`` never.
    """
    return AverageExplorer(T=T, max_T=max_T, grid_T=grid_T, static=static)


# ---- chapter 2 ---------------------------------------------------------------------------------


class ScoresExplorer(Explorer):
    """Chapter 2: d_k and T -> the raw score grid q @ k.T for one fixed input."""

    label = "raw attention scores q·k"
    figsize = (3.7, 3.3)

    def __init__(self, head_size=16, T=8, seed=1337, max_T=32, max_head_size=128, limit=8.0,
                 grid_T=None, grid_head_sizes=None, static=None):
        super().__init__()
        self.max_T = _check_int("max_T", max_T, 1, 256)
        self.max_head_size = _check_int("max_head_size", max_head_size, 1, 1024)
        head_size = _check_int("head_size", head_size, 1, self.max_head_size)
        T = _check_int("T", T, 1, self.max_T)
        seed = _check_int("seed", seed, 0, 2**63 - 1)
        if not limit > 0:
            raise ValueError(f"limit must be a positive number (the colour scale runs -limit..limit); got {limit!r}")
        self.limit = float(limit)
        grid_T = _check_grid("grid_T", range(2, min(16, self.max_T) + 1) if grid_T is None else grid_T, 1, self.max_T)
        grid_hs = _check_grid(
            "grid_head_sizes",
            [d for d in POWERS_OF_TWO if d <= self.max_head_size] if grid_head_sizes is None else grid_head_sizes,
            1, self.max_head_size,
        )
        g = _seeded_generator(seed)
        # one fixed input, and projections whose first d_k rows are the head of size d_k
        self.x = torch.randn(self.max_T, C, generator=g)  # (max_T, C)
        self.W_q = _linear_like(g, self.max_head_size, C)  # (max_hs, C), stored (out, in) like nn.Linear
        self.W_k = _linear_like(g, self.max_head_size, C)  # (max_hs, C)
        # project once: a head of size d_k uses the first d_k columns, so an update is one small matmul
        self._q_all = self.x @ self.W_q.T  # (max_T, C) @ (C, max_hs) -> (max_T, max_hs)
        self._k_all = self.x @ self.W_k.T  # (max_T, C) @ (C, max_hs) -> (max_T, max_hs)
        controls = {
            "head_size": _int_slider(head_size, 1, self.max_head_size, "d_k (head_size)"),
            "T": _int_slider(T, 1, self.max_T, "T (sequence length)"),
        }
        self._setup(controls, [("head_size", grid_hs), ("T", grid_T)], static)

    def _build(self, fig):
        fig.subplots_adjust(left=0.16, right=0.84, bottom=0.15, top=0.84)
        ax = fig.add_subplot()
        return plots.HeatmapArtist(
            ax, vmin=-self.limit, vmax=self.limit, cmap="RdBu_r",
            colorbar_label=f"raw score q·k (diverging, ±{self.limit:g}, clipped)", fmt="{:.1f}", stamp=True,
        )

    def _compute(self, values):
        d = _value_in("d_k", values["head_size"], 1, self.max_head_size,
                      f"d_k must be at least 1 and at most {self.max_head_size}: move the d_k slider.")
        T = _value_in("T", values["T"], 1, self.max_T, f"Pick T between 1 and {self.max_T}.")
        q = self._q_all[:T, :d]  # (T, d_k): x @ W_q.T for this head
        k = self._k_all[:T, :d]  # (T, d_k): x @ W_k.T
        scores = q @ k.T  # (T, d_k) @ (d_k, T) -> (T, T)
        return {"weights": scores.numpy(), "scaled": (scores / math.sqrt(d)).numpy()}

    def _draw(self, art, result, values):
        s, z = result["weights"], result["scaled"]
        title = (f"q·k, d_k={values['head_size']}, T={values['T']}\n"
                 f"raw {s.min():.1f}..{s.max():.1f}; ÷√d_k {z.min():.1f}..{z.max():.1f}")
        art.update(s, title=title)

    def _alt(self, values):
        return f"raw scores q·k for d_k={values['head_size']}, T={values['T']}, on a diverging colour scale"


def scores_explorer(head_size: int = 16, T: int = 8, seed: int = 1337, max_T: int = 32, max_head_size: int = 128,
                    limit: float = 8.0, grid_T=None, grid_head_sizes=None, static: bool | None = None) -> ScoresExplorer:
    """Chapter 2: d_k and T sliders and the raw q·k score grid of a fixed random input.

    The input x is a fixed (max_T, C=384) standard normal matrix and the projections are seeded
    like ``nn.Linear``'s start (the first d_k output rows serve a head of size d_k). Scores are not
    in 0..1, so the colour scale is diverging and symmetric, fixed at ±``limit`` (values beyond are
    clipped, the title gives the true range and the range after dividing by √d_k).
    Static grid: ``grid_head_sizes`` (default 1, 2, 4, ..., 128) x ``grid_T`` (default 2..16).
    """
    return ScoresExplorer(head_size=head_size, T=T, seed=seed, max_T=max_T, max_head_size=max_head_size,
                          limit=limit, grid_T=grid_T, grid_head_sizes=grid_head_sizes, static=static)


# ---- chapter 3 ---------------------------------------------------------------------------------


class ScalingExplorer(Explorer):
    """Chapter 3: d_k and scaling on/off -> softmax weights, how peaked they are, Var(q·k) vs d_k."""

    label = "softmax weights with and without scaling by 1/√d_k"
    figsize = (6.0, 3.0)
    n_samples = 2000  # pairs of unit-variance q, k behind the variance curve

    def __init__(self, head_size=16, T=8, seed=1337, max_head_size=128, grid_head_sizes=None, static=None):
        super().__init__()
        self.max_head_size = _check_int("max_head_size", max_head_size, 1, 1024)
        head_size = _check_int("head_size", head_size, 1, self.max_head_size)
        self.T = _check_int("T", T, 1, 32)
        seed = _check_int("seed", seed, 0, 2**63 - 1)
        grid_hs = _check_grid(
            "grid_head_sizes",
            [d for d in POWERS_OF_TWO if d <= self.max_head_size] if grid_head_sizes is None else grid_head_sizes,
            1, self.max_head_size,
        )
        g = _seeded_generator(seed)
        # unit-variance q and k, the setting of the variance argument; d_k takes the first d_k columns
        self.q = torch.randn(self.T, self.max_head_size, generator=g)  # (T, max_hs)
        self.k = torch.randn(self.T, self.max_head_size, generator=g)  # (T, max_hs)
        self._qs = torch.randn(self.n_samples, self.max_head_size, generator=g)  # (N, max_hs)
        self._ks = torch.randn(self.n_samples, self.max_head_size, generator=g)  # (N, max_hs)
        # Var(q·k) for every d_k at once: the running sum over the first d_k products is q·k at d_k
        dots = torch.cumsum(self._qs * self._ks, dim=1)  # (N, max_hs): column d-1 holds q·k for d_k=d
        self._var_by_d = dots.var(dim=0).tolist()  # (max_hs,): computed once, so an update never pays for it
        self.curve_d = [d for d in POWERS_OF_TWO if d <= self.max_head_size] or [1]
        self.curve_raw = [self._variance(d) for d in self.curve_d]
        controls = {
            "head_size": _int_slider(head_size, 1, self.max_head_size, "d_k (head_size)"),
            "scale": widgets.ToggleButtons(
                options=[("raw q·k", False), ("q·k / √d_k", True)], value=True, description="scaling"
            ),
        }
        self._setup(controls, [("head_size", grid_hs), ("scale", (False, True))], static)

    def _variance(self, d: int) -> float:
        return float(self._var_by_d[d - 1])  # Var over the N pairs of q·k with q, k of size d

    def _build(self, fig):
        fig.subplots_adjust(left=0.09, right=0.97, bottom=0.24, top=0.86, wspace=0.7)
        ax, ax_var = fig.subplots(1, 2)
        heat = plots.HeatmapArtist(ax, stamp=True, fontsize=6.0)  # narrow cells: smaller numbers
        ax_var.plot(self.curve_d, self.curve_raw, "o-", color="#d95f02", ms=3, label="raw q·k")
        ax_var.plot(self.curve_d, [v / d for v, d in zip(self.curve_raw, self.curve_d)], "s-",
                    color="#1b9e77", ms=3, label="q·k / √d_k")
        ax_var.set_xscale("log", base=2)
        ax_var.set_yscale("log", base=2)
        ax_var.set_xlabel("d_k")
        ax_var.set_ylabel("Var(q·k)")
        ax_var.set_title("logit variance", fontsize=9)
        ax_var.legend(fontsize=7, loc="upper left")
        ax_var.grid(alpha=0.3)
        (marker,) = ax_var.plot([1], [1], "o", ms=9, mfc="none", mec="black", mew=1.5)
        return {"heat": heat, "marker": marker, "readout": ""}

    def _dynamic(self, art):
        return [*_heat_dynamic(art["heat"]), art["marker"]]

    def _stamp_extra(self, art, rgba):
        # the readout line, bottom left, stamped rather than drawn as a Text artist (it is the
        # longest text in the frame and changes every time)
        stamper = art["heat"].stamper
        sprite = stamper.sprite(art["readout"], 8)
        h, w = sprite.shape
        stamper.stamp(rgba, [(8 + w / 2, rgba.shape[0] - 10 - h / 2, art["readout"], (0, 0, 0), 7)])

    def _compute(self, values):
        d = _value_in("d_k", values["head_size"], 1, self.max_head_size,
                      f"d_k must be at least 1 and at most {self.max_head_size}: move the d_k slider.")
        scale = bool(values["scale"])
        scores = self.q[:, :d] @ self.k[:, :d].T  # (T, d_k) @ (d_k, T) -> (T, T)
        if scale:
            scores = scores / math.sqrt(d)
        weights = F.softmax(scores, dim=-1).numpy()  # (T, T): no mask in this chapter
        var = self._variance(d)
        return {
            "weights": weights,
            "mean_max_weight": float(weights.max(axis=1).mean()),
            "mean_entropy_bits": float(entropy_bits(weights).mean()),
            "variance": var / d if scale else var,
        }

    def _draw(self, art, result, values):
        d, scale = values["head_size"], bool(values["scale"])
        art["heat"].update(result["weights"], title=f"softmax weights, d_k={d}, {'scaled' if scale else 'raw'}")
        art["marker"].set_data([d], [result["variance"]])
        art["readout"] = (
            f"how peaked: mean max weight {result['mean_max_weight']:.2f}, mean entropy "
            f"{result['mean_entropy_bits']:.2f} bits (uniform: {math.log2(self.T):.2f})"
        )

    def _alt(self, values):
        return (f"softmax weights for d_k={values['head_size']}, "
                f"{'scaled by 1/sqrt(d_k)' if values['scale'] else 'not scaled'}, and Var(q·k) against d_k")


def scaling_explorer(head_size: int = 16, T: int = 8, seed: int = 1337, max_head_size: int = 128,
                     grid_head_sizes=None, static: bool | None = None) -> ScalingExplorer:
    """Chapter 3: a d_k slider and a scaling toggle; softmax weights, peakedness, Var(q·k) vs d_k.

    q and k are seeded unit-variance (T, d_k) matrices, the setting of the variance argument; the
    weights are softmax over keys with no mask (masking is chapter 4). The readout gives the mean
    of each row's largest weight and the mean row entropy in bits; the right plot shows the
    empirical Var(q·k) against d_k, raw (about d_k) and scaled (about 1), circling the current d_k.
    ``result`` holds ``mean_max_weight``, ``mean_entropy_bits`` and ``variance``.
    """
    return ScalingExplorer(head_size=head_size, T=T, seed=seed, max_head_size=max_head_size,
                           grid_head_sizes=grid_head_sizes, static=static)


# ---- chapter 4 ---------------------------------------------------------------------------------


class MaskingExplorer(Explorer):
    """Chapter 4: T and mask on/off -> softmax weights with the future zeroed."""

    label = "attention weights with and without the causal mask"

    def __init__(self, T=8, seed=1337, max_T=32, head_size=16, grid_T=None, static=None):
        super().__init__()
        self.max_T = _check_int("max_T", max_T, 1, 256)
        T = _check_int("T", T, 1, self.max_T)
        seed = _check_int("seed", seed, 0, 2**63 - 1)
        self.head_size = _check_int("head_size", head_size, 1, 1024)
        grid_T = _check_grid("grid_T", range(2, min(16, self.max_T) + 1) if grid_T is None else grid_T, 1, self.max_T)
        g = _seeded_generator(seed)
        # unit-variance q and k, as in chapter 3, so the rows are neither flat nor one-hot
        self.q = torch.randn(self.max_T, self.head_size, generator=g)  # (max_T, hs)
        self.k = torch.randn(self.max_T, self.head_size, generator=g)  # (max_T, hs)
        controls = {
            "T": _int_slider(T, 1, self.max_T, "T (sequence length)"),
            "mask": widgets.ToggleButtons(
                options=[("no mask", False), ("causal mask", True)], value=True, description="mask"
            ),
        }
        self._setup(controls, [("T", grid_T), ("mask", (False, True))], static)

    def _build(self, fig):
        return _heatmap_build(fig)

    def _compute(self, values):
        T = _value_in("T", values["T"], 1, self.max_T, f"Pick T between 1 and {self.max_T}.")
        scores = self.q[:T] @ self.k[:T].T / math.sqrt(self.head_size)  # (T, hs) @ (hs, T) -> (T, T)
        if values["mask"]:
            tril = torch.tril(torch.ones(T, T))  # (T, T): 1 where j <= i
            scores = scores.masked_fill(tril == 0, float("-inf"))  # future -> -inf
        return {"weights": F.softmax(scores, dim=-1).numpy()}

    def _draw(self, art, result, values):
        art.update(result["weights"], title=f"T={values['T']}, {'causal mask' if values['mask'] else 'no mask'}")

    def _alt(self, values):
        return f"attention weights for T={values['T']}, {'future masked' if values['mask'] else 'no mask'}"


def masking_explorer(T: int = 8, seed: int = 1337, max_T: int = 32, head_size: int = 16, grid_T=None,
                     static: bool | None = None) -> MaskingExplorer:
    """Chapter 4: a T slider and a mask toggle; softmax weights, with the future zeroed when masked.

    Scores are q·k/√head_size for seeded unit-variance q, k; masking fills the entries above the
    diagonal with -inf before softmax, as in Fig. 5. Static grid: ``grid_T`` (default 2..16) x mask.
    """
    return MaskingExplorer(T=T, seed=seed, max_T=max_T, head_size=head_size, grid_T=grid_T, static=static)


# ---- chapter 5 ---------------------------------------------------------------------------------


def head_weights(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The attention weights a head applies to x (B, T, C), computed from its key, query and tril."""
    T = x.shape[1]
    k = head.key(x)  # (B, T, hs)
    q = head.query(x)  # (B, T, hs)
    scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
    scores = scores.masked_fill(head.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
    return F.softmax(scores, dim=-1)  # (B, T, T)


def build_head_inputs(Head, head_size: int, block_size: int, seed: int):
    """Build (token table, position table, head) under ``torch.manual_seed(seed)``, in that order.

    The global random state is restored afterwards (``torch.random.fork_rng``), so building an
    explorer never disturbs a notebook's own seeding.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tok = nn.Embedding(len(text.vocab()), C)  # (vocab, C)
        pos = nn.Embedding(block_size, C)  # (block_size, C)
        head = Head(C, head_size, block_size)
    return tok, pos, head


class HeadExplorer(Explorer):
    """Chapter 5: d_k, T, seed and a text box -> the attention weights of one causal head."""

    label = "attention weights of one causal head"
    figsize = (4.0, 3.6)

    def __init__(self, Head=None, text_="First Citizen:", head_size=16, block_size=32, seed=1337,
                 max_head_size=128, grid_head_sizes=None, grid_T=None, static=None):
        super().__init__()
        if Head is not None and not callable(Head):
            raise ValueError(f"Head must be a class built as Head(C, head_size, block_size); got {Head!r}")
        self.Head = Head
        self.learner = Head is not None
        self.block_size = _check_int("block_size", block_size, 1, 256)
        self.max_head_size = _check_int("max_head_size", max_head_size, 1, 1024)
        head_size = _check_int("head_size", head_size, 1, self.max_head_size)
        seed = _check_int("seed", seed, 0, 2**63 - 1)
        if not isinstance(text_, str) or not text_:
            raise ValueError(f"text must be a non-empty string of characters from the passage; got {text_!r}")
        text.encode(text_)  # raises ValueError naming the characters outside the vocabulary
        if len(text_) > self.block_size:
            raise ValueError(f"text must have at most block_size={self.block_size} characters; got {len(text_)}")
        grid_hs = _check_grid(
            "grid_head_sizes",
            [d for d in POWERS_OF_TWO if d <= self.max_head_size] if grid_head_sizes is None else grid_head_sizes,
            1, self.max_head_size,
        )
        grid_T = _check_grid("grid_T", range(1, min(len(text_), 16) + 1) if grid_T is None else grid_T, 1, len(text_))
        self._cache = OrderedDict()
        controls = {
            "head_size": _int_slider(head_size, 1, self.max_head_size, "d_k (head_size)"),
            "T": _int_slider(len(text_), 1, self.block_size, "T (characters used)"),
            "seed": widgets.IntText(value=seed, description="seed", layout=widgets.Layout(width="170px")),
            "text": widgets.Text(value=text_, description="text", placeholder="type characters from the passage"),
        }
        controls["text"].observe(self._text_changed, names="value")
        notes = f" and to change the text ({text_!r}) or the seed ({seed})"
        self._setup(controls, [("head_size", grid_hs), ("T", grid_T)], static, notes=notes)

    def _text_changed(self, change):
        # T follows the text's length while it fits, so typing extends the picture
        n = len(change["new"])
        if 1 <= n <= self.block_size:
            self._hold = True
            try:
                self.controls["T"].value = n
            finally:
                self._hold = False

    def _inputs(self, head_size: int, seed: int):
        key = (head_size, seed)
        if key not in self._cache:
            self._cache[key] = build_head_inputs(self.Head or ReferenceHead, head_size, self.block_size, seed)
            while len(self._cache) > 8:
                self._cache.popitem(last=False)
        return self._cache[key]

    def _build(self, fig):
        return _heatmap_build(fig)

    def _compute(self, values):
        d = _value_in("d_k", values["head_size"], 1, self.max_head_size,
                      f"d_k (head_size) must be at least 1 and at most {self.max_head_size}: move the d_k slider.")
        seed = _value_in("seed", values["seed"], 0, 2**63 - 1, "Type a seed of 0 or more.")
        chars = values["text"]
        if not chars:
            raise BadInput("the text is empty: type at least one character (for example 'First Citizen:').")
        try:
            ids = text.encode(chars)
        except ValueError as err:
            raise BadInput(f"{err}.") from None
        if len(chars) > self.block_size:
            raise BadInput(
                f"the text has {len(chars)} characters, above block_size={self.block_size}, the longest sequence "
                f"this head can attend over: shorten the text to at most {self.block_size} characters."
            )
        T = _value_in("T", values["T"], 1, self.block_size,
                      f"T is above block_size={self.block_size} (or below 1): pick T from 1 to {self.block_size}.")
        if T > len(chars):
            raise BadInput(f"T={T} but the text has only {len(chars)} characters: type more text or lower T.")
        try:
            tok, pos, head = self._inputs(d, seed)
        except NotImplementedError as err:
            raise BadInput(f"your Head is not written yet ({err}). Finish it, then build the explorer again.") from None
        except Exception as err:  # noqa: BLE001  a learner's constructor can fail in any way
            raise BadInput(f"Head(C={C}, head_size={d}, block_size={self.block_size}) raised "
                           f"{type(err).__name__}: {err}. Fix Head.__init__ and build the explorer again.") from None
        idx = torch.tensor([ids[:T]])  # (1, T)
        with torch.no_grad():
            x = tok(idx) + pos(torch.arange(T))  # (1, T, C) + (T, C) -> (1, T, C)
            for name in ("key", "query", "value", "tril"):
                if not hasattr(head, name):
                    raise BadInput(f"your Head has no `{name}`: name the projections key, query and value and "
                                   "the mask buffer tril, as in Fig. 6, so the explorer can read the weights.")
            try:
                weights = head_weights(head, x)  # (1, T, T)
                expected = weights @ head.value(x)  # (1, T, T) @ (1, T, hs) -> (1, T, hs)
            except Exception as err:  # noqa: BLE001
                raise BadInput(f"could not compute the weights from your Head's key, query and tril "
                               f"({type(err).__name__}: {err}); check their sizes against Fig. 6.") from None
            if self.learner:
                self._check_forward(head, x, expected, d, T)
        return {"weights": weights[0].numpy(), "x": x, "head": head, "tokens": chars[:T]}

    @staticmethod
    def _check_forward(head, x, expected, d, T):
        try:
            out = head(x)
        except NotImplementedError as err:
            raise BadInput(f"your Head.forward is not written yet ({err}). Finish it, then build the explorer again.") from None
        except Exception as err:  # noqa: BLE001
            raise BadInput(f"your Head.forward raised {type(err).__name__}: {err}. Fix forward (compare with "
                           "Fig. 6), then build the explorer again.") from None
        want = (1, T, d)
        got = tuple(getattr(out, "shape", ()))
        if got != want:
            raise BadInput(f"your Head.forward returned shape {got}; expected (B, T, head_size) = {want}. "
                           "Check that it returns weights @ v.")
        if not torch.allclose(out, expected, atol=1e-5, rtol=1e-4):
            diff = float((out - expected).abs().max())
            raise BadInput(f"your Head.forward's output differs from weights @ value(x) (largest difference "
                           f"{diff:.3g}): check the 1/√d_k scaling, the mask with -inf, and softmax over dim=-1.")

    def _draw(self, art, result, values):
        who = "your Head" if self.learner else "reference head"
        art.update(result["weights"], tokens=result["tokens"],
                   title=f"{who}, d_k={values['head_size']}, T={len(result['tokens'])}")

    def _alt(self, values):
        return (f"attention weights of one causal head, d_k={values['head_size']}, T={values['T']}, "
                f"seed={values['seed']}, over the characters {values['text'][:values['T']]!r}")


def head_explorer(Head=None, text: str = "First Citizen:", head_size: int = 16, block_size: int = 32,
                  seed: int = 1337, max_head_size: int = 128, grid_head_sizes=None, grid_T=None,
                  static: bool | None = None) -> HeadExplorer:
    """Chapter 5: the attention weights of one causal head over the characters of a text.

    Controls: d_k (head_size), T (how many characters of the text are used; follows the text's
    length as you type), seed and a text box; the characters label both axes. ``Head`` is the
    learner's class, built as ``Head(C=384, head_size, block_size)``; ``None`` uses
    :class:`ReferenceHead` (Fig. 6). Characters become ids with :func:`attention_lab.text.encode`
    and x = token table + position table (``nn.Embedding(len(vocab), 384)`` and
    ``nn.Embedding(block_size, 384)``), built with the head under ``torch.manual_seed(seed)``
    (see :func:`build_head_inputs`). The weights are computed from the head's own ``key``,
    ``query`` and ``tril`` as in the lesson; a learner's ``forward`` is also called and must
    return (B, T, head_size) equal to ``weights @ value(x)``, or the message area says what differs.
    Static grid: ``grid_head_sizes`` (1, 2, ..., 128) x ``grid_T`` (1..len(text), at most 16).
    """
    return HeadExplorer(Head=Head, text_=text, head_size=head_size, block_size=block_size, seed=seed,
                        max_head_size=max_head_size, grid_head_sizes=grid_head_sizes, grid_T=grid_T, static=static)
