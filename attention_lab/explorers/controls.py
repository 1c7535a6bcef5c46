"""An explorer's controls and words, written once: a :class:`Control` travels to the page in the config,
where the engine builds it; every message is a template of :data:`MESSAGES` filled by :func:`say`, as the
page's ``format.js`` fills it. Then the argument checks of the explorers' constructors (ValueError, in the
reader's words). See CONTRIBUTING.md, "The explorers".
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np
import torch

from attention_lab import text

MAX_SEED = 2**63 - 1  # torch.manual_seed takes any int up to this

# the words every explorer shares; {field} is filled by say(), {n:word} says "1 word" or "n words",
# {s!r} is Python's repr() of a string (of each item, joined by ", ", for a list)
MESSAGES = {
    "range": "{label} must be a whole number from {lo} to {hi}; got {got}. Type one in that range, or move "
             "the slider.",
    "nothing": "nothing",  # {got} of an empty number box
    "unreadable": "something that is not a number",  # {got} of a number box the browser cannot read ("--5")
    "seed": "seed must be a whole number from 0 to {hi}; got {got}. Type a seed of 0 or more.",
    "seed_too_large": "seed must be a whole number from 0 to {hi}; got {got}. Type a smaller seed.",
    "text": "{label} must be a string of characters; got {got}.",
    "choice": "{label} must be one of {names}; got {got}.",
    "no_control": "this explorer has no control {got}; its controls are {names}.",
    "text_empty": "the text is empty: type at least one character (for example 'First Citizen:').",
    "text_too_long": "the text has {n} characters, above block_size={block_size}, the longest sequence this "
                     "head attends over: shorten it to at most {block_size}.",
    "not_in_vocab": text.NOT_IN_VOCAB + ".",  # attention_lab.text.encode's words
    "T_above_text": "T={T} but the text has only {n:character}: type more text or lower T.",
}

_FIELD = re.compile(r"\{(\w+)(!r)?(?::([^{}]*))?\}")


class BadInput(Exception):
    """A value the reader chose that cannot be drawn; ``str()`` says what is wrong and how to fix it."""


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless n is 1: "1 character", "3 characters"."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def say(template: str, **fields) -> str:
    """``template`` with its fields filled: ``{T}``, ``{x:.2f}`` (a format spec), ``{n:character}`` (a
    count and its word), ``{s!r}`` (repr). ``format.js`` fills the same templates in the page."""
    def one(m):
        name, as_repr, spec = m.groups()
        value = fields[name]
        if as_repr:
            return ", ".join(map(repr, value)) if isinstance(value, (list, tuple)) else repr(value)
        if spec and spec.isalpha() and len(spec) > 1:  # a word, not a one-letter format type such as g
            return plural(value, spec)
        return format(value, spec or "")
    return _FIELD.sub(one, template)


def shown(raw) -> str:
    """A value as a message quotes it: JSON, as the page's JSON.stringify writes it."""
    return json.dumps(raw if isinstance(raw, (str, bool)) or raw is None else str(raw), ensure_ascii=False)


@dataclass(frozen=True)
class Control:
    """One control of an explorer: ``kind`` is "range" (a slider with a number box, ``lo``..``hi``),
    "toggle" or "select" (``options``: (label, value) pairs), "text" or "seed" (a text box)."""

    name: str
    kind: str
    label: str
    lo: int = 0
    hi: int = 0
    options: tuple = ()
    placeholder: str = ""

    def spec(self) -> dict:
        """The control as the page's config carries it."""
        spec = {"name": self.name, "kind": self.kind, "label": self.label}
        if self.kind == "range":
            spec.update(min=self.lo, max=self.hi)
        if self.options:
            spec["options"] = [list(o) for o in self.options]
        if self.placeholder:
            spec["placeholder"] = self.placeholder
        return spec

    def accept(self, raw):
        """The value this control takes for ``raw`` (a value set from code, or sent by the page), or
        :class:`BadInput` in the words its box in the page shows (mount.js's ``accept``)."""
        if self.kind == "range":
            number = _whole(raw)
            if number is not None and self.lo <= number <= self.hi:
                return number
            got = MESSAGES["nothing"] if isinstance(raw, str) and not raw.strip() else shown(raw)
            raise BadInput(say(MESSAGES["range"], label=self.label, lo=self.lo, hi=self.hi, got=got))
        if self.kind == "seed":
            text = str(raw).strip() if isinstance(raw, (str, int)) and not isinstance(raw, bool) else ""
            if text.isdigit() and text.isascii():
                if int(text) <= MAX_SEED:
                    return str(int(text))
                raise BadInput(say(MESSAGES["seed_too_large"], hi=MAX_SEED, got=shown(raw)))
            raise BadInput(say(MESSAGES["seed"], hi=MAX_SEED, got=shown(raw)))
        if self.kind == "text":
            if isinstance(raw, str):
                return raw
            raise BadInput(say(MESSAGES["text"], label=self.label, got=shown(raw)))
        values = [v for _, v in self.options]
        if any(raw == v and type(raw) is type(v) for v in values):
            return raw
        names = ", ".join(json.dumps(v, ensure_ascii=False) for v in values)
        raise BadInput(say(MESSAGES["choice"], label=self.label, names=names, got=shown(raw)))


def _whole(raw) -> int | None:
    # a whole number given as an int, a float such as 8.0, or its digits as text (as a number box gives)
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, np.integer)) or isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and re.fullmatch(r"\s*-?\d+\s*", raw):
        return int(raw)
    return None


# ---- the controls several explorers share ------------------------------------------------------------

def d_k(hi: int) -> Control:
    return Control("head_size", "range", "d_k (head_size)", 1, hi)


def length(hi: int, label: str = "T (sequence length)") -> Control:
    return Control("T", "range", label, 1, hi)


def toggle(name: str, label: str, options) -> Control:
    return Control(name, "toggle", label, options=tuple(tuple(o) for o in options))


def seed_box() -> Control:
    return Control("seed", "seed", "seed")


def text_box(placeholder: str) -> Control:
    return Control("text", "text", "text", placeholder=placeholder)


# ---- the explorers' arguments ------------------------------------------------------------------------

def whole(name: str, value, lo: int, hi: int, fix: str = "") -> int:
    """``value`` as an int in ``lo..hi``, else ValueError naming it, expected vs got, and the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number; got {value!r}. {fix}".strip())
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is out of range: it must be from {lo} to {hi}. {fix}".strip())
    return int(value)


def positive(name: str, value, example: str) -> float:
    """``value`` as a finite float above 0, else ValueError naming it, expected vs got, and the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive, finite number; got {value!r}. Try {name}={example}.")
    return float(value)


def a_kind(obj) -> str:
    """What ``obj`` is, for a message: "a list", "an int", "a torch.Tensor", "a Head"."""
    kind = type(obj).__name__
    if isinstance(obj, (np.ndarray, torch.Tensor)):
        kind = f"{type(obj).__module__}.{kind}"
    return ("an " if kind[0].lower() in "aeiou" else "a ") + kind


def one_sequence(name: str, t, shape: str) -> torch.Tensor:
    """``t``, one sequence of ``shape`` such as "(T, C)", as a float tensor on the CPU; else ValueError
    saying what is wrong with it (not a tensor, on the meta device, not 2-D, empty, complex, or holding
    nan or inf, and where)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor of shape {shape}; got {a_kind(t)}. Convert it with "
                         f"torch.tensor({name}, dtype=torch.float32).")
    if t.is_meta:
        raise ValueError(f"{name} is a tensor on the meta device, which has a shape but no numbers: give the "
                         f"tensor the chapter computed, of shape {shape}.")
    if t.is_complex():
        raise ValueError(f"{name} must hold real numbers; got a {t.dtype} tensor. Pass {name}.real, or real numbers.")
    if t.dim() != 2:
        raise ValueError(f"{name} must be one sequence of shape {shape}, e.g. {name}[0]; got shape {tuple(t.shape)}")
    if 0 in t.shape:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)}): it needs at least one position (a row) "
                         f"and one number per position, shape {shape}.")
    t = t.detach().cpu().double()
    bad = (~torch.isfinite(t)).nonzero()
    if len(bad):
        i, j = bad[0].tolist()
        raise ValueError(f"{name} holds {t[i, j].item()} at {name}[{i}, {j}] (position {i}; "
                         f"{plural(len(bad), 'number')} of {name} {'is' if len(bad) == 1 else 'are'} nan or inf in "
                         f"all): the picture would show nan there. Give {name} finite numbers only "
                         f"(torch.isfinite({name}).all() is True).")
    return t
