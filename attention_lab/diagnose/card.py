"""The report card of :func:`attention_lab.diagnose.diagnose`: one :class:`Verdict` a line.

A :class:`Diagnosis` holds the verdicts of one head, in :data:`VERDICTS` order; :func:`combined` makes
one card of several heads' cards (chapter 7).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

LINE_WIDTH = 77  # the book's code column
MARKS = {True: "✓", False: "✗", None: "–"}
VERDICTS = {  # field -> what a "not measured" line is about
    "runs": "runs", "causal": "causal", "scale": "scale", "softmax_axis": "softmax axis",
    "mask_order": "mask before the softmax", "exact_mask": "exact mask",
    "extras": "nothing else on the scores or the output", "eval_dropout": "dropout off in eval()",
    "state": "nothing kept between calls", "short_T": "T < block_size", "in_place": "input left unchanged",
    "sdpa": "agreement with F.scaled_dot_product_attention"}


@dataclass
class Verdict:
    """One line of the card: ``ok`` is True (✓), False (✗) or None (– not measured)."""

    ok: bool | None
    text: str
    value: object = None  # the measured number behind the line, if any

    def line(self, about: str = "") -> str:
        about = f"{about}: " if about and self.ok is None else ""
        return _wrap(f"{MARKS[self.ok]} {about}{self.text}")


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=LINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def _unmeasured(why: str) -> Verdict:
    return Verdict(None, f"not measured: {why}")


def _pending():
    return field(default_factory=lambda: _unmeasured("the head did not run"))


@dataclass
class Diagnosis:
    """The report card of :func:`diagnose`: one :class:`Verdict` a field, in :data:`VERDICTS`."""

    name: str
    kind: str  # "a module", "a function of x", "a function of (q, k, v)", ...
    sizes: str  # what C, head_size and block_size are, and where each came from
    runs: Verdict
    causal: Verdict = _pending()
    scale: Verdict = _pending()
    softmax_axis: Verdict = _pending()
    mask_order: Verdict = _pending()
    exact_mask: Verdict = _pending()
    extras: Verdict = _pending()
    eval_dropout: Verdict = _pending()
    state: Verdict = _pending()
    short_T: Verdict = _pending()
    in_place: Verdict = _pending()
    sdpa: Verdict = _pending()
    heads: int = 1  # more than 1: a module of several heads, which the card names in one line
    cards: list = field(default_factory=list)  # a module read head by head: each head's own card

    def verdicts(self) -> dict[str, Verdict]:
        return {name: getattr(self, name) for name in VERDICTS}

    @property
    def failed(self) -> list[str]:
        """The names of the verdicts marked ✗, in card order."""
        return [name for name, v in self.verdicts().items() if v.ok is False]

    def __str__(self) -> str:
        head = _wrap(f"diagnose({self.name}): {self.kind}; {self.sizes}")
        if self.heads > 1 and not self.cards:
            return "\n".join([head, self.runs.line()])
        lines = [v.line(VERDICTS[name]) for name, v in self.verdicts().items()]
        return "\n".join([head, *lines])

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def combined(name: str, kind: str, sizes: str, cards: list) -> Diagnosis:
    """One card for a module of several heads, from each head's card (chapter 7): a verdict any head
    fails names the first such head ("head 2: ..."), and the others that fail it too; a verdict every
    head passes is the first head's line, said of all of them."""
    n = len(cards)
    lines = {}
    for field_name in VERDICTS:
        verdicts = [getattr(c, field_name) for c in cards]
        bad = [j for j, v in enumerate(verdicts) if v.ok is False]
        if bad:
            also = f" (heads {', '.join(map(str, bad[1:]))} too)" if len(bad) > 1 else ""
            first = verdicts[bad[0]]
            lines[field_name] = Verdict(False, f"head {bad[0]}: {first.text}{also}", (bad[0], first.value))
        elif all(v.ok for v in verdicts):
            lines[field_name] = Verdict(True, f"{verdicts[0].text} (each of the {n} heads)", verdicts[0].value)
        else:
            j = next(j for j, v in enumerate(verdicts) if v.ok is None)
            lines[field_name] = Verdict(None, f"head {j}: {verdicts[j].text}", verdicts[j].value)
    card = Diagnosis(name, kind, sizes, **lines, heads=n)
    card.cards = list(cards)
    return card
