"""Explorers: widgets that redraw an attention picture as the reader moves a control.

One class per chapter, each a ``ipywidgets.VBox`` that displays nothing until the notebook shows it;
the chapters call them by the lower-case names:

======================  =======  =====================================================================
name                    chapter  what the controls change
======================  =======  =====================================================================
``average_explorer``    1        T -> the normalized ``tril`` average (rows of 1/(t+1))
``scores_explorer``     2        d_k, T -> the raw q·k scores of the chapter's own sequence
``scaling_explorer``    3        d_k, scaling on/off -> softmax weights of unit-variance q and k (the
                                 setting of the variance argument), Var(q·k) against d_k
``masking_explorer``    4        T, mask on/off -> the weights of the chapter's own q and k
``head_explorer``       5        d_k, T, seed, text -> the weights of one causal head (the chapter's,
                                 the reference head, or the learner's own ``Head``)
``trained_explorer``    6        a line of the play or typed text, trained/untrained -> the weights of
                                 chapter 6's head, before and after training
======================  =======  =====================================================================

Every explorer has ``controls`` (the live controls by name), ``image`` (the live picture),
``caption`` (the line under it: "Showing: " and what the picture shows), ``matrix`` (the array last
drawn), ``result`` (everything the last drawing computed), ``message`` (the text in the message area,
"" when all is well), ``renders`` (pictures drawn so far) and ``update_now()``. A live toggle marks its
selected button with a check icon, for JupyterLab and Colab, where the book's CSS is absent.

*Drawing.* Each explorer owns one matplotlib figure and a :class:`attention_lab.plots.Frame`, which
redraws only what changes (the heatmap's cells painted with numpy, the pixels matplotlib would draw) and
returns the picture at twice its displayed pixels. ``tools/bench_keypress.py`` times a keypress in
JupyterLab to the new picture on screen.

*No backlog.* ipykernel hands a dragged slider's messages to the event loop one per turn, so drawing
on every change queues a picture per intermediate value (measured: 40 drag messages, 40 pictures,
1.4 to 1.9 s behind the slider). A change after a pause is drawn at once; changes within
``REDRAW_INTERVAL_S`` of the last picture book one render with ``loop.call_later``, which reads the
controls' latest values when it runs. Only inside an IPython kernel, on its running loop
(:func:`redraw_loop`): anywhere else (a script, a unit test, beside another asyncio loop such as
Playwright's) a change is drawn synchronously. ``tools/bench_explorers.py --burst`` plays such a drag
against a real kernel.

*Alive with no kernel.* When a chapter is executed for the book (``make outputs`` sets the environment
variable ``ATTENTION_LAB_STATIC=1``; ``static=True`` asks for it anywhere), on ipywidgets >= 8 an
explorer also records :meth:`Explorer.page_config` (which explorer, the values it starts on, the
chapter's own tensors as base64 float32) in its output's metadata under ``PAGE_KEY``. The book's
``book/_ext/page_explorers.py`` swaps that output for a ``<div class="attention-explorer">``, and
``book/_static/engine/explorers.js`` computes every picture in the page, at any value the live
controls take, with no Python. The cell's text/plain and widget view stay what they are in a kernel.

*Bad input* (a value out of range, T above the block size, characters outside the vocabulary, a
learner's ``Head`` that raises, returns the wrong shape or runs too long) is explained in the
explorer's message area; the previous picture stays and nothing is raised into the kernel. A value set
on a control from code that the control cannot take (``controls["T"].value = "8"``, an option a menu
does not offer) is refused: the message area says why, and so does the ``TraitError`` the assignment
raises. Arguments given to a class are checked up front with ``ValueError``, except a learner's
``Head`` that fails: that is a message, also with ``static=True`` (the explorer is then live only).

*A learner's Head that never returns.* On Linux and macOS, in the kernel's main thread, the
explorer stops its ``Head(...)`` and ``forward`` calls after ``HEAD_TIME_LIMIT_S`` (``SIGALRM``) and
says so; elsewhere (Windows, another thread) nothing can stop them: interrupt the kernel (Kernel ▸
Interrupt), as the messages about a failing ``Head`` there say.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import html
import math
import os
import signal
import threading
import time

import ipywidgets as widgets
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from attention_lab import plots
from attention_lab.controls import (Checked, Menu, NumberBox, TextBox, a_kind, one_sequence,
                                    plural, positive, slider, toggle, whole)
from attention_lab.reference import ReferenceHead
from attention_lab.text import encode, vocab
from attention_lab.training import one_thread

C = 384  # the lesson's d_model: width of x
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128)
# while a control is dragged, the live picture is redrawn at most once per this interval (and once
# more for the final value); a single change after a pause is drawn at once
REDRAW_INTERVAL_S = 0.03


# set to "1" by `make outputs` (tools/notebooks.py) in the kernel that executes a chapter for the book:
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
        if self.update_now() and static:
            try:
                self.page_data = self.page_config()
            except BadInput as err:  # the page could not rebuild it: the book shows the saved picture
                self._show_message(f"{err}; the hosted book shows this explorer's first picture only.")

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
            png, result = self.render(values)
        except BadInput as err:
            self._show_message(str(err))
            return False
        except Exception as err:  # noqa: BLE001  the kernel must stay alive whatever goes wrong
            self._show_message(f"could not draw this picture ({type(err).__name__}: {err}). "
                               "Try other values, or build the explorer again.")
            return False
        self.image.value = png
        self.caption.value = _caption_html(self.alt(values, result))
        self.matrix, self.result = result["matrix"], result
        self.renders += 1
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


# ---- chapter 1 ---------------------------------------------------------------------------------


class AverageExplorer(Explorer):
    """Chapter 1: T -> the normalized ``tril`` matrix of Fig. 2, row t holding 1/(t+1)."""

    label = "the plain causal average: the normalized tril matrix"

    def __init__(self, T=8, max_T=16, static=None):
        self.max_T = whole("max_T", max_T, 1, 64)
        controls = {"T": slider(whole("T", T, 1, self.max_T), 1, self.max_T, "T (sequence length)")}
        super().__init__(controls, static)

    def page(self):
        return {"max_T": self.max_T}

    def compute(self, values):
        T = whole("T", values["T"], 1, self.max_T, BadInput, f"Pick T between 1 and {self.max_T}.")
        w = torch.tril(torch.ones(T, T))  # (T, T): ones on and below the diagonal
        return {"matrix": (w / w.sum(dim=1, keepdim=True)).numpy()}  # row t: 1/(t+1)

    def alt(self, values, result):
        return f"normalized tril matrix for T={values['T']}: row t holds 1/(t+1) on and left of the diagonal"


# ---- chapter 2 ---------------------------------------------------------------------------------


def _checked_layer(name: str, layer, width: int) -> None:
    # the chapter's projection must take x's width
    if layer is None:
        return
    if not isinstance(layer, nn.Linear):
        raise ValueError(f"{name} must be the chapter's {name}, an nn.Linear(C, head_size); got {a_kind(layer)}")
    if layer.in_features != width:
        raise ValueError(f"{name} takes {layer.in_features} numbers per position but x has {width}: pass the "
                         f"{name} that projects this x, an nn.Linear({width}, head_size), or an x of shape "
                         f"(T, {layer.in_features}).")


def _projection(layer: nn.Linear | None, rows: int, in_features: int, g: torch.Generator) -> torch.Tensor:
    # the layer's own weight (out, in), with more rows drawn as nn.Linear starts them, uniform on
    # ±1/sqrt(in), so that a head of size d_k uses the first d_k rows
    own = torch.empty(0, in_features) if layer is None else layer.weight.detach().float()
    extra = (torch.rand(max(rows - len(own), 0), in_features, generator=g) * 2 - 1) / math.sqrt(in_features)
    return torch.cat([own, extra])[:rows]


class ScoresExplorer(Explorer):
    """Chapter 2: d_k and T -> the raw scores q @ k.T of one sequence ``x`` of shape (T, C).

    With the chapter's ``x[0]``, ``query`` and ``key`` it starts on the chapter's own scores (d_k =
    head_size, all T positions); other d_k use the first d_k rows of the chapter's weights, and rows
    beyond them drawn as ``nn.Linear`` draws its start. Without them: a seeded random ``x`` and layers.
    """

    label = "raw attention scores q·k"
    kind = "scores"

    def __init__(self, x=None, query=None, key=None, max_head_size=128, limit=8.0, seed=1337, static=None):
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        x = torch.randn(8, C, generator=g) if x is None else one_sequence("x", x, "(T, C)")
        for name, layer in (("query", query), ("key", key)):
            _checked_layer(name, layer, x.shape[1])
        if query is not None and key is not None and query.out_features != key.out_features:
            raise ValueError(f"query and key must have the same head_size; got nn.Linear(..., {query.out_features}) "
                             f"and nn.Linear(..., {key.out_features}). Pass the chapter's pair.")
        self.max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        self.limit = positive("limit", limit, "8 (the colours run from -limit to +limit)")
        self.q_all = x @ _projection(query, self.max_head_size, x.shape[1], g).T  # (T, max_hs)
        self.k_all = x @ _projection(key, self.max_head_size, x.shape[1], g).T  # (T, max_hs)
        d = 16 if query is None else query.out_features
        T = x.shape[0]
        raise_max = "Raise max_head_size to at least the head_size of query." if query is not None else ""
        controls = {"head_size": slider(whole("head_size", d, 1, self.max_head_size, fix=raise_max), 1,
                                        self.max_head_size, "d_k (head_size)"),
                    "T": slider(T, 1, T, "T (sequence length)")}
        super().__init__(controls, static)

    def page(self):
        # a head of size d_k takes the first d_k columns, as compute does
        return {"q_all": floats(self.q_all), "k_all": floats(self.k_all), "limit": self.limit}

    def compute(self, values):
        d = whole("d_k", values["head_size"], 1, self.max_head_size, BadInput, "Move the d_k slider.")
        T = whole("T", values["T"], 1, len(self.q_all), BadInput, "Move the T slider.")
        scores = self.q_all[:T, :d] @ self.k_all[:T, :d].T  # (T, d_k) @ (d_k, T) -> (T, T)
        return {"matrix": scores.numpy(), "scaled": (scores / math.sqrt(d)).numpy()}

    def alt(self, values, result):
        s, z = result["matrix"], result["scaled"]
        return (f"raw scores q·k for d_k={values['head_size']}, T={values['T']}: from {s.min():.1f} to "
                f"{s.max():.1f} (divided by √d_k: {z.min():.1f} to {z.max():.1f}); colours clipped at "
                f"±{self.limit:g}")


# ---- chapter 3 ---------------------------------------------------------------------------------


class ScalingExplorer(Explorer):
    """Chapter 3: d_k and scaling on/off -> softmax weights of unit-variance q and k, and Var(q·k).

    On purpose the idealized setting of the variance argument: q and k with independent unit-variance
    entries (the chapter's own q and k are narrower; the chapter shows by how much).
    """

    label = "softmax weights with and without scaling by 1/√d_k"
    figsize = (6.6, 3.3)
    n_samples = 2000  # pairs of q, k behind the variance curve

    def __init__(self, head_size=16, T=8, seed=1337, max_head_size=128, static=None):
        self.max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        T = whole("T", T, 1, 32)
        self.q = torch.randn(T, self.max_head_size, generator=g)  # (T, max_hs)
        self.k = torch.randn(T, self.max_head_size, generator=g)  # (T, max_hs)
        pairs = torch.randn(2, self.n_samples, self.max_head_size, generator=g)  # (2, N, max_hs)
        # column d-1 of the running sum is q·k for d_k = d: Var(q·k) for every d_k at once
        self.variance = torch.cumsum(pairs[0] * pairs[1], dim=1).var(dim=0).tolist()
        controls = {"head_size": slider(whole("head_size", head_size, 1, self.max_head_size), 1,
                                        self.max_head_size, "d_k (head_size)"),
                    "scale": toggle([("raw q·k", False), ("q·k / √d_k", True)], True, "scaling")}
        # the d_k of the variance curve: every power of two up to the largest
        self.d_values = [p for p in POWERS_OF_TWO if p <= self.max_head_size]
        super().__init__(controls, static)

    def page(self):
        return {"q": floats(self.q), "k": floats(self.k), "variance": floats(np.array(self.variance)),
                "d_values": self.d_values}

    def build(self, fig, stamped=True):
        fig.subplots_adjust(left=0.08, right=0.97, bottom=0.15, top=0.9, wspace=0.45)
        ax, ax_var = fig.subplots(1, 2, width_ratios=[1.3, 1])
        marker = plots.variance_panel(ax_var, self.d_values, [self.variance[n - 1] for n in self.d_values])
        return [plots.HeatmapArtist(ax, stamped=stamped)], [marker]

    def compute(self, values):
        d = whole("d_k", values["head_size"], 1, self.max_head_size, BadInput, "Move the d_k slider.")
        scores = self.q[:, :d] @ self.k[:, :d].T  # (T, d_k) @ (d_k, T) -> (T, T)
        if values["scale"]:
            scores = scores / math.sqrt(d)
        weights = F.softmax(scores, dim=-1).numpy()  # (T, T): no mask in this chapter
        return {"matrix": weights, "mean_max_weight": float(weights.max(axis=1).mean()),
                "mean_entropy_bits": float(entropy_bits(weights).mean()),
                "variance": self.variance[d - 1] / (d if values["scale"] else 1)}

    def draw(self, frame, result, values):
        frame.heatmaps[0].update(result["matrix"])
        frame.extra[0].set_data([values["head_size"]], [result["variance"]])

    def alt(self, values, result):
        T = len(result["matrix"])
        return (f"softmax weights for d_k={values['head_size']}, "
                f"{'scaled by 1/√d_k' if values['scale'] else 'not scaled'}: mean largest weight "
                f"{result['mean_max_weight']:.2f}, mean entropy {result['mean_entropy_bits']:.2f} bits "
                f"(uniform: {math.log2(T):.2f}); Var(q·k) = {result['variance']:.1f}")


# ---- chapter 4 ---------------------------------------------------------------------------------


class MaskingExplorer(Explorer):
    """Chapter 4: T and mask on/off -> softmax(q k^T / √d_k) with the future masked or not.

    ``q`` and ``k`` are one sequence's (T, head_size) queries and keys: the chapter's ``q[0]`` and
    ``k[0]``, so it starts on the chapter's own weights (all T positions, unless ``T`` says fewer);
    without them, 32 seeded unit-variance ones, starting at T = 8.
    """

    label = "attention weights with and without the causal mask"

    def __init__(self, q=None, k=None, T=None, seed=1337, static=None):
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        if (q is None) != (k is None):
            raise ValueError(f"give both q and k (one sequence's queries and keys, e.g. q[0] and k[0]), or neither; "
                             f"got only {'q' if k is None else 'k'}")
        self.q = torch.randn(32, 16, generator=g) if q is None else one_sequence("q", q, "(T, head_size)")  # (T, hs)
        self.k = torch.randn(32, 16, generator=g) if k is None else one_sequence("k", k, "(T, head_size)")  # (T, hs)
        if self.q.shape != self.k.shape:
            raise ValueError(f"q and k must be one sequence's (T, head_size) queries and keys, e.g. q[0] and "
                             f"k[0]; got shapes {tuple(self.q.shape)} and {tuple(self.k.shape)}")
        n = len(self.q)
        T = whole("T", (n if q is not None else 8) if T is None else T, 1, n)
        controls = {"T": slider(T, 1, n, "T (sequence length)"),
                    "mask": toggle([("no mask", False), ("causal mask", True)], True, "mask")}
        super().__init__(controls, static)

    def page(self):
        return {"q": floats(self.q), "k": floats(self.k)}

    def compute(self, values):
        T = whole("T", values["T"], 1, len(self.q), BadInput, "Move the T slider.")
        scores = self.q[:T] @ self.k[:T].T / math.sqrt(self.q.shape[1])  # (T, hs) @ (hs, T) -> (T, T)
        if values["mask"]:
            tril = torch.tril(torch.ones(T, T))  # (T, T): 1 where key j <= query i
            scores = scores.masked_fill(tril == 0, float("-inf"))  # future -> -inf
        return {"matrix": F.softmax(scores, dim=-1).numpy()}

    def alt(self, values, result):
        return f"attention weights for T={values['T']}, {'future masked' if values['mask'] else 'no mask'}"


# ---- chapter 5 ---------------------------------------------------------------------------------


def head_weights(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The attention weights a head applies to x (B, T, C), from its key, query and tril."""
    T = x.shape[1]
    k, q = head.key(x), head.query(x)  # (B, T, hs) each
    scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
    scores = scores.masked_fill(head.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
    return F.softmax(scores, dim=-1)  # (B, T, T)


# a learner's Head(...) or forward that runs longer than this is stopped, where it can be (see below)
HEAD_TIME_LIMIT_S = 2.0
HANG_NOTE = "If your Head ever hangs, interrupt the kernel (Kernel ▸ Interrupt), fix it and build the explorer again."


class _TooSlow(BaseException):
    # a BaseException, as KeyboardInterrupt is: a learner's own `except Exception` cannot swallow it
    pass


def can_stop_a_hang() -> bool:
    """True where a learner's Head call can be stopped after ``HEAD_TIME_LIMIT_S``: a ``SIGALRM`` timer
    exists (Linux, macOS, not Windows) and this is the main thread (the only one that receives it)."""
    return hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _time_limit(seconds: float):
    # raise _TooSlow in the block after `seconds`; the previous SIGALRM handler and timer are restored
    if not can_stop_a_hang():
        yield
        return

    def stop(signum, frame):
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, stop)
    started = time.monotonic()
    delay, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:  # restored even if the alarm rang just before it was stopped
            signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
            if delay:  # someone else's timer: what was left of it
                signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - started), 1e-6), interval)


def _learner_call(what: str, fn, *args):
    # fn(*args), a learner's code: stopped with a message past HEAD_TIME_LIMIT_S where that is possible
    try:
        with _time_limit(HEAD_TIME_LIMIT_S):
            return fn(*args)
    except _TooSlow:
        raise BadInput(f"{what} ran for more than {HEAD_TIME_LIMIT_S:g} s and was stopped: look for a loop that "
                       "never ends, or for far more work than the few matrix products of Fig. 6. The kernel is "
                       "fine: fix it, then build the explorer again.") from None


def _build_modules(Head, d: int, block_size: int, seed: int):
    # (token table, position table, head) under the seed, the notebook's random stream left alone;
    # whatever a learner's constructor does wrong becomes a message
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tok = nn.Embedding(len(vocab()), C)  # (vocab, C)
        pos = nn.Embedding(block_size, C)  # (block_size, C)
        try:
            return tok, pos, _learner_call(f"your Head(C={C}, head_size={d}, block_size={block_size})",
                                           Head, C, d, block_size)
        except BadInput:
            raise
        except NotImplementedError as err:
            raise BadInput(f"your Head is not written yet ({err}). Finish it, then build the explorer again.") from None
        except Exception as err:  # noqa: BLE001
            raise BadInput(f"Head(C={C}, head_size={d}, block_size={block_size}) raised {type(err).__name__}: "
                           f"{err}. Fix Head.__init__ and build the explorer again.") from None


def _checked_weights(head: nn.Module, x: torch.Tensor, learner: bool) -> torch.Tensor:
    # the weights from the head's parts; a learner's forward must return weights @ value(x)
    missing = [n for n in ("key", "query", "value", "tril") if not hasattr(head, n)]
    if missing:
        raise BadInput(f"your Head has no {', '.join(missing)}: name the projections key, query and value and "
                       "the mask buffer tril, as in Fig. 6, so the explorer can read the weights.")
    try:
        weights = head_weights(head, x)  # (1, T, T)
        expected = weights @ head.value(x)  # (1, T, T) @ (1, T, hs) -> (1, T, hs)
    except Exception as err:  # noqa: BLE001
        raise BadInput(f"could not compute the weights from your Head's key, query and tril "
                       f"({type(err).__name__}: {err}); check their sizes against Fig. 6.") from None
    if not learner:
        return weights
    try:
        out = _learner_call("your Head.forward", head, x)
    except BadInput:
        raise
    except NotImplementedError as err:
        raise BadInput(f"your Head.forward is not written yet ({err}). Finish it, then build the explorer "
                       "again.") from None
    except Exception as err:  # noqa: BLE001
        raise BadInput(f"your Head.forward raised {type(err).__name__}: {err}. Fix forward (compare with "
                       "Fig. 6), then build the explorer again.") from None
    if not isinstance(out, torch.Tensor):
        raise BadInput(f"your Head.forward returned {'None' if out is None else a_kind(out)}; expected a tensor of "
                       f"shape (B, T, head_size) = {tuple(expected.shape)}. Check that it ends with "
                       "return weights @ v.")
    got = tuple(out.shape)
    if got != tuple(expected.shape):
        raise BadInput(f"your Head.forward returned shape {got}; expected (B, T, head_size) = "
                       f"{tuple(expected.shape)}. Check that it returns weights @ v.")
    if not out.is_floating_point():
        raise BadInput(f"your Head.forward returned a {out.dtype} tensor; expected floating-point numbers "
                       "(torch.float32), the weights @ v of Fig. 6.")
    out = out.to(expected.dtype)  # float64 (or float16) with the right values is right
    bad = (~torch.isfinite(out)).nonzero()
    if len(bad):
        where = tuple(bad[0].tolist())
        raise BadInput(f"your Head.forward returned {out[where].item()} at {list(where)} (batch, position, "
                       f"feature): check the mask (masked_fill with -inf before softmax, never after) and the "
                       "softmax over dim=-1.")
    if not torch.allclose(out, expected, atol=1e-5, rtol=1e-4):
        raise BadInput(f"your Head.forward's output differs from weights @ value(x) (largest difference "
                       f"{float((out - expected).abs().max()):.3g}): check the 1/√d_k scaling, the mask with "
                       "-inf, and softmax over dim=-1.")
    return weights


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


def _start_sizes(start) -> tuple[int, int]:
    # the head_size and block_size of the chapter's (token_table, position_table, head), once checked
    wanted = "start must be the chapter's three modules (token_table, position_table, head)"
    if not isinstance(start, (tuple, list)) or len(start) != 3:
        got = plural(len(start), "item") if isinstance(start, (tuple, list)) else a_kind(start)
        raise ValueError(f"{wanted}; got {got}.")
    tok, pos, head = start
    for name, table, rows in (("token_table", tok, f"{len(vocab())}"), ("position_table", pos, "block_size")):
        if not isinstance(table, nn.Embedding) or table.embedding_dim != C:
            got = f"an nn.Embedding(..., {table.embedding_dim})" if isinstance(table, nn.Embedding) else a_kind(table)
            raise ValueError(f"{wanted}: its {name} must be an nn.Embedding({rows}, {C}); got {got}.")
    if tok.num_embeddings != len(vocab()):
        raise ValueError(f"{wanted}: its token_table must have one row per character of the vocabulary, "
                         f"nn.Embedding({len(vocab())}, {C}); got {tok.num_embeddings} rows.")
    key, tril = getattr(head, "key", None), getattr(head, "tril", None)
    if not isinstance(key, nn.Linear) or key.in_features != C or not isinstance(tril, torch.Tensor) or tril.dim() != 2:
        raise ValueError(f"{wanted}: its head must have a key, an nn.Linear({C}, head_size), and a tril buffer of "
                         f"shape (block_size, block_size), as in Fig. 6; got {a_kind(head)} without them.")
    if pos.num_embeddings < tril.shape[0]:
        raise ValueError(f"{wanted}: its position_table has {plural(pos.num_embeddings, 'row')} but the head's "
                         f"tril is for block_size={tril.shape[0]}: build both with the same block_size.")
    return key.out_features, tril.shape[0]


class HeadExplorer(Explorer):
    """Chapter 5: d_k, T, seed and a text -> the attention weights of one causal head.

    x is the text's characters through a token table plus a position table (``nn.Embedding(65, C)``
    and ``nn.Embedding(block_size, C)``), built with the head under ``torch.manual_seed(seed)``.
    ``Head`` is the learner's class, built as ``Head(C, head_size, block_size)`` (default:
    :class:`ReferenceHead`, Fig. 6); its ``forward`` must return ``weights @ value(x)``.
    ``start=(token_table, position_table, head)`` starts on the chapter's own modules (their d_k and
    block size, shown for the starting seed).

    A learner's ``Head`` that fails (raises, returns the wrong thing, runs past ``HEAD_TIME_LIMIT_S``)
    is a message in the explorer, never an exception: the learner fixes it and builds the explorer
    again. With ``static=True`` such a head draws no pictures in advance: the explorer is live only.
    """

    label = "attention weights of one causal head"
    figsize = (4.1, 3.5)

    def __init__(self, Head=None, text="First Citizen:", head_size=16, block_size=32, seed=1337, start=None,
                 max_head_size=128, static=None):
        if Head is not None and not callable(Head):
            raise ValueError(f"Head must be a class built as Head(C, head_size, block_size); got {Head!r}")
        self.Head, self.learner = Head or ReferenceHead, Head is not None
        self.max_head_size = max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        seed, self._modules, self._start = whole("seed", seed, 0, 2**63 - 1), {}, None
        if start is not None:
            head_size, block_size = _start_sizes(start)
            self._modules[(head_size, seed)] = tuple(start)
        self.block_size = whole("block_size", block_size, 1, 256)
        try:
            _text_ids(text, self.block_size)
        except BadInput as err:
            raise ValueError(str(err)) from None
        n = len(text)
        controls = {
            "head_size": slider(whole("head_size", head_size, 1, max_head_size), 1, max_head_size, "d_k (head_size)"),
            "T": slider(n, 1, self.block_size, "T (characters used)"),
            "seed": NumberBox(value=seed, description="seed", layout=widgets.Layout(width="170px")),
            "text": TextBox(value=text, description="text", placeholder="type characters of Shakespeare"),
        }
        controls["text"].observe(self._text_changed, names="value")
        self._start = (head_size, seed) if start is not None else None  # kept in _modules for good
        super().__init__(controls, static)

    def page(self):
        # the page builds a head from a seed as torch does (engine/attention.js, buildHead), in
        # ReferenceHead's order: key, query, value. A Head built otherwise has no page config: the
        # book then shows this explorer's saved picture, and says so
        probe = [_build_modules(H, 3, self.block_size, 0) for H in (self.Head, ReferenceHead)]
        parts = [[*mods[:2], mods[2].key, mods[2].query, mods[2].value] for mods in probe]
        if not all(isinstance(a, nn.Module) and torch.equal(a.weight, b.weight) for a, b in zip(*parts)):
            raise BadInput(f"{getattr(self.Head, '__name__', 'Head')} does not build its key, query and value "
                           "as ReferenceHead does (three nn.Linear(C, head_size, bias=False), in that order)")
        config = {"block_size": self.block_size, "max_head_size": self.max_head_size, "vocab": "".join(vocab()),
                  "who": self._who()}
        if self._start is not None:  # the chapter's own modules: their projections per character and position
            tok, pos, head = self._modules[self._start]
            with torch.no_grad():
                config["start"] = {"head_size": self._start[0], "seed": str(self._start[1]),
                                   **_projections(tok.weight, pos.weight, head)}
        return config

    def _who(self) -> str:
        return f"a {getattr(self.Head, '__name__', 'Head')}" if self.learner else "one causal head"

    def _text_changed(self, change):
        # T follows the text's length when the explorer can draw the text, so typing extends the
        # picture; a text it cannot draw leaves T as the picture still shown has it
        try:
            _text_ids(change["new"], self.block_size)
        except BadInput:
            return
        self.set_quietly("T", len(change["new"]))

    def compute(self, values):
        d = whole("d_k", values["head_size"], 1, self.max_head_size, BadInput, "Move the d_k slider.")
        seed = whole("seed", values["seed"], 0, 2**63 - 1, BadInput, "Type a seed of 0 or more.")
        ids = _text_ids(values["text"], self.block_size)
        T = whole("T", values["T"], 1, self.block_size, BadInput, f"Pick T from 1 to block_size={self.block_size}.")
        if T > len(ids):
            raise BadInput(f"T={T} but the text has only {plural(len(ids), 'character')}: type more text or lower T.")
        try:
            if (d, seed) not in self._modules:  # the chapter's own modules (start) stay, whatever comes after
                kept = {k: m for k, m in self._modules.items() if k != self._start}
                self._modules = {**({self._start: self._modules[self._start]} if self._start else {}),
                                 **dict(list(kept.items())[-7:]), (d, seed): _build_modules(
                                     self.Head, d, self.block_size, seed)}  # the last eight (d_k, seed)
            tok, pos, head = self._modules[(d, seed)]
            with torch.no_grad():
                x = tok(torch.tensor([ids[:T]])) + pos(torch.arange(T))  # (1, T, C) + (T, C) -> (1, T, C)
                weights = _checked_weights(head, x, self.learner)  # (1, T, T)
        except BadInput as err:
            if self.learner and not can_stop_a_hang():  # nothing stops a Head that never returns here
                raise BadInput(f"{err} {HANG_NOTE}") from None
            raise
        return {"matrix": weights[0].numpy(), "tokens": values["text"][:T]}

    def alt(self, values, result):
        return (f"attention weights of {self._who()}, d_k={values['head_size']}, seed={values['seed']}, over the "
                f"{plural(len(result['tokens']), 'character')} {result['tokens']!r}")


# ---- chapter 6 ---------------------------------------------------------------------------------


class TrainedExplorer(Explorer):
    """Chapter 6: a line of the play, or typed text, and trained/untrained -> the weights of the head
    of chapter 6's model.

    ``trained`` and ``untrained`` are the model after and before training (anything with its
    ``token_table``, ``position_table`` and ``head``; default: the shipped ones,
    :func:`attention_lab.training.load_trained`). ``lines`` are offered in a menu, in a kernel and in
    the hosted book's page (default: the first six lines of the validation text that fit the block
    size); it starts on the first line, trained. Typed text replaces the line; T is its length.
    """

    label = "attention weights of chapter 6's head, trained or untrained"
    figsize = (6.0, 5.4)  # room for 32 characters on each axis

    def __init__(self, trained=None, untrained=None, lines=None, static=None):
        from attention_lab import text, training

        shipped = training.load_trained() if trained is None or untrained is None else None
        self.models = {True: trained or shipped.trained, False: untrained or shipped.untrained}
        for name, model in (("trained", self.models[True]), ("untrained", self.models[False])):
            missing = [part for part in ("token_table", "position_table", "head") if not hasattr(model, part)]
            if hasattr(model, "head"):
                missing += [f"head.{part}" for part in ("key", "query", "tril") if not hasattr(model.head, part)]
            if missing:
                raise ValueError(f"{name} must be chapter 6's model, with a token_table, a position_table and a head "
                                 f"(key, query, tril), as attention_lab.training.load_trained() gives; got "
                                 f"{a_kind(model)} without {', '.join(missing)}.")
        self.block_size = self.models[True].position_table.weight.shape[0]
        if lines is None:
            lines = list(dict.fromkeys(text.validation_lines(self.block_size)))[:6]
        if isinstance(lines, str):
            raise ValueError(f"lines must be a list of lines, such as [{lines!r}]; got the string {lines!r}")
        lines = list(lines)
        if not lines or len(set(lines)) != len(lines):
            raise ValueError(f"lines must list at least one line, each once; got {lines!r}")
        for line in lines:
            try:
                _text_ids(line, self.block_size)
            except BadInput as err:
                raise ValueError(f"line {line!r}: {err}") from None
        controls = {"line": Menu(options=[(s, s) for s in lines] + [("(your own text)", "")],
                                 value=lines[0], description="line"),
                    "text": TextBox(value=lines[0], description="text",
                                    placeholder=f"up to {self.block_size} characters"),
                    "trained": toggle([("trained", True), ("untrained", False)], True, "head")}
        # a line chosen in the menu goes into the text box; typing there sets the menu to "(your own text)"
        controls["line"].observe(lambda c: c["new"] and self.set_quietly("text", c["new"]), names="value")
        controls["text"].observe(lambda c: c["new"] != controls["line"].value and self.set_quietly("line", ""),
                                 names="value")
        self.lines = lines
        super().__init__(controls, static)

    def page(self):
        models = {name: _projections(m.token_table.weight, m.position_table.weight, m.head)
                  for name, m in (("trained", self.models[True]), ("untrained", self.models[False]))}
        return {"block_size": self.block_size, "vocab": "".join(vocab()), "lines": self.lines, "models": models}

    def compute(self, values):
        chars = values["line"] or values["text"]
        ids, model = _text_ids(chars, self.block_size), self.models[bool(values["trained"])]
        with torch.no_grad():
            x = model.token_table(torch.tensor([ids])) + model.position_table(torch.arange(len(ids)))  # (1, T, C)
            return {"matrix": head_weights(model.head, x)[0].numpy(), "tokens": chars}  # (T, T)

    def alt(self, values, result):
        w, T = result["matrix"], len(result["tokens"])
        back = (w * np.maximum(np.subtract.outer(np.arange(T), np.arange(T)), 0)).sum(-1).mean()
        return (f"attention weights of the {'trained' if values['trained'] else 'untrained'} head over the "
                f"{plural(T, 'character')} {result['tokens']!r}: on average a row puts {np.trace(w) / T:.2f} of its "
                f"weight on its own character and looks {back:.2f} characters back")


# the names the chapters call
average_explorer = AverageExplorer
scores_explorer = ScoresExplorer
scaling_explorer = ScalingExplorer
masking_explorer = MaskingExplorer
head_explorer = HeadExplorer
trained_explorer = TrainedExplorer
