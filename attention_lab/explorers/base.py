"""The base of every chapter's explorer (an anywidget whose view is the page engine), and what several
chapters share. CONTRIBUTING.md, "The explorers", says how they are drawn and tested.
"""

from __future__ import annotations

import base64
import io
import json
import math
import textwrap

import anywidget
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import traitlets

from attention_lab import plots
from attention_lab.explorers import view
from attention_lab.plots import heatmaps
from attention_lab.explorers.controls import MESSAGES, BadInput, Control, a_kind, say, shown
from attention_lab.text import encode, validation_lines, vocab

C = 384  # the lesson's d_model: width of x
# the key of an explorer output's metadata that holds its config (book/_ext/page_explorers.py reads it)
PAGE_KEY = "attention_lab_page"
# under the picture a front end without widgets shows (a notebook viewer, nbconvert's HTML)
STATIC_NOTE = ("The picture at the start. Run this cell in JupyterLab, Notebook 7, VS Code, Binder or Colab, or "
               "open the hosted book, to move its controls.")


class Explorer(anywidget.AnyWidget):
    """Controls beside an attention picture, drawn by the page engine in every front end.

    A subclass sets ``name`` (its engine module, ``static/engine/explorers/NAME.js``), ``kind``
    ("weights" or "scores"), ``label`` (one line: what it shows), ``caption`` (a template of :func:`say`,
    or ``(control, {value: template})`` when the words follow a toggle) and ``messages`` (its own
    templates, beside :data:`~attention_lab.explorers.controls.MESSAGES`). It builds its state, then calls
    ``super().__init__(controls, values)``, and provides ``compute(values) -> dict`` ("matrix": the (T, T)
    array shown; "tokens": the characters on its axes; "fields": the numbers its caption names; raise
    :class:`BadInput` for values it cannot draw), ``page()`` (the tensors the engine needs) and, where
    its caption names them, ``constants()``. ``follow(name, values)`` gives the values a change moves
    with it (chapter 5's T follows its text).
    """

    name = "explorer"
    kind = "weights"
    label = "explorer"
    caption = ""
    messages: dict = {}
    figsize = (3.9, 3.2)
    # the page's cells: "max_cell" (rem, default 2.5), "per_row" (pictures side by side on a wide screen),
    # "numbers_hidden" (the numbers in the trace panel only)
    layout: dict = {}

    config = traitlets.Dict().tag(sync=True)  # what the view starts from: controls, words, tensors
    values = traitlets.Dict().tag(sync=True)  # the controls' values, set by the reader or from code
    computed = traitlets.Dict().tag(sync=True)  # a picture only the kernel can compute (a learner's Head)

    _esm = property(lambda self: view.esm())
    _css = property(lambda self: view.css())

    start_may_fail = False  # True: a start that cannot be drawn is a message, not a ValueError (a learner's Head)

    def __init__(self, controls: list[Control], values: dict):
        self.controls = {c.name: c for c in controls}
        self.matrix = self.result = None
        self.message = self.shown = ""
        self.renders = 0
        values = {name: self.controls[name].accept(value) for name, value in values.items()}
        self._draw(values)
        if self.result is None and not self.start_may_fail:
            raise ValueError(self.message)
        super().__init__(config=self._config(values), values=values)
        self._answer(values)
        self.observe(lambda change: self._draw(change["new"], send=True), names="values")

    # ---- for subclasses -------------------------------------------------------------------------

    def compute(self, values: dict) -> dict:
        raise NotImplementedError

    def page(self) -> dict:
        """The chapter's tensors and sizes the engine needs (``static/engine/explorers/NAME.js``)."""
        return {}

    def constants(self) -> dict:
        """Fields the caption and messages name that no control holds."""
        return {}

    def follow(self, name: str, values: dict) -> dict:
        return {}

    def draw_picture(self, fig, values: dict, result: dict) -> None:
        """The picture shown where no widget can be: the heatmap of ``result``."""
        ax = fig.add_subplot()
        plots.attention_heatmap(result["matrix"], ax=ax, tokens=result.get("tokens"), kind=self.kind,
                                limit=self.constants().get("limit"))

    # ---- the reader's and the code's changes ---------------------------------------------------

    def set(self, **changes) -> str:
        """Set controls by name, as the reader does in the page: ``ex.set(T=5)``. Returns "" or, for a value
        a control cannot take, the message the page shows (the explorer is then left as it was)."""
        new = dict(self.values)
        try:
            for name, raw in changes.items():
                if name not in self.controls:
                    raise BadInput(say(MESSAGES["no_control"], got=shown(name), names=", ".join(self.controls)))
                new[name] = self.controls[name].accept(raw)
                new.update(self.follow(name, new))
        except BadInput as err:
            self.message = str(err)
            return str(err)
        self.values = new  # the view draws them too; _draw computes them here
        return ""

    def alt(self, values: dict, result: dict) -> str:
        """The caption's words for ``values`` and their ``result``: what the picture shows."""
        template = self.caption
        if isinstance(template, tuple):
            by, cases = template
            template = cases[values[by]]
        tokens = {"tokens": result["tokens"]} if "tokens" in result else {}
        return say(template, **{**values, **self.constants(), **tokens, **result.get("fields", {})})

    def _draw(self, values: dict, send: bool = False) -> None:
        # compute what the view shows for these values: ex.matrix, ex.result, the caption and the message
        try:
            with torch.no_grad():
                result = self.compute(values)
        except BadInput as err:
            self.message = str(err)
        else:
            self.matrix, self.result = result["matrix"], result
            self.shown = self.alt(values, result)
            self.renders += 1
            self.message = ""
        if send:
            self._answer(values)

    def _answer(self, values: dict) -> None:
        # an explorer the kernel computes (a learner's Head): the view draws what the kernel found
        if self.config.get("kernel"):
            parts = self.result.get("parts") if self.result is not None and not self.message else None
            self.computed = {"values": values, "message": self.message, **({"parts": parts} if parts else {})}

    # ---- the config, and what a notebook stores ---------------------------------------------------

    def _config(self, values: dict) -> dict:
        caption = self.caption
        if isinstance(caption, tuple):
            caption = {"by": caption[0], "cases": {json.dumps(v): t for v, t in caption[1].items()}}
        _, bar, cells = heatmaps.KINDS[self.kind]
        picture = {"kind": self.kind, "limit": self.constants().get("limit"), "colourbar": bar,
                   "cell_format": cells.strip("{}:"), "numbers_up_to": heatmaps.ANNOTATE_MAX_T,
                   "visible": heatmaps.VISIBLE, **self.layout}
        return {"explorer": self.name, "label": self.label, "values": values, "picture": picture,
                "controls": [c.spec() for c in self.controls.values()], "caption": caption,
                "messages": {**MESSAGES, **self.messages}, "constants": self.constants(), **self.page(),
                "colours": view.colour_maps()}

    def __repr__(self) -> str:
        # what a notebook stores as the cell's text output: stable from run to run
        shown = {k: int(v) if self.controls[k].kind == "seed" else v for k, v in self.values.items()}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    def picture(self) -> bytes:
        """The PNG of the picture the explorer opens on, with a line saying where it is live."""
        fig = plots.new_figure(self.figsize)
        if self.result is not None:
            self.draw_picture(fig, self.values, self.result)
        else:  # a learner's Head that cannot be drawn: its message instead
            fig.text(0.5, 0.6, _wrapped(self.message, self.figsize[0]), ha="center", va="center", wrap=True)
        # the note under the figure; a tight box around everything drawn keeps it, and every label, whole
        note = (f"Showing: {self.shown}. " if self.result is not None else "") + STATIC_NOTE
        fig.text(0.5, -0.02, _wrapped(note, self.figsize[0]), ha="center", va="top",
                 fontsize=plots.TICK_PX * 72 / plots.CSS_DPI, color="#333333")
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=plots.CSS_DPI * plots.SCALE, metadata={"Software": None},
                    bbox_inches="tight", pad_inches=0.08)
        return out.getvalue()

    def _repr_mimebundle_(self, **kwargs):
        # the view (anywidget's bundle, with Colab's widget manager named where it runs), the text nbval
        # compares, the start picture for a front end without widgets, and the config the book reads
        data, metadata = super()._repr_mimebundle_(**kwargs)
        data = {**data, "text/plain": repr(self), "image/png": base64.b64encode(self.picture()).decode("ascii")}
        # the config without the colour maps, which the book adds to every explorer it shows
        return data, {**metadata, PAGE_KEY: {k: v for k, v in self.config.items() if k != "colours"}}


def _wrapped(text: str, inches: float) -> str:
    # the note in lines that fit the figure's width, its words whole
    return textwrap.fill(" ".join(text.split()), max(30, int(inches * 15)), break_long_words=False,
                         break_on_hyphens=False)


# ---- shared by several chapters ------------------------------------------------------------------


GRID = 2.0**-30  # the page's numbers are multiples of this, then float32 (see snap)


def snap(t) -> torch.Tensor:
    """``t`` as the page holds it: rounded to a multiple of :data:`GRID`, then to float32, so numbers computed
    in float64 on CPUs that sum in another order agree (CONTRIBUTING.md, "Regenerating outputs")."""
    t = torch.as_tensor(t).detach().cpu().double()
    return (torch.round(t / GRID) * GRID).float()


def floats(t) -> dict:
    """A tensor for the page (:func:`snap`): its shape and its little-endian float32 bytes in base64."""
    a = np.ascontiguousarray(snap(t).numpy(), dtype="<f4")
    return {"shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode("ascii")}


def unpack(packed: dict) -> torch.Tensor:
    """A tensor from :func:`floats`' {shape, b64}."""
    data = np.frombuffer(base64.b64decode(packed["b64"]), dtype="<f4").reshape(packed["shape"])
    return torch.from_numpy(data.copy())


def text_rows(tables: dict, part: str, ids: list[int]) -> torch.Tensor:
    """A text's ``part`` ("query", ...) from :func:`projections`' tables, as the engine computes it: each
    character's row plus its position's, summed in float64, stored as float32 (chapters 6 and 7)."""
    tok, pos = unpack(tables[f"tok_{part}"]), unpack(tables[f"pos_{part}"])
    return (tok[ids].double() + pos[: len(ids)].double()).float()


def text_ids(chars, block_size: int) -> list[int]:
    """The ids of a text the explorer can draw, or :class:`BadInput` saying what is wrong with it."""
    if not isinstance(chars, str):
        raise BadInput(f"the text must be a string of characters, such as 'First Citizen:'; got {chars!r} "
                       f"({type(chars).__name__}).")
    if not chars:
        raise BadInput(MESSAGES["text_empty"])
    if len(chars) > block_size:
        raise BadInput(say(MESSAGES["text_too_long"], n=len(chars), block_size=block_size))
    try:
        return encode(chars)
    except ValueError as err:
        raise BadInput(f"{err}.") from None


def checked_lines(lines, block_size: int, default: int) -> list[str]:
    """The lines an explorer's menu offers, each one it can draw, or ValueError saying which is not; with
    ``lines`` None, the first ``default`` distinct lines of the validation text that fit ``block_size``."""
    if lines is None:
        return list(dict.fromkeys(validation_lines(block_size)))[:default]
    if isinstance(lines, str):
        raise ValueError(f"lines must be a list of lines, such as [{lines!r}]; got the string {lines!r}")
    lines = list(lines)
    if not lines or len(set(lines)) != len(lines):
        raise ValueError(f"lines must list at least one line, each once; got {lines!r}")
    for line in lines:
        try:
            text_ids(line, block_size)
        except BadInput as err:
            raise ValueError(f"line {line!r}: {err}") from None
    return lines


def checked_model(name: str, model, parts: dict, wanted: str):
    """``model`` if it has each of ``parts`` and each part what ``parts`` lists for it, else ValueError:
    ``name`` must be ``wanted``, and what it lacks (chapters 6 and 7)."""
    missing = [part for part in parts if not hasattr(model, part)]
    missing += [f"{part}.{inner}" for part, inners in parts.items() if hasattr(model, part)
                for inner in inners if not hasattr(getattr(model, part), inner)]
    if missing:
        raise ValueError(f"{name} must be {wanted}; got {a_kind(model)} without {', '.join(missing)}.")
    return model


def follow_line(explorer, name, values) -> dict:
    """An explorer's ``follow`` for a menu of lines beside a text box (chapters 6 and 7): a line chosen in
    the menu goes into the text box; typing there sets the menu to "(your own text)"."""
    if name == "line" and values["line"]:
        return {"text": values["line"]}
    if name == "text" and values["text"] != values["line"]:
        return {"line": ""}
    return {}


def vocabulary() -> dict:
    """The vocabulary as the engine checks a text against it: its characters and the marks the message lists."""
    chars = "".join(vocab())
    return {"vocab": chars, "marks": "".join(ch for ch in chars if not ch.isalnum() and not ch.isspace())}


def projections(tok: torch.Tensor, pos: torch.Tensor, head: nn.Module) -> dict:
    """Each character's and each position's key, query and value, (vocab, hs) and (block_size, hs): far
    fewer numbers than the tables of width C. x = tok + pos and a projection is linear, so a position's
    q = tok_q[id] + pos_q[t]; a bias, if there is one, is added once, to the character's part."""
    out = {}
    for part in ("key", "query", "value"):
        layer = getattr(head, part)
        w = layer.weight.detach().double()
        bias = layer.bias.detach().double() if getattr(layer, "bias", None) is not None else 0.0
        out[f"tok_{part}"] = floats(tok.detach().double() @ w.T + bias)
        out[f"pos_{part}"] = floats(pos.detach().double() @ w.T)
    return out


def head_weights(head: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The attention weights a head applies to x (B, T, C), from its key, query and tril."""
    T = x.shape[1]
    k, q = head.key(x), head.query(x)  # (B, T, hs) each
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
    scores = scores.masked_fill(head.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
    return F.softmax(scores, dim=-1)  # (B, T, T)


def weights_of(q: torch.Tensor, k: torch.Tensor, mask: bool = True, scale: bool = True) -> torch.Tensor:
    """softmax(q @ k.T / √d_k) of one sequence's (T, d_k) queries and keys, in float64 as the engine sums,
    rounded to float32: the numbers the page shows."""
    q, k = q.double(), k.double()
    scores = q @ k.T  # (T, d_k) @ (d_k, T) -> (T, T)
    if scale:
        scores = scores / math.sqrt(q.shape[1])
    if mask:
        T = q.shape[0]
        scores = scores.masked_fill(torch.tril(torch.ones(T, T, dtype=torch.bool)) == 0, float("-inf"))
    return F.softmax(scores, dim=-1).float()
