"""The explorers' controls, and the checks of what an explorer is given, in the reader's words.

``slider`` and ``toggle`` (and the ``NumberBox``, ``TextBox`` and ``Menu`` classes) are ipywidgets
controls that refuse, with a message naming the control, what it takes and what was given, a value set
from code that they cannot take (:class:`Checked`); a toggle marks its selected button with a check icon.
``whole``, ``positive`` and ``one_sequence`` check an explorer's arguments the same way. Used by
every chapter's explorer (:mod:`attention_lab.explorers`).
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import torch
from traitlets import TraitError


def whole(name: str, value, lo: int, hi: int, error=ValueError, fix: str = "") -> int:
    """``value`` as an int in ``lo..hi``, else ``error`` naming it, expected vs got, and the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise error(f"{name} must be a whole number; got {value!r}. {fix}".strip())
    if not lo <= value <= hi:
        raise error(f"{name}={value} is out of range: it must be from {lo} to {hi}. {fix}".strip())
    return int(value)


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless n is 1: "1 character", "3 characters"."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def positive(name: str, value, example: str) -> float:
    """``value`` as a finite float above 0, else ValueError naming it, expected vs got, and the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive, finite number; got {value!r}. Try {name}={example}.")
    return float(value)


def a_kind(obj) -> str:
    """What ``obj`` is, for a message: "a list", "an int", "a numpy.ndarray", "a Head"."""
    kind = type(obj).__name__
    if isinstance(obj, (np.ndarray, torch.Tensor)):
        kind = f"{type(obj).__module__}.{kind}"
    return ("an " if kind[0].lower() in "aeiou" else "a ") + kind


def one_sequence(name: str, t, shape: str) -> torch.Tensor:
    """``t``, one sequence of ``shape`` such as "(T, C)", as a float tensor; else ValueError saying what
    is wrong with it (not a tensor, not 2-D, empty, complex, or holding nan or inf, and where)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor of shape {shape}; got {a_kind(t)}. Convert it with "
                         f"torch.tensor({name}, dtype=torch.float32).")
    if t.is_complex():
        raise ValueError(f"{name} must hold real numbers; got a {t.dtype} tensor. Pass {name}.real, or real numbers.")
    if t.dim() != 2:
        raise ValueError(f"{name} must be one sequence of shape {shape}, e.g. {name}[0]; got shape {tuple(t.shape)}")
    if 0 in t.shape:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)}): it needs at least one position (a row) "
                         f"and one number per position, shape {shape}.")
    t = t.detach().float()
    bad = (~torch.isfinite(t)).nonzero()
    if len(bad):
        i, j = bad[0].tolist()
        raise ValueError(f"{name} holds {t[i, j].item()} at {name}[{i}, {j}] (position {i}; "
                         f"{plural(len(bad), 'number')} of {name} {'is' if len(bad) == 1 else 'are'} nan or inf in "
                         f"all): the picture would show nan there. Give {name} finite numbers only "
                         f"(torch.isfinite({name}).all() is True).")
    return t


def option_pairs(ctrl) -> list[tuple]:
    """A menu's or toggle's options as (label, value) pairs."""
    return [(o, o) if isinstance(o, str) else tuple(o) for o in ctrl.options]


class Checked:
    """Mixed into an explorer's controls: a value set from code that the control cannot take (a str on
    a slider, a number out of its range, an option it does not offer) raises a TraitError that names
    the control, what was given and what it takes, and the explorer's message area says so too;
    ipywidgets would raise in its own words, or clamp or truncate the number without a word. Values
    the reader sets in the page arrive through ``set_state`` and are not checked here again."""

    kind = "control"
    owner = None  # (the control's name, the explorer's message function), set by the explorer

    def refusal(self, value) -> str:
        """Why ``value`` cannot be set, as the end of a sentence about this control; "" if it can."""
        return ""

    def __setattr__(self, name, value):
        problem = self.refusal(value) if name == "value" and self.owner else ""
        if problem:
            key, show = self.owner
            msg = f'controls["{key}"], the {self.kind} "{self.description}", {problem}'
            show(msg)
            raise TraitError(msg)
        super().__setattr__(name, value)


def _not_whole(value) -> bool:
    return isinstance(value, bool) or not isinstance(value, (int, np.integer))


class Slider(Checked, widgets.IntSlider):
    kind = "slider"

    def refusal(self, value):
        if _not_whole(value) or not self.min <= value <= self.max:
            return (f"takes a whole number from {self.min} to {self.max}; got {value!r} ({type(value).__name__}). "
                    f"Set it to one in that range, such as {self.value}.")
        return ""


class NumberBox(Checked, widgets.IntText):
    kind = "number box"

    def refusal(self, value):
        if _not_whole(value):
            return f"takes a whole number; got {value!r} ({type(value).__name__}). Set it to one, such as {self.value}."
        return ""


class TextBox(Checked, widgets.Text):
    kind = "text box"

    def refusal(self, value):
        if not isinstance(value, str):
            return (f"takes a string of characters; got {value!r} ({type(value).__name__}). "
                    "Set it to a string, such as 'First Citizen:'.")
        return ""


class _Choice(Checked):
    def refusal(self, value):
        pairs = option_pairs(self)
        if value is None or value not in [v for _, v in pairs]:
            shown = ", ".join(repr(v) if label == v else f"{v!r} (shown as {label!r})" for label, v in pairs)
            return f"takes one of {shown}; got {value!r}. Set it to one of those values."
        return ""


class Menu(_Choice, widgets.Dropdown):
    kind = "menu"


class Toggle(_Choice, widgets.ToggleButtons):
    """Toggle buttons whose selected button carries a check mark (its ``icons``, kept in step with the
    selection), so that it stands out where the book's CSS, which colours it, is absent (JupyterLab,
    Colab). Only a live control: without a kernel nothing would move the mark."""

    kind = "buttons"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._mark()
        self.observe(self._mark, names="index")

    def _mark(self, change=None):
        self.icons = ["check" if i == self.index else "" for i in range(len(self.options))]


def slider(value: int, lo: int, hi: int, description: str) -> Slider:
    return Slider(value=value, min=lo, max=hi, description=description, style={"description_width": "initial"})


def toggle(options, value, description: str) -> Toggle:
    return Toggle(options=options, value=value, description=description)
