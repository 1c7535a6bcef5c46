"""The questions' machinery: the registry, the three kinds of question (a number, a choice, cells of a
grid), the digest a kernel prints, and :func:`ask` and :func:`check`. The questions themselves are in
one module per chapter beside this one; the package's docstring says how a question travels from a
chapter cell to the page and back.
"""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction

import torch

from attention_lab.explorers import PAGE_KEY

QUESTIONS = {}  # qid -> the function that builds that question from the chapter's tensors
_asked: dict[str, dict] = {}  # qid -> its config, once ask() ran in this process (the kernel)


def question(qid: str):
    """Register a question's builder under ``qid`` (``"ch3-variance"``)."""
    def register(build):
        QUESTIONS[qid] = build
        return build
    return register


def fmt(value: float) -> str:
    """A number as the messages print it: whole numbers whole, others to 4 significant digits."""
    if float(value).is_integer() and abs(value) < 1e7:
        return str(int(value))
    return f"{value:.4g}"


def within(x: float, value: float, tol: dict) -> bool:
    """True when ``x`` counts as ``value`` under the tolerance ``{"abs": a, "rel": r}``."""
    return abs(x - value) <= max(tol.get("abs", 0.0), tol.get("rel", 0.0) * abs(value))


def number_question(qid, number, prompt, right, why, mistakes, tol, hint="", none=""):
    """A question answered by a number: ``right`` and each ``(value, message)`` of ``mistakes``; ``none``, what
    to do when the entry is neither (else: work it out again, or read on)."""
    answers = [{"value": float(right), "right": True, "say": "✓ Right: " + why}]
    for value, say in mistakes:
        value = float(value)
        if within(value, right, tol) or within(right, value, tol):
            raise ValueError(f"{qid}: the mistake {say!r} gives the right answer, {fmt(right)}")
        same = [a for a in answers[1:] if within(value, a["value"], tol) or within(a["value"], value, tol)]
        if same:  # two mistakes, one number: one message names both
            same[0]["say"] += " Or: " + say
        else:
            answers.append({"value": value, "right": False, "say": "✗ " + say})
    for a in answers:
        a["value"] = float(f"{a['value']:.6g}")
    return {"question": qid, "number": number, "kind": "number", "prompt": prompt, "tolerance": tol,
            "answers": answers, "hint": hint,
            "none": "✗ No mistake this question knows of gives that number. " + (
                none or "Work it out again from the cells above, or read on: the next cells compute it.")}


def choice_question(qid, number, prompt, options, right, why, mistakes):
    """A question answered by a letter: ``options`` maps letters to choices, ``mistakes`` letters to
    what is wrong with them; ``right`` is the letter the chapter's code shows to be right."""
    answers = [{"choice": right, "right": True, "say": "✓ Right: " + why}]
    answers += [{"choice": c, "right": False, "say": "✗ " + say} for c, say in mistakes.items() if c != right]
    return {"question": qid, "number": number, "kind": "choice", "prompt": prompt,
            "options": [{"key": c, "label": label} for c, label in options.items()], "answers": answers}


def cells_question(qid, number, prompt, size, right, why, mistakes):
    """A question answered by marking cells of a ``size`` × ``size`` grid (row = query, column = key):
    ``right`` and each ``(cells, message)`` of ``mistakes`` are sets of (row, column) pairs."""
    def listed(cells):
        return sorted([int(i), int(j)] for i, j in cells)
    answers = [{"cells": listed(right), "right": True, "say": "✓ Right: " + why}]
    for cells, say in mistakes:
        if listed(cells) == answers[0]["cells"]:
            raise ValueError(f"{qid}: the mistake {say!r} marks the right cells")
        same = [a for a in answers[1:] if a["cells"] == listed(cells)]
        if same:
            same[0]["say"] += " Or: " + say
        else:
            answers.append({"cells": listed(cells), "right": False, "say": "✗ " + say})
    return {"question": qid, "number": number, "kind": "cells", "prompt": prompt, "size": size,
            "answers": answers,
            "none": "✗ No mistake this question knows of marks those cells. Think row by row: which rows does "
                    "the change reach, and which cells of each row?"}


def read_cells(answer, size):
    """The learner's marked cells as a sorted list of [row, column], or a str saying what to write."""
    if isinstance(answer, torch.Tensor) or hasattr(answer, "shape"):
        grid = torch.as_tensor(answer)
        if tuple(grid.shape) != (size, size):
            return f"answer is a grid of shape {tuple(grid.shape)}; mark the cells of a ({size}, {size}) grid"
        return sorted([int(i), int(j)] for i, j in (grid != 0).nonzero().tolist())
    try:
        pairs = [tuple(p) for p in answer]
    except TypeError:
        return (f"answer should list the cells you mark as (row, column) pairs, such as [(0, 1), (2, 3)]; "
                f"got {answer!r}, of type {type(answer).__name__}")
    bad = [p for p in pairs if len(p) != 2 or not all(isinstance(n, int) and 0 <= n < size for n in p)]
    if bad:
        return f"{bad[0]!r} is not a cell: give (row, column) pairs of whole numbers from 0 to {size - 1}"
    return sorted([i, j] for i, j in set(pairs))


def digest(config: dict) -> str:
    """Eight hex digits that change when any stored answer, its message or the question does; numbers
    enter at 4 significant digits, which no CPU's rounding changes."""
    def rounded(a):
        return {**a, **({"value": f"{a['value']:.4g}"} if "value" in a else {})}
    kept = {**config, "answers": [rounded(a) for a in config["answers"]]}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:8]


class Question:
    """A question shown by a chapter cell: its digest line in a kernel, its answers in the metadata."""

    def __init__(self, config: dict):
        self.config = config

    def __repr__(self) -> str:
        c = self.config
        # the check code is the digest of the stored answers: strict nbval compares it, so the answers the
        # page checks cannot drift from the code that computes them
        line = (f"Question {c['number']}: write your prediction in the next cell as answer = ..., then run it. "
                f"(check code {digest(c)})")
        return "\n".join([line, *options_text(c)])

    def _repr_mimebundle_(self, **kwargs):
        return {"text/plain": repr(self)}, {PAGE_KEY: self.config}


def options_text(config: dict) -> list[str]:
    """A choice question's options as the kernel prints them, one line each, "(a) ...", without saying
    which is right; no lines for other kinds. The page shows the options in its form instead."""
    return [f"  ({o['key']}) {o['label']}" for o in config.get("options", [])]


def ask(qid: str, **tensors) -> Question:
    """The question ``qid`` computed from the chapter's ``tensors``; remembered for :func:`check`."""
    if qid not in QUESTIONS:
        raise KeyError(f"no question {qid!r}; the questions are {', '.join(QUESTIONS)}")
    with torch.no_grad():
        config = QUESTIONS[qid](**tensors)
    _asked[qid] = config
    return Question(config)


class Verdict:
    """What :func:`check` found: ``right`` (True, False, or None when nothing was answered) and ``message``."""

    def __init__(self, right, message: str):
        self.right, self.message = right, message

    def __repr__(self) -> str:
        return self.message


def read_number(answer):
    """The learner's number as a float, or a str saying what to write instead."""
    if isinstance(answer, torch.Tensor):
        if answer.numel() != 1:
            return f"answer is a tensor of shape {tuple(answer.shape)}; give one number, such as 0.25"
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float, Fraction)) and not hasattr(answer, "__float__"):
        if isinstance(answer, str):
            return (f"answer is the text {answer!r}; write the number itself, without quotes "
                    "(answer = 0.25, or answer = 1/4)")
        return f"answer should be one number, such as 0.25; got {answer!r}, of type {type(answer).__name__}"
    value = float(answer)
    if not math.isfinite(value):
        return f"answer is {value}; give a finite number, such as 0.25"
    return value


def check(qid: str, answer) -> Verdict:
    """Match a kernel answer against the question's stored answers (those :func:`ask` computed); with
    ``answer`` None, say how to answer (and list a choice question's options again)."""
    if qid not in _asked:
        known = f"; the questions are {', '.join(QUESTIONS)}" if qid not in QUESTIONS else ""
        return Verdict(None, f"Question {qid!r} is not set up in this kernel: run the question's cell above "
                             f"(questions.ask({qid!r}, ...)) first{known}")
    c = _asked[qid]
    if answer is None:
        how = {"number": "a number, e.g. answer = 0.25",
               "choice": "the letter of your choice, e.g. answer = \"b\"",
               "cells": "the (row, column) cells you mark, e.g. answer = [(0, 1), (2, 3)]"}[c["kind"]]
        return Verdict(None, "\n".join([f"Question {c['number']}: put your prediction in `answer` ({how}), "
                                        "then run this cell again.", *options_text(c)]))
    if c["kind"] == "cells":
        cells = read_cells(answer, c["size"])
        if isinstance(cells, str):
            return Verdict(False, cells)
        if not cells:
            return Verdict(False, "you marked no cell: list the cells you mark, such as [(0, 1), (2, 3)]")
        found = next((a for a in c["answers"] if a["cells"] == cells), None)
        return Verdict(False, c["none"]) if found is None else Verdict(found["right"], found["say"])
    if c["kind"] == "choice":
        keys = [o["key"] for o in c["options"]]
        if not isinstance(answer, str):
            return Verdict(False, f"answer should be the letter of your choice, one of {', '.join(keys)}, "
                                  f"in quotes (answer = \"{keys[0]}\"); got {answer!r}, of type {type(answer).__name__}")
        key = answer.strip().strip("()").lower()
        if key not in keys:
            return Verdict(False, f"{answer!r} is not one of the choices {', '.join(keys)}")
        found = next(a for a in c["answers"] if a["choice"] == key)
        return Verdict(found["right"], found["say"])
    value = read_number(answer)
    if isinstance(value, str):
        return Verdict(False, value)
    near = [a for a in c["answers"] if within(value, a["value"], c["tolerance"])]
    if not near:
        return Verdict(False, c["none"])
    found = min(near, key=lambda a: abs(value - a["value"]))
    return Verdict(found["right"], found["say"])
