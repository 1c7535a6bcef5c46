"""The report card of :func:`attention_lab.diagnose.diagnose`: one :class:`Verdict` a line.

A :class:`Diagnosis` holds the verdicts of one head, in :data:`VERDICTS` order; a module of several
heads gets one line that says so (:attr:`Diagnosis.heads`), since reading each head is the many-heads
chapter's job.
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

    def verdicts(self) -> dict[str, Verdict]:
        return {name: getattr(self, name) for name in VERDICTS}

    @property
    def failed(self) -> list[str]:
        """The names of the verdicts marked ✗, in card order."""
        return [name for name, v in self.verdicts().items() if v.ok is False]

    def __str__(self) -> str:
        head = _wrap(f"diagnose({self.name}): {self.kind}; {self.sizes}")
        if self.heads > 1:
            return "\n".join([head, self.runs.line()])
        lines = [v.line(VERDICTS[name]) for name, v in self.verdicts().items()]
        return "\n".join([head, *lines])

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))
