"""Questions that ask the reader to predict, then check the prediction, in the page or in a kernel.

Each chapter asks two to four questions where its prose builds to them: a number to predict, a choice
with its reason, or the cells of a grid to mark. A question cell calls :func:`ask` with the chapter's own tensors; the question's function
below computes from them the right answer and the answer each listed mistake gives (no scaling, √C
instead of √d_k, the mask after the softmax, an off-by-one, ...). What the cell shows is one line that
asks for the reader's prediction and ends with a check code, the digest of those answers, and under it
a choice question's options, lettered, so a kernel can answer it: strict nbval compares that text, so the stored answers cannot drift from the code.
The answers themselves ride in the output's metadata under ``PAGE_KEY``, as the explorers' page config
does; ``book/_ext/page_explorers.py`` turns that output into the page's question, which
``book/_static/engine/questions.js`` answers with no kernel and nothing sent anywhere.

In a kernel the cell after the question holds ``answer = None`` and ``check(qid, answer)``, which
answers from the same stored answers, with the same words (those of :mod:`attention_lab.checks`).

A number matches a stored answer when it lies within the question's tolerance of it: at most
``abs`` away, or ``rel`` times the stored value, whichever is larger. Two mistakes that give the same
number share one message; a mistake that gives the right number is an error of the question.
"""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction

import torch
import torch.nn.functional as F

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


def number_question(qid, number, prompt, right, why, mistakes, tol, hint=""):
    """A question answered by a number: ``right`` and each ``(value, message)`` of ``mistakes``."""
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
            "none": "✗ No mistake this question knows of gives that number. Work it out again from the "
                    "cells above, or read on: the next cells compute it."}


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
    return sorted({(i, j) for i, j in pairs})


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
        cells = [list(p) for p in cells]
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


# ---- chapter 1 ---------------------------------------------------------------------------------

def _tril(T):
    return torch.tril(torch.ones(T, T))


@question("ch1-reach")
def ch1_reach(w, x, b=0, t=3):
    """Which outputs of ``w @ x`` move when the input vector ``x[b, t]`` changes: the reader reasons from
    Fig. 1's loop or Fig. 2's product; the right letter is measured by changing it."""
    B, T = x.shape[:2]
    other = x.clone()
    other[b, t] = x[b, t] + 1.0  # a new vector at position t of sequence b
    moved = ((w @ other) - (w @ x)).abs().amax(dim=-1) > 0  # (B, T): outputs that changed
    sets = {"a": {(b, t)}, "b": {(b, s) for s in range(t, T)}, "c": {(b, s) for s in range(t + 1)},
            "d": {(c, t) for c in range(B)}, "e": {(b, s) for s in range(T)}}
    found = {(int(i), int(j)) for i, j in moved.nonzero().tolist()}
    right = next((k for k, cells in sets.items() if cells == found), None)
    if right is None:
        raise ValueError(f"ch1-reach: the outputs that moved, {sorted(found)}, are none of the options")
    return choice_question(
        "ch1-reach", "1.1", f"x[{b}, {t}], the vector at position {t} of sequence {b}, is replaced by another. "
                            f"Which outputs of xbow2 = w @ x change?",
        {"a": f"Only xbow2[{b}, {t}]: each position averages its own vector.",
         "b": f"xbow2[{b}, {t}] to xbow2[{b}, {T - 1}]: position {t} and every later position of sequence {b}.",
         "c": f"xbow2[{b}, 0] to xbow2[{b}, {t}]: position {t} and the positions before it.",
         "d": f"xbow2[:, {t}], position {t} of every sequence: w is the same for the whole batch.",
         "e": f"All of xbow2[{b}]: w @ x mixes every position of the sequence."},
        right,
        f"output s averages positions 0 to s, so x[{b}, {t}] is in the average of every s ≥ {t}, "
        f"{T - t} outputs, and in none before it. Column {t} of w says the same: it is nonzero from row {t} "
        f"down. Other sequences never see it: w mixes positions within a sequence, never across the batch.",
        {"a": f"output {t} averages positions 0 to {t}, but position {t} also takes part in the averages of "
              f"every later position, {t + 1} to {T - 1}: those outputs change too.",
         "b": "the outputs that changed are others here.",
         "c": f"that reads row {t} of w, the inputs output {t} averages. The question is the other way round: "
              f"which outputs read input {t}? Column {t} of w, nonzero from row {t} down.",
         "d": f"w is shared, but each sequence is multiplied by it on its own: (T, T) @ (B, T, C) makes B "
              f"products, one per sequence, so sequence {b}'s input never reaches another sequence.",
         "e": f"the average is causal: outputs 0 to {t - 1} average positions before {t} only, so they keep "
              "their values."})


@question("ch1-column")
def ch1_column(w):
    T = len(w)
    tril = _tril(T)
    right = w[:, 0].sum()
    return number_question(
        "ch1-column", "1.2", "w[:, 0].sum(), the weight position 0 gets from all rows together", right,
        f"row t shares its weight evenly over positions 0..t, 1/(t + 1) each, so column 0 adds "
        f"1 + 1/2 + ... + 1/{T} ≈ {fmt(right)}. Rows sum to one, columns need not: every later row sees "
        "position 0.",
        [(1, f"columns need not sum to one as rows do: row t gives position 0 the weight 1/(t + 1), so add "
             f"1/(t + 1) down the column, 1 + 1/2 + ... + 1/{T}."),
         (tril[:, 0].sum(), f"you counted the ones of tril: row t divides its ones by t + 1, so column 0 "
                            f"gets 1 + 1/2 + ... + 1/{T}."),
         (w[:-1, 0].sum(), f"an off-by-one: 1 + 1/2 + ... + 1/{T - 1} stops at row {T - 2}; rows go up to "
                           f"{T - 1}, whose weight is 1/{T}."),
         (w[0, 0] / T, f"your causal average includes the future: with torch.triu only row 0 would see "
                       f"position 0, with weight 1/{T}; w is torch.tril.")],
        {"abs": 0.005, "rel": 0.01})


# ---- chapter 2 ---------------------------------------------------------------------------------

@question("ch2-learned")
def ch2_learned(key, query, value, k):
    layers = (key, query, value)
    right = sum(p.numel() for m in layers for p in m.parameters())
    out_f, in_f = key.weight.shape
    return number_question(
        "ch2-learned", "2.1", "how many numbers key, query and value learn together", right,
        f"each layer stores a ({out_f}, {in_f}) weight, {out_f * in_f} numbers, and no bias; three layers "
        f"make 3 × {out_f * in_f} = {right}. k, q and v are computed from x, not learned.",
        [(key.weight.numel(), f"that is one projection, ({out_f}, {in_f}) = {out_f * in_f} numbers; the "
                              "head has three, key, query and value."),
         (right + 3 * out_f, "the projections have no bias (bias=False): each learns its weight only."),
         (3 * k.numel(), f"those are the entries of k, q and v, {tuple(k.shape)} each: they are computed "
                         "from x, not learned; what is learned is the layers' weights."),
         (3 * (in_f + out_f), f"({out_f}, {in_f}) is a weight of {out_f} × {in_f} numbers, not "
                              f"{out_f} + {in_f}.")],
        {"abs": 0.5})


@question("ch2-symmetric")
def ch2_symmetric(scores):
    grid = scores[0]
    symmetric = bool(torch.allclose(grid, grid.T))
    return choice_question(
        "ch2-symmetric", "2.2", "Is the grid symmetric: is entry (i, j) equal to entry (j, i)?",
        {"a": "Yes: a dot product is the same either way round, q·k = k·q.",
         "b": "No: entry (i, j) pairs query i with key j, and entry (j, i) pairs query j with key i.",
         "c": "Yes: a token's query and its key are both computed from the same vector x_i."},
        "a" if symmetric else "b",
        f"entry (2, 5) is q_2·k_5 = {grid[2, 5]:.2f} and entry (5, 2) is q_5·k_2 = {grid[5, 2]:.2f}: two "
        "different pairs of vectors, since a token's query and its key come from different matrices.",
        {"a": f"q·k = k·q holds for one pair of vectors, but entry (5, 2) is q_5·k_2 and entry (2, 5) is "
              f"q_2·k_5, two different pairs ({grid[5, 2]:.2f} and {grid[2, 5]:.2f} here).",
         "c": "the same x_i, but through two different matrices: q_i = x_i W_Q and k_i = x_i W_K, with "
              "W_Q = query.weight.T. Only with W_K = W_Q (tied) would the grid be symmetric.",
         "b": "the grid is symmetric here; query i against key j equals query j against key i."})


# ---- chapter 3 ---------------------------------------------------------------------------------

@question("ch3-variance")
def ch3_variance(d_k, C, n=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)  # its own stream: the chapter's random numbers stay as they are
    qs = torch.randn(n, d_k, generator=g, dtype=torch.float64)  # (n, d_k)
    ks = torch.randn(n, d_k, generator=g, dtype=torch.float64)  # (n, d_k)
    dots = (qs * ks).sum(dim=-1)  # (n,)
    right = (dots / math.sqrt(d_k)).var()
    return number_question(
        "ch3-variance", "3.1", f"Var(q·k / √d_k) for unit-variance q and k at d_k = {d_k}", right,
        f"q·k adds {d_k} independent terms of variance 1, so its variance is {d_k}; dividing by "
        f"√{d_k} = {fmt(math.sqrt(d_k))} divides the variance by {d_k}, back to 1 (measured on {n:,} pairs: "
        f"{right:.3f}).",
        [(dots.var(), f"no 1/√d_k scaling: that is the variance of q·k itself, about d_k = {d_k}; divide "
                      f"by √d_k = √{d_k}."),
         ((dots / d_k).var(), f"dividing by d_k: you divided by d_k = {d_k}; divide by its square root, "
                              f"√d_k (by {d_k} the variance falls to 1/{d_k})."),
         ((dots / math.sqrt(C)).var(), f"scaling by √C: you divided by √C = √{C}, the model width; the scale "
                                       f"is 1/√d_k with d_k = {d_k}."),
         ((dots * math.sqrt(d_k)).var(), f"multiplying by √d_k: divide q·k by √d_k = √{d_k}, don't multiply.")],
        {"rel": 0.1})


@question("ch3-gradient")
def ch3_gradient(logits, saturated=(8.0, 0.0)):
    """``logits``: the row the reader differentiates; ``saturated``: the row printed above it, whose gradient
    is the slip of answering for the wrong row."""
    def softmax_and_gradient(row):
        with torch.enable_grad():
            z = torch.tensor(row, dtype=torch.float64, requires_grad=True)
            p = F.softmax(z, dim=-1)
            grad, = torch.autograd.grad(p[0], z)
        return p.detach(), grad

    p, grad = softmax_and_gradient(logits)
    p_sat, grad_sat = softmax_and_gradient(saturated)
    even = F.softmax(torch.zeros(2, dtype=torch.float64), dim=-1)[0]
    shown, shown_sat = (f"[{', '.join(fmt(v) for v in row)}]" for row in (logits, saturated))
    return number_question(
        "ch3-gradient", "3.2", f"the gradient of softmax({shown})[0] with respect to the first logit",
        grad[0],
        f"the gradient is p(1 − p) with p = {p[0]:.4f}, so {fmt(grad[0])}: the first weight moves about "
        f"{grad[0]:.2f} per unit of its logit, less than the 0.25 of equal logits. At {shown_sat}, nearly "
        f"one-hot, it is {fmt(grad_sat[0])}: a saturated softmax passes almost no gradient back.",
        [(p[0], f"that is the weight itself, softmax({shown})[0] = {p[0]:.4f}; its gradient is p(1 − p)."),
         (p[1], f"that is 1 − p = {p[1]:.4f}, the other weight: the gradient is p(1 − p), so multiply by "
                f"p = {p[0]:.4f}."),
         (grad[1], "that is the gradient with respect to the second logit, −p₀p₁: the same size, the other "
                   "sign."),
         (math.exp(logits[0]), f"that is the derivative of e^z alone, e^{fmt(logits[0])}; the softmax divides "
                               "e^z by the row's sum, which grows with it."),
         (even * (1 - even), "p(1 − p) = 0.25 is the largest the gradient gets, at equal logits (p = 0.5); "
                             f"here p = {p[0]:.4f}."),
         (grad_sat[0], f"that is the gradient at {shown_sat}, the row printed above; this row is {shown}, "
                       f"with p = {p[0]:.4f}.")],
        {"rel": 0.05}, hint="scientific notation such as 1e-5 is fine")


# ---- chapter 4 ---------------------------------------------------------------------------------

@question("ch4-row-one")
def ch4_row_one(q, k, tril, b=0, i=2, j=0):
    s = q[b] @ k[b].T / math.sqrt(q.shape[-1])  # (T, T): scaled scores, before the mask
    future = tril == 0
    masked = s.masked_fill(future, float("-inf"))
    right = F.softmax(masked, dim=-1)[i, j]
    return number_question(
        "ch4-row-one", "4.1", f"weights[{b}, {i}, {j}], the weight query {i} gives key {j}", right,
        f"the softmax of row {i}'s {i + 1} finite scores, [{', '.join(f'{v:.2f}' for v in s[i, :i + 1])}], "
        f"gives key {j} {fmt(right)}; the −inf entries add e^−inf = 0 to the sum.",
        [(F.softmax(s, dim=-1)[i, j], "no mask: the future keys share the weight too, so every position sees "
                                      "the future; fill the scores above the diagonal with -inf."),
         (F.softmax(s, dim=-1).masked_fill(future, 0.0)[i, j],
          "masking after the softmax: the softmax had already spread the row over every key, so overwriting "
          "the future afterwards leaves a row that doesn't sum to one; fill the scores with -inf first, "
          "then take the softmax."),
         (F.softmax(s.masked_fill(future, 0.0), dim=-1)[i, j],
          "the future was filled with 0 instead of -inf: exp(0) = 1, so the future still gets weight."),
         (F.softmax(masked, dim=-2)[i, j], "softmax over the wrong axis: dim=-2 makes the columns sum to one; "
                                           "use dim=-1 (each row, over the keys)."),
         (F.softmax(masked / math.sqrt(q.shape[-1]), dim=-1)[i, j],
          f"scaled twice: the printed scores are already divided by √d_k = √{q.shape[-1]}, so dividing them "
          "again flattens the row; take the softmax of the printed numbers as they are."),
         (1 / (i + 1), f"that is 1/{i + 1}, the plain average of chapter 1: row {i} keeps {i + 1} keys, but the "
                       "softmax shares the weight by their scores, e^score over the row's sum, not evenly.")],
        {"abs": 0.004})  # two-decimal scores put the weight within 0.002; the mistakes lie 0.0085 apart


@question("ch4-unmasked")
def ch4_unmasked(q, k, tril, T=3):
    s = q[0, :T] @ k[0, :T].T / math.sqrt(q.shape[-1])  # (T, T): the first T positions' scores
    future = tril[:T, :T] == 0
    masked = F.softmax(s.masked_fill(future, float("-inf")), dim=-1)
    open_ = F.softmax(s, dim=-1)  # the mask switched off
    changed = {(i, j) for i, j in (masked - open_).abs().gt(1e-6).nonzero().tolist()}
    every = {(i, j) for i in range(T) for j in range(T)}
    ahead = {(i, j) for i in range(T) for j in range(T) if j > i}
    return cells_question(
        "ch4-unmasked", "4.2", f"the weights that change when the mask is switched off, for the first "
                               f"T = {T} positions", T, changed,
        f"each row's softmax divides by the sum over the keys it sees. Switch the mask off and the future "
        f"keys join that sum, so in rows 0 to {T - 2} every weight changes, the past ones shrinking; row "
        f"{T - 1} already saw all {T} keys and stays as it was.",
        [(ahead, "the future cells gain weight, but then each row's sum grows, so the weights of its past "
                 "keys shrink too: every cell of a row the mask reached changes."),
         (every, f"the last row, {T - 1}, sees every key already: the mask hides nothing there, so switching it "
                 "off changes none of its weights."),
         (ahead | {(i, i) for i in range(T)}, "the diagonal is not masked: a position sees itself. Besides, "
                                             "a row's past weights change too, since the row's sum grows.")])


@question("ch4-all-masked")
def ch4_all_masked(row):
    hidden = torch.ones(len(row), dtype=torch.bool)
    masked = row.masked_fill(hidden, float("-inf"))
    got = F.softmax(masked, dim=-1)
    finite = F.softmax(row.masked_fill(hidden, -1e9), dim=-1)
    shifted = masked - masked.max()  # the softmax's first step: nan already
    # the same row through F.scaled_dot_product_attention, every key hidden by its boolean mask
    one = row.new_ones(1, 1, 1, 1)
    sdpa = F.scaled_dot_product_attention(one, one.expand(1, 1, len(row), 1), one.expand(1, 1, len(row), 1),
                                          attn_mask=~hidden[None, :])
    sdpa_zero = bool((sdpa == 0).all())
    n = len(row)
    right = "c" if torch.isnan(got).all() else ("b" if torch.allclose(got, finite) else "a")
    sdpa_says = ("the one F.scaled_dot_product_attention gives: it returns zeros for a row with no key left "
                 "(section 4.9 shows it)" if sdpa_zero else "the one a mask-aware function could give")
    return choice_question(
        "ch4-all-masked", "4.3", f"A row of {n} scores in which every key is masked with -inf: what does the "
                                 "softmax give?",
        {"a": f"{n} zeros: no key is allowed, so no key gets weight.",
         "b": f"1/{n} on every key: the masked entries are all equal, and equal scores share the weight evenly.",
         "c": "nan on every key: no finite number is left in the row."},
        right,
        "the softmax first subtracts the row's largest entry, which is −inf too, and −inf − (−inf) is nan, "
        f"'not a number'{', on every key' if torch.isnan(shifted).all() else ''}: the row is nan before any "
        f"division. A finite fill such as -1e9 gives {finite[0]:.2f} everywhere instead, silently.",
        {"a": f"a sensible answer, and {sdpa_says}. F.softmax does not: it first subtracts the row's largest "
              "entry, −inf here, and −inf − (−inf) is nan, on every key.",
         "b": f"that is what a finite fill such as -1e9 gives ({finite[0]:.2f} each): equal numbers make a "
              "uniform row. With -inf no finite entry is left, and −inf − (−inf) is nan.",
         "c": "the softmax of this row is not nan here."})


# ---- chapter 5 ---------------------------------------------------------------------------------

@question("ch5-shorter")
def ch5_shorter(head, x, out, T=5):
    same = bool(torch.allclose(head(x[:, :T]), out[:, :T]))
    bs = head.tril.shape[0]
    return choice_question(
        "ch5-shorter", "5.1", f"head(x[:, :{T}]) sees only the first {T} positions. Are its {T} rows equal to "
                              f"the first {T} rows of out = head(x)?",
        {"a": f"Yes: the mask already kept positions 0 to {T - 1} from seeing the positions after them.",
         "b": f"No: with {x.shape[1] - T} keys fewer, each row of the softmax divides by a smaller sum, so "
              "every weight changes.",
         "c": f"No: the head raises an error, since T = {T} is not block_size = {bs}."},
        "a" if same else "b",
        f"row t's weights were 0 on every key after t, so positions {T} to {x.shape[1] - 1} added nothing to "
        f"rows 0 to {T - 1}; without them the outputs are the same. That is causality (section 5.6).",
        {"b": f"rows 0 to {T - 1} never had weight on the later keys: the mask sent those scores to -inf, "
              "which adds e^−inf = 0 to each row's sum, so removing them changes nothing.",
         "c": f"the slice tril[:T, :T] cuts the {bs} × {bs} mask down to {T} × {T}: any T up to block_size "
              "works.",
         "a": "the outputs differ here."})


@question("ch5-longer")
def ch5_longer(head, C):
    bs = head.tril.shape[0]
    g = torch.Generator().manual_seed(0)  # its own stream: the chapter's random numbers stay as they are
    try:
        head(torch.randn(1, bs + 1, C, generator=g))
        right = "c"
    except RuntimeError:
        right = "b"
    return choice_question(
        "ch5-longer", "5.2", f"What does head(x) do for x of shape (1, {bs + 1}, {C}), one position more "
                             "than block_size?",
        {"a": f"It runs: the slice tril[:{bs + 1}, :{bs + 1}] makes the mask {bs + 1} × {bs + 1}.",
         "b": f"It raises an error: tril[:{bs + 1}, :{bs + 1}] of the {bs} × {bs} buffer is still {bs} × {bs}, "
              f"which cannot mask {bs + 1} × {bs + 1} scores.",
         "c": "It runs, and the last position sees every position: the mask stops short of it."},
        right,
        f"slicing past the end of a tensor stops at its end, so masked_fill meets ({bs + 1}, {bs + 1}) "
        f"scores with a ({bs}, {bs}) mask and raises a RuntimeError. A head takes at most block_size = {bs} "
        "positions: feed it the last ones.",
        {"a": f"slicing past the end of a tensor stops at its end: tril[:{bs + 1}, :{bs + 1}] of the "
              f"{bs} × {bs} buffer is {bs} × {bs}, so the mask and the scores no longer fit.",
         "c": f"broadcasting does not pad a mask: a ({bs}, {bs}) mask against ({bs + 1}, {bs + 1}) scores is "
              "an error, not a mask that stops short.",
         "b": "the head runs here."})


# ---- chapter 6 ---------------------------------------------------------------------------------

@question("ch6-uniform")
def ch6_uniform(vocab_size):
    logits = torch.zeros(1, vocab_size)  # (1, vocab): every character equally likely
    right = F.cross_entropy(logits, torch.tensor([0]))
    n = vocab_size
    return number_question(
        "ch6-uniform", "6.1", f"the loss of a uniform guess over the {n} characters", right,
        f"each character gets p = 1/{n}, and the loss is −ln p = ln {n} ≈ {right:.3f} nats, whatever the "
        "true next character is.",
        [(math.log10(n), f"log base 10: cross-entropy takes the natural log, −ln p = ln {n}."),
         (math.log2(n), f"log base 2 gives bits; F.cross_entropy measures nats, with the natural log, "
                        f"ln {n}."),
         (1 / n, f"that is the probability a uniform guess gives each character, 1/{n}; the loss is −ln of it."),
         (n, f"that is e^loss, the number of equally likely characters (the perplexity); the loss is ln {n}."),
         (-right, "the loss is −ln p, and ln p is negative, so the loss is positive.")],
        {"rel": 0.01})


@question("ch6-identity")
def ch6_identity(identity, losses, head="HeadLM", bigram="BigramLM"):
    """``identity``: the shipped model whose attention is fixed to the identity (each query reads its own
    value vector only); ``losses``: the chapter's validation losses of the head model and the bigram."""
    from attention_lab import training  # chapter 6's models; imported here, where the question needs it

    loss = training.validation_loss(identity)
    h, b = float(losses[head]), float(losses[bigram])
    right = "a" if loss > b - 0.02 else ("c" if abs(loss - h) <= 0.02 else ("d" if loss < h else "b"))
    return choice_question(
        "ch6-identity", "6.2", f"IdentityLM is {head} with its attention weights fixed to the identity: each "
                               "position reads its own value vector and nothing before it. Trained the same way, "
                               "where does its validation loss land?",
        {"a": f"About the bigram's {b:.3f}: without a look back it knows the current character and its "
              "position, which is what a bigram table knows.",
         "b": f"Between the bigram's {b:.3f} and {head}'s {h:.3f}: its value projection and lm_head are "
              "layers the bigram does not have.",
         "c": f"About {head}'s {h:.3f}: the gain came from the embeddings and the extra layers, not from "
              "looking back.",
         "d": f"Below {head}'s {h:.3f}: a fixed attention is one thing less to learn."},
        right,
        f"IdentityLM scores {loss:.3f}, no better than the bigram's {b:.3f}. Its tables, its value projection "
        f"and lm_head see only the current character and its position, and the position says nothing about "
        f"the next character: they can learn what the bigram's table holds, and no more. So the "
        f"{b - h:.3f} by which {head} beats the bigram is what its look back buys.",
        {"a": f"IdentityLM scores {loss:.3f} here, against the bigram's {b:.3f}.",
         "b": f"more layers are not more information: every layer of IdentityLM sees the current character and "
              f"its position only, a bigram's knowledge (the position says next to nothing about the next "
              f"character). IdentityLM scores {loss:.3f}, the bigram {b:.3f}.",
         "c": f"without the look back the gain is gone: IdentityLM scores {loss:.3f}, no better than the "
              f"bigram's {b:.3f}, where {head} scores {h:.3f}.",
         "d": f"fixing the attention takes away the only way to see an earlier character: IdentityLM scores "
              f"{loss:.3f}, no better than the bigram's {b:.3f}."})


def _most_weight(places: dict, even: float) -> tuple[str, str]:
    """Chapter 6's "where does the weight go": (the letter of the place with the most weight, the right letter:
    that one, or "c", about evenly, when it is not half again above ``even``, a key's share of an even row)."""
    best = max(places, key=places.get)
    return best, best if places[best] > 1.5 * even else "c"


@question("ch6-looks")
def ch6_looks(trained, untrained):
    """``trained``, ``untrained``: the two heads' weights for one line, (1, T, T) each."""
    def profile(w):  # (T, T) -> the mean weight on itself, one back, and the first character
        T = w.shape[-1]
        return w.diagonal().mean(), w.diagonal(-1).mean(), w[2:, 0].mean() if T > 2 else w[1:, 0].mean()
    w = trained[0]
    own, back, first = profile(w)
    u_own = profile(untrained[0])[0]
    T = w.shape[-1]
    even = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    right = _most_weight({"a": own, "b": back, "d": first}, even)[1]
    return choice_question(
        "ch6-looks", "6.3", "Where does the trained head put most of a row's weight?",
        {"a": "On the current character, the query's own position.",
         "b": "On the character just before the query.",
         "c": "About evenly over the line so far, as chapter 1's average does.",
         "d": "On the first character of the line."},
        right,
        f"on this line the trained head keeps {own:.2f} of a row's weight, on average, on the current "
        f"character and gives {back:.2f} to the one before it; the untrained head keeps only {u_own:.2f} on "
        "itself.",
        {"a": f"the current character gets only {own:.2f} of a row on average here.",
         "b": f"the character before gets only {back:.2f} of a row on average; the current character gets "
              f"{own:.2f}.",
         "c": f"evenly would be about {even:.2f} a key; the trained head keeps {own:.2f} on the current "
              f"character. Spreading the weight is the untrained head's habit ({u_own:.2f} on itself).",
         "d": f"the first character gets {first:.2f} of a row on average; the current one gets {own:.2f}."})


@question("ch6-residual")
def ch6_residual(residual, trained):
    """``residual``, ``trained``: ResidualLM's and HeadLM's head weights on the windows, (n, T, T) each."""
    p, h = (ws[:, -1].flip(-1).mean(0) for ws in (residual, trained))  # (T,) each: the last query, d back
    T = len(p)
    where = {"a": ("the current character", p[0]), "b": ("the character before", p[1]),
             "d": (f"the first character, {T - 1} back", p[-1])}
    best, right = _most_weight({c: w for c, (_, w) in where.items()}, 1 / T)
    top = (f"{where[best][0]} gets the most, {where[best][1]:.3f}" if right != "c" else
           f"no key gets much more than an even 1/{T}")
    return choice_question(
        "ch6-residual", "6.4", "With x also carried past the head, where does ResidualLM's head put the "
                               "largest share of its last query's weight?",
        {"a": "On the current character, as HeadLM's head does.",
         "b": "On the character just before the query.",
         "c": f"About evenly over the {T} characters of the window.",
         "d": f"On the first character of the window, {T - 1} back."},
        right,
        f"the last query gives {p[1]:.3f} of its weight to the character before and {p[0]:.3f} to its own, "
        f"where HeadLM's head gave {h[1]:.3f} and {h[0]:.3f}."
        + (" The current character now reaches lm_head past the head, which leaves the head free to fetch "
           "the one before it." if right == "b" else ""),
        {"a": f"HeadLM's head does that ({h[0]:.3f} on the current character), where the head is the "
              f"current character's only road to lm_head. Here x goes past the head as well, and the head "
              f"keeps only {p[0]:.3f} on it; {top}.",
         "b": f"the character before gets {p[1]:.3f}; {top}.",
         "c": f"evenly would be about 1/{T} = {1 / T:.3f} a key, the untrained head's habit; {top}, "
              f"{where[best][1] * T:.0f} times that.",
         "d": f"that would be a head that reads the start of its window whatever the query; the first "
              f"character gets {f'{p[-1]:.3f}' if p[-1] >= 5e-4 else 'less than 0.001'}, and {top}."})
