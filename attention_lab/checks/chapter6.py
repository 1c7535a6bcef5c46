"""Chapter 6's checks: a previous-token head set by hand (:func:`check_previous_token_head`), the mean
weight at each distance (:func:`check_weight_by_distance`) and the line a head looks furthest back on
(:func:`check_furthest_line`)."""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn

from .engine import (Case, CheckFailed, _answer_is, _compare, _fail, _fail_unless_float_cpu, _fill, _first,
                     _matches, _name, _shape, _table, _tested)
from .references import _project, _weights
from .running import _call, _check


_PREVIOUS_ROWS = _table(
    ("previous/not-a-head", "`{name}` should be a head like Fig. 6's, with key and query nn.Linear "
     "layers; missing or not nn.Linear: {missing}", None),
    ("previous/weight-shape", "wrong weight shape: head.{part}.weight is {got_shape}, but "
     "nn.Linear({C}, {hs}) stores its weight as (out, in) = ({hs}, {C}) and computes x @ weight.T; a "
     "matrix W written for x @ W goes in as W.T", None),
    ("previous/too-small", "this head has block_size {bs} and head_size {hs}: a head that looks back one "
     "position needs at least 2 positions and a head size of 1 or more; build it as Fig. 6's, e.g. "
     "Head(8, 8, 8)", None),
    ("previous/one-hot-size", "the inputs are one-hot position vectors, one axis per position, so the "
     "head needs C >= block_size; this one has C = {C} and block_size = {bs}", None),
    ("previous/next", "your query t matches the key of position t + 1 best, but the causal mask hides the "
     "future, so row {t} falls back on nearly even weights over 0..{t} ({prev:.2f} on t - 1); shift the "
     "other way. If you wrote W for x @ W, remember that nn.Linear computes x @ weight.T, so it needs W.T",
     None),
    ("previous/self", "your head attends to itself: row {t} puts {own:.2f} on position {t} (the diagonal) "
     "and {prev:.2f} on t - 1; query t matches its own key best, which is what W_Q = W_K tends to give; "
     "make query t match the key of position t - 1 instead, by shifting one of the matrices by one position",
     None),
    ("previous/two-back", "your head looks two back: row {t} puts {two:.2f} on position t - 2 and only "
     "{prev:.2f} on t - 1; shift by one position, not two", None),
    ("previous/too-soft", "your head prefers t - 1, but softly: row {t} puts only {prev:.2f} on t - 1, and "
     "at least 0.9 is needed; the scores are divided by √head_size = {root:.3g}, so make the score of "
     "(t, t - 1) larger: multiply W_Q (or W_K) by a bigger number", None),
    ("previous/weak", "row {t} puts only {prev:.2f} on position t - 1; its largest weight, {top:.2f}, is on "
     "position {s}. (Row 0 is not tested: its only allowed key is itself, so it is always [1, 0, 0, ...].)",
     None),
)


@_check
def check_previous_token_head(head):
    """Chapter 6, the exercise "set W_Q and W_K by hand": a head that attends to the previous position.

    ``head`` is a head built like Fig. 6's ``Head(C, head_size, block_size)`` with C = block_size (or
    more), whose ``query`` and ``key`` weights the learner has set by hand; or, so that a stub reports
    "not yet implemented", a function of no arguments returning it. The check reads only
    ``head.query``, ``head.key`` (bias included) and the size of ``head.tril`` (block_size; C when the
    head has no ``tril``), never the learner's forward.

    Inputs: one-hot position vectors, ``x = torch.eye(block_size, C)[None]`` (row t is position t), so
    the scores are ``q @ kᵀ / √head_size`` of those rows with the future masked, as in
    :class:`attention_lab.reference.ReferenceHead`. Passes when every position t >= 1 puts at least
    0.9 of its weight on t - 1; row 0 is skipped (its only allowed key is itself, so it is [1, 0, ...]).

    Names: a weight stored as (in, out) instead of (out, in), C too small for one-hot positions,
    attending to the next position (masked, so the row falls back), attending to itself (W_Q = W_K),
    looking two back, weights too soft (with the weight on t - 1), and any other weak row.
    """
    if callable(head) and not isinstance(head, nn.Module):
        head, _ = _call(head, inputs="no arguments")
    name = _name(head)
    missing = [n for n in ("key", "query") if not isinstance(getattr(head, n, None), nn.Linear)]
    if missing:
        _fail("previous/not-a-head", name=name, missing=", ".join(missing))
    for part in ("query", "key"):
        layer = getattr(head, part)
        C, hs = layer.in_features, layer.out_features
        for t in (layer.weight, layer.bias):
            if t is not None:
                _fail_unless_float_cpu(t, what=f"head.{part}.{'weight' if t is layer.weight else 'bias'}",
                                       where="the head's own layer")
        if tuple(layer.weight.shape) != (hs, C):
            _fail("previous/weight-shape", part=part, got_shape=_shape(layer.weight), C=C, hs=hs)
    C, hs = head.query.in_features, head.query.out_features
    tril = getattr(head, "tril", None)
    bs = tril.shape[-1] if isinstance(tril, torch.Tensor) and tril.dim() >= 2 else C
    if bs < 2 or hs < 1:
        _fail("previous/too-small", bs=bs, hs=hs)
    if C < bs:
        _fail("previous/one-hot-size", C=C, bs=bs)
    x = torch.eye(bs, C)[None]  # (1, T, C): row t is the one-hot vector of position t
    q, k = _project(x, head.query)[0], _project(x, head.key)[0]  # (T, hs) each
    scores = q @ k.T / math.sqrt(hs)  # (T, T), before the mask
    w = _weights(scores)
    t = torch.arange(1, bs)
    prev = w[t, t - 1]
    worst = int(t[prev.argmin()])
    if prev.min() >= 0.9:
        return (f"every position t >= 1 puts at least 0.9 of its weight on t - 1 (lowest {prev.min():.2f}, "
                f"at t = {worst}; block_size {bs}); row 0 can only be [1, 0, 0, ...]")
    fields = dict(t=worst, prev=float(w[worst, worst - 1]), own=float(w[worst, worst]), root=math.sqrt(hs))
    rows = range(1, bs)
    favourite = [int(w[r, : r + 1].argmax()) for r in rows]  # each row's largest allowed weight
    if bs > 2 and sum(int(scores[r].argmax()) == r + 1 for r in range(bs - 1)) > (bs - 1) / 2:
        _fail("previous/next", **fields)
    if sum(f == r for f, r in zip(favourite, rows)) > len(rows) / 2:
        _fail("previous/self", **fields)
    if bs > 2 and sum(f == r - 2 for f, r in zip(favourite, rows) if r >= 2) > (bs - 2) / 2:
        worst2 = max(2, worst)
        _fail("previous/two-back", **{**fields, "t": worst2, "prev": float(w[worst2, worst2 - 1]),
                                      "two": float(w[worst2, worst2 - 2])})
    if all(f == r - 1 for f, r in zip(favourite, rows)):
        _fail("previous/too-soft", **fields)
    s = int(w[worst, : worst + 1].argmax())
    _fail("previous/weak", **fields, top=float(w[worst, s]), s=s)


@dataclasses.dataclass(kw_only=True)
class DistanceCase(Case):
    """One batch of causal weights of the distance check, in float64, with its right profile."""

    w: torch.Tensor  # (B, T, T)
    ref: torch.Tensor  # (T,)
    B: int
    T: int
    last: int  # T - 1
    rows: int  # B * T


def _by_distance(w: torch.Tensor, side: int = -1, rows: str = "mean") -> torch.Tensor:
    """A (T,) profile of (B, T, T) weights, in float64: entry d is the mean of w[b, i, i - d] over every
    b and every query i >= d. The keyword arguments rebuild the mistakes: ``side=1`` reads the
    diagonals above, (i, i + d); ``rows="all"`` divides each distance's sum by all B·T rows, ``"sum"``
    sums over the rows (and averages over the batch), ``"both"`` counts |i - j| = d on both sides."""
    w = w.detach().to(torch.float64)
    B, T, _ = w.shape
    out = []
    for d in range(T):
        diag = torch.diagonal(w, offset=side * d, dim1=-2, dim2=-1)  # (B, T - d)
        if rows == "mean":
            out.append(diag.mean())
        elif rows == "all":
            out.append(diag.sum() / (B * T))
        elif rows == "sum":
            out.append(diag.sum() / B)
        else:  # "both": the T - d entries above the diagonal (all 0) join the mean
            out.append(diag.sum() / (B * (T - d) * (1 if d == 0 else 2)))
    return torch.stack(out)


def _per_sequence(case, got):
    if tuple(got.shape) == (case.B, case.T) and case.B > 1:
        rows = torch.stack([_by_distance(case.w[b : b + 1]) for b in range(case.B)])
        return dict(got_shape=_shape(got)) if _matches(got, rows) else None
    return None


def _summed(case, got):
    for total in (_by_distance(case.w, rows="sum"), _by_distance(case.w, rows="sum") * case.B):
        if _matches(got, total):
            return {}
    return None


_DISTANCE_ROWS = _table(
    ("distance/per-sequence", "you returned one profile per sequence, shape {got_shape}: average over the "
     "batch as well, so that the answer holds one number per distance, shape ({T},)", _per_sequence),
    ("distance/last-row", "you used only the last query, row T - 1 = {last}: every query i >= d has a key "
     "d positions back, so average weights[b, i, i - d] over all of them (and over the batch), not over "
     "the last row alone", _answer_is(lambda c: c.w[:, -1].flip(-1).mean(0))),
    ("distance/wrong-side", "distances counted from the wrong side: entry (i, i + d) lies above the "
     "diagonal, in the future the mask hides, so every distance but 0 came out 0; the key d positions back "
     "from query i is i - d: torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _answer_is(lambda c: _by_distance(c.w, side=1))),
    ("distance/both-sides", "you counted the distance as |i - j|, on both sides of the diagonal: each "
     "distance d >= 1 then also averages the T - d entries above the diagonal, which the causal mask sets "
     "to 0, and its mean is halved; a causal head only looks back, so d = i - j with j <= i",
     _answer_is(lambda c: _by_distance(c.w, rows="both"))),
    ("distance/all-rows", "you divided each distance's total by all B·T = {rows} rows: only the T - d "
     "queries i >= d have a key d positions back, so divide by B·(T - d), or take the mean of the "
     "diagonal torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _answer_is(lambda c: _by_distance(c.w, rows="all"))),
    ("distance/sum", "you summed the weights at each distance instead of averaging them: divide each "
     "distance's total by the number of weights at that distance, B·(T - d), or take .mean() of its "
     "diagonal", _summed),
    ("distance/to-one", "you rescaled the profile to sum to one: the mean weights at the T distances need "
     "not add up to one (each averages a different set of rows), so return the means as they are",
     _answer_is(lambda c: c.ref / c.ref.sum())),
    ("distance/key-position", "you averaged by key position (over the batch and the queries): entry j is "
     "then the weight that position j receives from every query, whatever its distance; index by "
     "distance instead, entry d averaging weights[b, i, i - d]", _answer_is(lambda c: c.w.mean((0, 1)))),
)


@_check
def check_weight_by_distance(fn):
    """Chapter 6, exercise ``ex-trained-distance``: ``fn(weights)`` measures how far back a head looks.

    ``weights`` are causal attention weights of shape (B, T, T). The answer is a (T,) tensor whose entry
    d is the mean of ``weights[b, i, i - d]`` over every sequence b and every query i >= d, the queries
    that have a key d positions back: entry 0 is the mean weight on the diagonal, entry T - 1 is row
    T - 1's weight on position 0. Any way of computing it passes (``torch.diagonal``, a loop, masks).

    Names: one profile per sequence, the last row only, distances counted above the diagonal or on both
    sides (|i - j|), each distance divided by all B·T rows, sums instead of means, a profile rescaled to
    sum to one, an average by key position.
    """
    shapes = [(4, 8), (1, 1), (3, 5), (2, 12)]
    for B, T in shapes:
        weights = _weights(torch.randn(B, T, T) * 2).to(torch.float32)  # (B, T, T), causal
        expected = _by_distance(weights)
        case = DistanceCase(w=weights.to(torch.float64), ref=expected, B=B, T=T, last=T - 1, rows=B * T)
        where = f"causal weights of shape {_shape(weights)}"
        got, _ = _call(fn, weights.clone(), inputs=where, case=case)
        _compare(got, expected, what="your profile", where=where, case=case, table=_DISTANCE_ROWS)
    return (f"your profile is the mean weight at each distance d, over every query with a key d back "
            f"(tested {_tested('T', [s[1] for s in shapes])}; {_tested('B', [s[0] for s in shapes])})")


def _look_back(model: nn.Module, lines: list[str], *, mask: bool = True, scale: bool = True,
               how: str = "mean") -> torch.Tensor:
    """Each line's look-back, in float64: the line run alone from position 0 through ``model``'s tables
    and head, then the mean over its positions t of sum_j w[t, j] (t - j), how far back the weight of
    row t lands on average. ``mask=False`` (keys after t too), ``scale=False`` (no 1/√d_k) and ``how``
    ("sum" or "max" over the positions) rebuild the mistakes."""
    from attention_lab import text

    bs = model.position_table.weight.shape[0]
    sizes = torch.tensor([len(s) for s in lines])  # (N,)
    ids = torch.zeros(len(lines), bs, dtype=torch.long)  # (N, bs): each line, padded on the right
    for n, s in enumerate(lines):
        ids[n, : len(s)] = torch.tensor(text.encode(s))
    x = (model.token_table.weight.detach().to(torch.float64)[ids]
         + model.position_table.weight.detach().to(torch.float64))  # (N, bs, C)
    q, k = _project(x, model.head.query), _project(x, model.head.key)  # (N, bs, hs) each
    scores = q @ k.mT * (k.shape[-1] ** -0.5 if scale else 1.0)  # (N, bs, bs)
    t = torch.arange(bs)
    keep = (t[None, None, :] < sizes[:, None, None])  # (N, 1, bs): keys inside the line
    if mask:
        keep = keep & (t[None, None, :] <= t[None, :, None])  # (N, bs, bs): and not after the query
    w = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)  # (N, bs, bs)
    back = (w * (t[:, None] - t[None, :])).sum(-1)  # (N, bs): how far back each row looks
    rows = t[None, :] < sizes[:, None]  # (N, bs): the line's own positions
    if how == "max":
        return back.masked_fill(~rows, -math.inf).max(-1).values
    total = (back * rows).sum(-1)
    return total if how == "sum" else total / sizes


@dataclasses.dataclass(kw_only=True)
class FurthestCase(Case):
    """One model and list of lines of the furthest-line check; ``other`` is the trained model where
    ``model`` is the untrained one (else None)."""

    model: nn.Module
    lines: list
    other: nn.Module | None
    hs: int


def _picks(how: dict, *, least: bool = False, model: str = "model"):
    """A match for a mistake whose measure ``_look_back(case.<model>, lines, **how)`` ranks the
    learner's line first (last, with ``least``); none where the case has no such model."""

    def match(case, got):
        head = getattr(case, model)
        if head is None:
            return None
        values = _look_back(head, case.lines, **how)
        best = values.min() if least else values.max()
        return {} if abs(float(values[case.lines.index(got)] - best)) < 1e-6 else None

    return match


_FURTHEST_ROWS = _table(
    ("furthest/not-a-line", "your `{name}` returned {got!r}, a {type}, not a line: return the str itself, "
     "the element of `lines` whose look-back is largest ({where})", None),
    ("furthest/not-in-lines", "your answer {got!r} is not one of the {n} lines your `{name}` was given "
     "({where}): search the `lines` argument, not a list from outside the function, and return the line "
     "as it is", None),
    ("furthest/ignores-model", "given the untrained head, your `{name}` returned the trained head's line: it "
     "must take the weights from its `model` argument, not from a model defined outside the function",
     _picks({}, model="other")),
    ("furthest/least", "you found the line that looks back least: you took the smallest look-back (min, "
     "argmin), or counted the distance as j - t, which the causal mask never lets be positive; the key j "
     "of query t is t - j >= 0 positions back, and the answer is the line with the largest mean",
     _picks({}, least=True)),
    ("furthest/sum", "your measure grows with the length of the line: you summed over the positions, or "
     "averaged over padding positions as well; a line's look-back is the mean over its own len(line) "
     "positions", _picks({"how": "sum"})),
    ("furthest/max", "you ranked the lines by their single furthest-looking position (a max over the "
     "positions); a line's look-back is the mean, over all its positions t, of Σ_j w[t, j]·(t - j)",
     _picks({"how": "max"})),
    ("furthest/no-mask", "your weights have no causal mask: query t also gave weight to keys after it; "
     "fill the scores with -inf where tril[:T, :T] == 0 before the softmax, as the head does",
     _picks({"mask": False})),
    ("furthest/no-scale", "your scores were not divided by √head_size = √{hs}: the head's weights are "
     "softmax(q @ kᵀ / √d_k) under the causal mask", _picks({"scale": False})),
    ("furthest/differ", "your line {got!r} looks {mine:.3f} characters back on average, but another of the "
     "{n} lines looks further back, up to {best:.3f} ({where}); a line's look-back is the mean over its "
     "positions t of Σ_j w[t, j]·(t - j), with the line run alone from position 0", None),
)


@_check
def check_furthest_line(fn):
    """Chapter 6, exercise ``ex-trained-furthest``: ``fn(model, lines)`` returns the line of ``lines``
    on which the head of ``model`` looks furthest back.

    ``model`` is chapter 6's model (``token_table``, ``position_table``, ``head`` with ``key``, ``query``
    and ``tril``); ``lines`` is a list of strings of 2 to block_size characters. A line's look-back: run
    the line alone, from position 0, through the tables and the head; row t of the weights looks
    ``Σ_j w[t, j]·(t - j)`` characters back on average; the look-back of the line is the mean of that
    over its positions t = 0..T-1. The answer is the line (a str) with the largest look-back.

    Tested on the shipped trained head with the lines of the validation text (chapter 6's ``lines``),
    on the untrained head with every third of them, and on the trained head with the first 300 lines
    of at most 12 characters. Names: not a str, a line that was not given, a model taken from outside the function,
    the smallest look-back (or distances j - t), a sum (or padding averaged in), a max over positions,
    weights without the mask or without the 1/√d_k scaling; else says how far back the learner's line
    looks, and how far the furthest does, without naming it.
    """
    from attention_lab import text, training

    trained, untrained = training.load_trained()[:2]
    lines = text.validation_lines(trained.position_table.weight.shape[0])
    # every line, for the answer; a third of them through the untrained head, where a function that
    # reads a model from outside gives itself away; 300 short lines, where a sum and a mean disagree
    short = [s for s in lines if len(s) <= 12][:300]
    cases = [("the trained head", trained, lines, None), ("the untrained head", untrained, lines[::3], trained),
             ("the trained head", trained, short, None)]
    name = _name(fn)
    for label, model, given, other in cases:
        values = _look_back(model, given)  # before the learner's code runs, which could change the model
        where = f"{label} and {len(given):,} lines of the validation text"
        # a loop over lines runs thousands of tiny products: with one thread, tens of times faster on a
        # busy machine; the learner's setting is restored
        with training.one_thread():
            got, _ = _call(fn, model, list(given), inputs=where)
        fields = dict(name=name, got=got, where=where, n=len(given), type=type(got).__name__)
        if not isinstance(got, str):
            _fail("furthest/not-a-line", **fields)
        if got not in given:
            _fail("furthest/not-in-lines", **fields)
        mine, best = float(values[given.index(got)]), float(values.max())
        if mine >= best - 1e-6:
            continue
        case = FurthestCase(model=model, lines=given, other=other, hs=model.head.key.out_features)
        row, found = _first(_FURTHEST_ROWS, case, got)
        if row is not None:
            raise CheckFailed(_fill(row.message, fields, case.sizes(), found) + f"\n  ({where})", row.id)
        _fail("furthest/differ", mine=mine, best=best, **fields)
    return (f"your line is the one where the head looks furthest back, on average over its positions "
            f"(tested the trained head on {len(lines):,} lines and {len(short)} short ones, the untrained "
            f"head on {len(lines[::3])})")
