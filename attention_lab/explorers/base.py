"""The base of every chapter's explorer: :class:`Explorer` (live controls, a picture redrawn on every
change, the hosted book's page config), the redraw scheduling, and what several chapters share (a
text's ids, a head's weights, tensors packed for the page). :mod:`attention_lab.explorers` says what
the explorers are and how they behave.
"""

from __future__ import annotations

import asyncio
import base64
import html
import os
import time

import ipywidgets as widgets
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from attention_lab import plots
from attention_lab.controls import Checked
from attention_lab.explorers import view
from attention_lab.text import encode
from attention_lab.training import one_thread

C = 384  # the lesson's d_model: width of x
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128)
# while a control is dragged, the live picture is redrawn at most once per this interval (and once
# more for the final value); a single change after a pause is drawn at once
REDRAW_INTERVAL_S = 0.03


# set to "1" by `make outputs` (course/chapters.py) in the kernel that executes a chapter for the book:
# only there is the page's config recorded; a learner's kernel draws live and skips that work
STATIC_ENV = "ATTENTION_LAB_STATIC"
# the key of an explorer output's metadata that holds its page config (book/_ext/page_explorers.py)
PAGE_KEY = "attention_lab_page"


class BadInput(Exception):
    """A value the reader chose that cannot be drawn; the message says what is wrong and how to fix it."""


def in_kernel() -> bool:
    """True inside an IPython kernel (a notebook, JupyterLab, Colab), whose event loop runs booked redraws."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def redraw_loop() -> asyncio.AbstractEventLoop | None:
    """The loop that runs a redraw booked for later: a kernel's running loop, else None (draw at once).

    Only a kernel's loop is known to run the callbacks booked on it: another running loop on the thread
    (Playwright's sync API leaves one that never runs them) would leave the picture behind its controls.
    """
    if not in_kernel():
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def has_stack() -> bool:
    """True where ``ipywidgets.Stack`` exists (ipywidgets >= 8, whose widgets are shown through
    ``_repr_mimebundle_``, which carries the page config)."""
    return hasattr(widgets, "Stack")


def entropy_bits(weights: np.ndarray) -> np.ndarray:
    """Entropy of each row of a weight matrix, in bits (0 log 0 taken as 0)."""
    p = np.asarray(weights, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log2(safe)).sum(axis=-1)


def floats(t) -> dict:
    """A tensor or array as float32 for the page: its shape and its little-endian bytes in base64."""
    a = np.ascontiguousarray(t.detach().numpy() if isinstance(t, torch.Tensor) else t, dtype="<f4")
    return {"shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode("ascii")}


def _caption_html(alt: str, hidden: bool = False) -> str:
    aria = ' aria-hidden="true"' if hidden else ""
    return f'<div class="explorer-caption"{aria}>Showing: {html.escape(alt, quote=False)}</div>'


class Explorer(widgets.VBox):
    """Live controls, a picture redrawn on every change, and a config for the hosted book's page.

    A subclass sets ``label`` (one line: what its pictures show), ``kind`` ("weights" or "scores")
    and ``figsize``; builds its state in ``__init__`` and then calls ``super().__init__(controls,
    static)``. It provides ``compute(values) -> dict`` (the key "matrix" is the (T, T) array drawn,
    "tokens" the characters on the axes; raise :class:`BadInput` for values that cannot be drawn),
    ``alt(values, result) -> str`` (what the picture shows: alt text and caption; the page's
    explorers.js says the same words) and ``page() -> dict`` (the tensors the page needs). A picture
    with more than one part overrides ``build(fig, stamped)`` (draws the figure's parts; returns its
    heatmaps and the other artists that change) and ``draw(frame, result, values)`` (updates them).
    Controls that follow one another (a menu that fills a text box) set each other with ``set_quietly``.
    """

    label = "explorer"
    kind = "weights"
    limit = None  # the ± colour scale of a "scores" heatmap
    figsize = (3.9, 3.2)

    def __init__(self, controls: dict, static: bool | None = None):
        super().__init__()
        self.controls = controls
        self.matrix = None
        self.result = None
        self.renders = 0
        self.message = ""
        self._pending = self._scheduled = self._hold = False
        self._last_render = 0.0
        fig = plots.new_figure(self.figsize)
        self.frame = plots.Frame(fig, *self.build(fig))
        w, h = self.frame.css_size
        # shown at its CSS size from a picture of twice the pixels; no `tooltip` on an Image
        # (ipywidgets 8.1's view throws on one): the caption under it is its text alternative
        self.image = widgets.Image(format="png", width=str(w), height=str(h),
                                   layout=widgets.Layout(max_width="100%", height="auto"))
        self.caption = widgets.HTML(value=_caption_html(self.label))
        self.message_area = widgets.HTML(value="")
        if static is not None and not isinstance(static, bool):
            raise ValueError(f"static must be True (record the hosted book's page config), False or None "
                             f"(decided by the environment variable {STATIC_ENV}); got {static!r}")
        if static is None:
            static = has_stack() and os.environ.get(STATIC_ENV) == "1"
        if static and not has_stack():
            raise ValueError(f"static=True needs ipywidgets >= 8; got {widgets.__version__}")
        self.children = [widgets.VBox([self._row(controls.values()), self.image, self.caption]), self.message_area]
        self.add_class("attention-explorer")
        for name, ctrl in controls.items():
            ctrl.observe(self._on_change, names="value")
            if isinstance(ctrl, Checked):
                ctrl.owner = (name, self._show_message)
        self.page_data = None
        self.view = None  # JupyterLab's page view (view.py), when this kernel shows one
        drawn = self.update_now()
        if drawn and static:
            try:
                self.page_data = self.page_config()
            except BadInput as err:  # the page could not rebuild it: the book shows the saved picture
                self._show_message(f"{err}; the hosted book shows this explorer's first picture only.")
        elif drawn and view.use_page_view(static):
            try:
                config = self.page_config()
            except BadInput:  # the page cannot rebuild it (a learner's Head): the core widgets stay
                config = None
            if config is not None:
                self.view = view.page_view(config)
                self.view.observe(self._from_view, names="values")
                self.children = [self.view, self.message_area]

    def __repr__(self) -> str:
        # what a notebook stores as the cell's text output: stable from run to run
        values = ", ".join(f"{k}={v!r}" for k, v in self.values().items())
        return f"{type(self).__name__}({values})"

    # ---- for subclasses ---------------------------------------------------------------------------

    def build(self, fig, stamped: bool = True) -> tuple[list, list]:
        fig.subplots_adjust(left=0.14, right=0.88, bottom=0.14, top=0.97)
        return [plots.HeatmapArtist(fig.add_subplot(), kind=self.kind, limit=self.limit, stamped=stamped)], []

    def draw(self, frame: plots.Frame, result: dict, values: dict) -> None:
        frame.heatmaps[0].update(result["matrix"], tokens=result.get("tokens"))

    def compute(self, values: dict) -> dict:
        raise NotImplementedError

    def alt(self, values: dict, result: dict) -> str:
        return self.label

    # ---- drawing ---------------------------------------------------------------------------------

    def values(self) -> dict:
        """The live controls' current values, by name."""
        return {name: ctrl.value for name, ctrl in self.controls.items()}

    def render(self, values: dict, fmt: str = "png") -> tuple[bytes, dict]:
        """Compute and draw ``values``; return (the picture as "png" or "webp" bytes, the result).

        Raises :class:`BadInput` for values that cannot be drawn; does not touch the widgets.
        """
        with one_thread():  # an explorer's tensors are tiny
            result = self.compute(values)
        self.draw(self.frame, result, values)
        return (self.frame.png() if fmt == "png" else self.frame.webp()), result

    def update_now(self) -> bool:
        """Redraw from the controls' current values, synchronously; False if the input was bad."""
        self._pending = False
        values = self.values()
        try:
            if self.view is None:
                png, result = self.render(values)
            else:  # the page view draws the picture in the browser: the kernel computes only the numbers
                with one_thread():
                    png, result = None, self.compute(values)
        except BadInput as err:
            self._show_message(str(err))
            return False
        except Exception as err:  # noqa: BLE001  the kernel must stay alive whatever goes wrong
            self._show_message(f"could not draw this picture ({type(err).__name__}: {err}). "
                               "Try other values, or build the explorer again.")
            return False
        if png is not None:
            self.image.value = png
        self.caption.value = _caption_html(self.alt(values, result))
        self.matrix, self.result = result["matrix"], result
        self.renders += 1
        if self.view is not None:  # a value set from code: the page view draws it too
            self.view.values = values
        self._last_render = time.monotonic()
        self._show_message("")
        return True

    def _show_message(self, msg: str) -> None:
        self.message = msg
        self.message_area.value = (f'<div class="explorer-message" role="status">⚠ {html.escape(msg)}</div>'
                                   if msg else "")

    @staticmethod
    def _row(children) -> widgets.HBox:
        # controls wrap onto the next line on a narrow screen
        return widgets.HBox(list(children), layout=widgets.Layout(flex_flow="row wrap"))

    # ---- scheduling ------------------------------------------------------------------------------

    def set_quietly(self, name: str, value) -> None:
        """Set a control that follows another one: the reader's change draws the picture, this
        echo of it draws none (a hook for subclasses whose controls are linked)."""
        self._hold = True
        try:
            self.controls[name].value = value
        finally:
            self._hold = False

    def _on_change(self, change) -> None:
        if self._hold:
            return
        self._pending = True
        loop = redraw_loop()
        if loop is None:
            self._flush()
        elif not self._scheduled:  # else a render is booked; it reads the latest values
            wait = self._last_render + REDRAW_INTERVAL_S - time.monotonic()
            if wait <= 0:
                self._flush()  # idle: draw this change at once
            else:
                self._scheduled = True
                loop.call_later(wait, self._flush)

    def _from_view(self, change) -> None:
        # the page view painted the reader's press: set the controls to its values, then draw once
        for name, value in change["new"].items():
            ctrl = self.controls.get(name)
            if ctrl is None:
                continue
            if isinstance(ctrl.value, int) and not isinstance(ctrl.value, bool) and isinstance(value, str):
                value = int(value)  # a seed travels as a string (no float rounding in the page)
            if ctrl.value != value:
                self._hold = True
                try:
                    ctrl.value = value
                except Exception:  # noqa: BLE001  refused: the control's message area says why
                    pass
                finally:
                    self._hold = False
        self._on_change(None)

    def _flush(self) -> None:
        self._scheduled = False
        if self._pending:
            self.update_now()

    # ---- the hosted book's page ------------------------------------------------------------------

    def page(self) -> dict:
        """What the page's engine needs beyond the controls' values: the chapter's own tensors and the
        controls' ranges (book/_static/engine/explorers.js reads it)."""
        return {}

    def page_config(self) -> dict:
        """The explorer as the hosted book's page rebuilds it: its name, the values it starts on and
        :meth:`page`; stored in the cell's output metadata under ``PAGE_KEY``."""
        name = type(self).__name__.removesuffix("Explorer").lower()
        return {"explorer": name, "values": self.values(), "label": self.label, **self.page()}

    def _repr_mimebundle_(self, **kwargs):
        # ipywidgets 8 shows a widget through this; the page's config rides in the output's metadata,
        # which nbval does not compare, so the cell's text/plain and widget view stay as they were
        data = super()._repr_mimebundle_(**kwargs)
        return (data, {PAGE_KEY: self.page_data}) if self.page_data else data


# ---- shared by chapters 5 and 6 -----------------------------------------------------------------


def head_weights(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The attention weights a head applies to x (B, T, C), from its key, query and tril."""
    T = x.shape[1]
    k, q = head.key(x), head.query(x)  # (B, T, hs) each
    scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
    scores = scores.masked_fill(head.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
    return F.softmax(scores, dim=-1)  # (B, T, T)


def _projections(tok: torch.Tensor, pos: torch.Tensor, head: nn.Module) -> dict:
    # each character's and each position's key, query and value (x = tok + pos, and x @ W.T is linear):
    # (vocab, hs) and (block_size, hs), far fewer numbers than the tables of width C
    with torch.no_grad():
        return {f"{name}_{part}": floats(table @ getattr(head, part).weight.T)
                for name, table in (("tok", tok), ("pos", pos)) for part in ("key", "query", "value")}


def _text_ids(chars, block_size: int) -> list[int]:
    if not isinstance(chars, str):
        raise BadInput(f"the text must be a string of characters, such as 'First Citizen:'; got {chars!r} "
                       f"({type(chars).__name__}).")
    if not chars:
        raise BadInput("the text is empty: type at least one character (for example 'First Citizen:').")
    if len(chars) > block_size:
        raise BadInput(f"the text has {len(chars)} characters, above block_size={block_size}, the longest "
                       f"sequence this head attends over: shorten it to at most {block_size}.")
    try:
        return encode(chars)
    except ValueError as err:
        raise BadInput(f"{err}.") from None
