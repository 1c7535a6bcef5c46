"""Chapter 4's check: weights that are causal and give padding no weight (:func:`check_padding_mask`)."""
from __future__ import annotations

import math

import torch

from .engine import Case, _answer_is, _fail, _matches, _shape, _table
from .heads import SUPPORT
from .hints import _ELEMENTWISE, _HINTS, _MASKING
from .references import _keep, _softmax, _weights
from .running import _check, _try


def _padded(scores, pad, *, hide="keys", causal=True, fill=-math.inf, after=None, empty=0.0):
    """Weights for scores (B, T, T) and padding flags pad (B, T); the keyword arguments rebuild mistakes.

    ``hide``: "keys" (right), "queries" (the wrong axis), "real" (the flags inverted) or None;
    ``after``: "all" softmax first and mask after, "padding" mask the future before and the padding after;
    ``empty``: what a row with no key left holds (0 is right; nan = any value).
    """
    scores = scores.to(torch.float64)
    T = scores.shape[-1]
    keep = _keep(T) if causal else _keep(T, "none")
    keep = keep.expand(scores.shape)
    keep = keep & {"keys": ~pad[:, None, :], "queries": ~pad[:, :, None], "real": pad[:, None, :],
                   None: torch.ones_like(keep)}[hide]
    if after == "all":
        weights = _softmax(scores).masked_fill(~keep, 0.0)
    elif after == "padding":
        weights = _weights(scores).masked_fill(~keep, 0.0)
    else:
        weights = _softmax(scores.masked_fill(~keep, fill))
    return torch.where(keep.any(-1, keepdim=True), weights, torch.tensor(empty, dtype=torch.float64))


def _nan_rows(case, got):
    if not case.empty.any() or not torch.isnan(got).any():
        return None
    if not _matches(got, _padded(case.scores, case.pad, empty=math.nan)):
        return None
    b, i = (int(n) for n in torch.isnan(got).any(-1).nonzero()[0])
    return dict(b=b, i=i, pads=case.pads[b])


def _columns_sum_to_one(case, got):
    """A softmax over dim=-2: the visible part of every column sums to one, the rows do not."""
    g = torch.nan_to_num(got.detach().to(torch.float64))
    if tuple(g.shape) != tuple(case.keep.shape) or case.T < 2:
        return None
    cols, rows = case.keep.any(-2), case.keep.any(-1)  # (B, T) each: a column, a row with a visible entry
    ones = torch.ones((), dtype=torch.float64)
    if torch.allclose(g.sum(-2)[cols], ones, atol=1e-4) and not torch.allclose(g.sum(-1)[rows], ones, atol=1e-4):
        return {}
    return None


def _uniform_rows(case, got):
    if not case.empty.any() or not _matches(got, _padded(case.scores, case.pad, empty=1 / case.T)):
        return None
    b, i = (int(n) for n in case.empty.nonzero()[0])  # the first row with no key left
    return dict(b=b, i=i, pads=case.pads[b])


def _pad_leak(case, got):
    """A hidden key with weight in a row that has a visible one: read the fill off the two weights."""
    g = got.detach().to(torch.float64)
    if tuple(g.shape) != tuple(case.keep.shape) or not torch.isfinite(g).all():
        return None
    leak = ~case.keep & (g > 0) & case.keep.any(-1, keepdim=True)
    if not leak.any():
        return None
    b, i, j = (int(n) for n in leak.nonzero()[0])
    k = int(case.keep[b, i].nonzero()[0])  # a key row i may see
    if g[b, i, k] <= 0:
        return None
    fill = math.log(float(g[b, i, j] / g[b, i, k])) + float(case.scores[b, i, k])
    if not _matches(got, _padded(case.scores, case.pad, fill=fill, empty=math.nan)):
        return None  # not a fill: some other change of the weights
    return dict(b=b, i=i, j=j, w=float(g[b, i, j]), fill=fill)


def _pad_seen(case, got):
    """The first hidden key with a real weight, in a row that has a key to look at."""
    g = got.detach().to(torch.float64)
    if tuple(g.shape) != tuple(case.keep.shape) or not torch.isfinite(g).all():
        return None
    seen = ~case.keep & (g > SUPPORT) & case.keep.any(-1, keepdim=True)
    if not seen.any():
        return None
    b, i, j = (int(n) for n in seen.nonzero()[0])
    return dict(b=b, i=i, j=j, w=float(g[b, i, j]), why="after it" if j > i else "padding")


def _pad_broadcast(case, failure):
    call = failure.call
    if call is None or call.name not in _MASKING | _ELEMENTWISE:
        return None
    if any(t.dtype == torch.bool and tuple(t.shape) == tuple(case.pad.shape) for t in call.tensors):
        return {}
    return None


_PADDING_ROWS = _table(
    ("pad/nan-rows", "nan in batch {b}, row {i}: that sequence has {pads} padding tokens on the left, so "
     "query {i} may only look at keys 0..{i}, all of them padding; every score in its row is -inf, and "
     "the softmax's first step, subtracting the row's largest score, gives -inf - (-inf) = nan. Make "
     "such rows all zeros: torch.nan_to_num(weights), or torch.where with a mask of the rows that have a "
     "key (multiplying by that mask is not enough: nan × 0 is still nan)", _nan_rows),
    ("pad/softmax-dim", "your weights sum to one down each column, not along each row: the softmax ran over "
     "dim=-2, the queries; a row of weights shares one query's attention among the keys, so take the "
     "softmax over dim=-1", _columns_sum_to_one),
    ("pad/uniform-rows", "batch {b}, row {i} spreads its weight evenly, 1/T on every position: every key "
     "it may see is padding, so its whole row was filled with the same large negative number and the "
     "softmax made the entries equal (the future and the padding get weight); make such rows all zeros, "
     "e.g. multiply by a mask of the rows that have a key", _uniform_rows),
    ("pad/not-masked", "the padding is not masked: real tokens still give weight to the padded keys; "
     "hide the columns where pad is True, pad[:, None, :], as well as the future",
     _answer_is(lambda c: _padded(c.scores, c.pad, hide=None))),
    ("pad/queries", "padding applied to the queries instead of the keys: pad[:, :, None] hides the rows of "
     "padded positions, but a real token still looks at padded keys; hide the columns, pad[:, None, :] "
     "(shape (B, 1, T))", _answer_is(lambda c: _padded(c.scores, c.pad, hide="queries", empty=math.nan))),
    ("pad/inverted", "your mask hides the real tokens and keeps the padding: pad is True where a "
     "position is padding, so hide the keys where pad is True (not where it is False)",
     _answer_is(lambda c: _padded(c.scores, c.pad, hide="real", empty=math.nan))),
    ("pad/future", "the future is not masked: the padding is, but position t still sees positions after "
     "t; combine both, hiding a key when it is in the future or is padding",
     _answer_is(lambda c: _padded(c.scores, c.pad, causal=False, empty=math.nan))),
    ("pad/after-softmax", "masking after the softmax: the softmax had already given the hidden keys "
     "weight, so zeroing them afterwards leaves rows that don't sum to one; fill the scores first (-inf, "
     "or torch.finfo(scores.dtype).min), then take the softmax",
     lambda c, got: {} if any(_matches(got, _padded(c.scores, c.pad, after=a, empty=math.nan))
                              for a in ("all", "padding")) else None),
    ("pad/fill-zero", "the hidden keys were filled with 0 instead of -inf: exp(0) = 1, so the future and "
     "the padding still get weight; use float('-inf') (or torch.finfo(scores.dtype).min)",
     _answer_is(lambda c: _padded(c.scores, c.pad, fill=0.0, empty=math.nan))),
    ("pad/finite-fill", "the hidden keys were filled with a finite number, about {fill:.3g}: batch {b}, row "
     "{i} gives key {j}, which it must not see, the weight {w:.3g}, not 0; exp of a finite fill is not "
     "0, and larger scores would let more through; fill with float('-inf') (or "
     "torch.finfo(scores.dtype).min, far below any score)", _pad_leak),
    ("pad/sees-hidden", "batch {b}, row {i} gives key {j} the weight {w:.3g}, though that key is {why}; a "
     "row may only look at keys that are neither after it nor padding: hide the rest with -inf, before "
     "the softmax", _pad_seen),
)

_PADDING_HINTS = _HINTS[:1] + _table(
    ("pad/hint-broadcast", "pad has shape (B, T), one flag per position; against scores of shape "
     "(B, T, T) it must hide columns of each sequence's grid, so give it the shape (B, 1, T): "
     "pad[:, None, :] (or pad.unsqueeze(1))", _pad_broadcast),
) + _HINTS[1:]


def _padding_cases(trial) -> list[tuple[int, list[int]]]:
    """(T, padding per sequence): the fixed ones (T = 8, 5, 1, and 6 for one sequence), one drawn, and
    T = 8 again with other padding and new scores."""
    T = trial.integer(2, 16)
    drawn = [trial.integer(0, T) for _ in range(trial.integer(1, 4))]
    return [(8, [0, 2, 5, 1]), (5, [3, 0, 5]), (1, [0, 1]), (6, [2]), (T, drawn), (8, [1, 0, 8, 3])]


@_check
def check_padding_mask(fn, *, trial):
    """Chapter 4, the padding-mask exercise: ``fn(scores, pad)`` returns weights that are causal and
    give no weight to padding.

    ``scores`` is (B, T, T); ``pad`` is a (B, T) bool tensor, True where a position holds padding, on the
    left. Each row is the softmax over the keys that are neither in the future nor padding; a row with
    no such key is all zeros, not nan.
    """
    for T, pads in _padding_cases(trial):
        B = len(pads)
        scores = trial.randn(B, T, T) * 2
        pad = torch.arange(T)[None, :] < torch.tensor(pads)[:, None]  # (B, T): True on the left
        expected = _padded(scores, pad)
        keep = _keep(T) & ~pad[:, None, :]
        case = Case(scores=scores, pad=pad, pads=pads, T=T, empty=~keep.any(-1), keep=keep)
        where = f"scores of shape {_shape(scores)} and pad of shape {_shape(pad)}, padding on the left {pads}"
        got, _ = _try(fn, (scores, pad), expected, what="your weights", where=where, case=case,
                      table=_PADDING_ROWS, hints=_PADDING_HINTS, trial=trial)
        leak = _pad_leak(case, got)  # close at these scores, yet not exactly 0
        if leak is not None:
            _fail("pad/finite-fill", details=f"\n  (your weights, {where})", **leak)
    return ("your weights are causal, give padding no weight, and are 0 on rows with no key to look at "
            "(tested T = 1 to 16; left padding of 0 to T tokens)")
