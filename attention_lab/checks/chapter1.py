"""Chapter 1's check: the causal average written with cumsum (:func:`check_cumsum_average`)."""
from __future__ import annotations


import torch

from .engine import Case, _answer_is, _fail, _matches, _shape, _table
from .hints import _ELEMENTWISE, _HINTS
from .running import _check, _try


def _row_mean(w: torch.Tensor) -> torch.Tensor:
    return w / w.sum(1, keepdim=True)


def _cumsum_axis(case, got):
    for dim, axis in ((0, "the batch"), (2, "the channels")):
        if _matches(got, case.x.cumsum(dim) / case.counts):
            return dict(dim=dim, axis=axis)
    return None


def _counts_read(case, got):
    """The count each position was divided by, read off the answer: right but at some positions."""
    sums = case.x.cumsum(1)  # (B, T, C)
    g = got.detach().to(torch.float64)
    if tuple(g.shape) != tuple(sums.shape) or not torch.isfinite(g).all():
        return None
    usable = (g.abs() > 1e-6) & (sums.abs() > 1e-3)
    ratio = torch.where(usable, sums / g.where(usable, 1.0), torch.nan)  # (B, T, C)
    counts = ratio.transpose(0, 1).flatten(1).nanmedian(1).values  # (T,): each position's divisor
    if torch.isnan(counts).any() or not _matches(got, sums / counts.view(1, -1, 1)):
        return None
    right = case.counts.flatten()
    wrong = (counts - right).abs() > 1e-3
    if not wrong.any() or torch.allclose(counts / right, counts[:1] / right[:1]):
        return None  # right, or every count times one factor: the result is scaled, no count is off
    t = int(wrong.nonzero()[0])
    return dict(t=t, n=t + 1, count=float(counts[t]))


def _counts_fixed(case, got):
    """Counts of one fixed length n, such as torch.arange(1, 9): on a one-position input the division
    broadcasts x's single position to n of them."""
    if not isinstance(got, torch.Tensor) or got.dim() != 3 or got.shape[1] in (case.T, 1) or case.T != 1:
        return None
    n = got.shape[1]
    if _matches(got, case.x.cumsum(1) / torch.arange(1, n + 1, dtype=torch.float64).view(1, n, 1)):
        return dict(n=n, n1=n + 1)
    return None


def _floor_divided(case, got):
    """x.cumsum(1) // counts: computed as the learner does, in float32, so that no mean near a whole
    number floors the other way."""
    sums = case.x.to(torch.float32).cumsum(1)
    return {} if _matches(got, torch.div(sums, case.counts.to(torch.float32), rounding_mode="floor")) else None


def _counts_axis(case, failure):
    call = failure.call
    if call is None or call.name not in _ELEMENTWISE:
        return None
    for t in call.tensors:
        if t.dim() < 3 and t.shape[-1] == case.T and tuple(t.shape) != (case.T, 1):
            return dict(counts=_shape(t))
    return None


_AVERAGE_ROWS = _table(
    ("average/future-mean", "your causal average includes the future: position t must average positions "
     "0..t only (a lower-triangular torch.tril), not the whole sequence",
     _answer_is(lambda c: c.x.mean(1, keepdim=True).expand_as(c.x))),
    ("average/future-triu", "your causal average includes the future: it averages positions t..T-1 "
     "(torch.triu); position t must average positions 0..t (torch.tril)",
     _answer_is(lambda c: _row_mean(c.ones.triu()) @ c.x)),
    ("average/no-current", "your causal average leaves out the current token: position t must average "
     "0..t, including t itself (x[b, : t + 1], or torch.tril without a diagonal offset)",
     _answer_is(lambda c: _row_mean(c.ones.tril(-1)) @ c.x)),
    ("average/sum", "you summed instead of averaging: divide position t by t + 1, the number of tokens "
     "it averages (the running count, or each row's sum of a tril matrix)", _answer_is(lambda c: c.x.cumsum(1))),
    ("average/divide-by-T", "you divided every position by T: position t averages t + 1 tokens, so divide "
     "by the running count t + 1 (torch.arange(1, T + 1)), not by T = {T}",
     _answer_is(lambda c: c.x.cumsum(1) / c.T)),
    ("average/count-from-zero", "your counts start at 0: position 0 is divided by 0, which gives inf (or "
     "nan), and every later position by one too few; position t averages t + 1 tokens: "
     "torch.arange(1, T + 1)", _answer_is(lambda c: c.x.cumsum(1) / (c.counts - 1))),
    ("average/counts-fixed", "your counts are hard-coded to one length: the result has {n} positions for an "
     "input of T = {T}, because counts such as torch.arange(1, {n1}) fit only a sequence of {n}; take the length "
     "from the input, T = x.shape[1], and divide by torch.arange(1, T + 1)", _counts_fixed),
    ("average/floor-division", "you divided with //, which rounds every mean down to a whole number (floor "
     "division); the running mean needs true division, /: x.cumsum(dim=1) / counts", _floor_divided),
    ("average/cumsum-axis", "cumsum over the wrong axis: dim={dim} runs over {axis}; the positions are "
     "axis 1, so take x.cumsum(dim=1)", _cumsum_axis),
    ("average/columns", "you normalized the columns, not the rows: w / w.sum(dim=1, keepdim=True) makes "
     "each row sum to one", _answer_is(lambda c: (c.ones.tril() / c.ones.tril().sum(0, keepdim=True)) @ c.x)),
    ("average/no-keepdim", "w.sum(1) without keepdim=True has shape (T,), which broadcasting lines up with "
     "the columns: entry (i, j) was divided by j + 1 instead of by row i's own count i + 1; use "
     "w.sum(dim=1, keepdim=True)", _answer_is(lambda c: (c.ones.tril() / c.ones.tril().sum(1)) @ c.x)),
    ("average/counts", "your counts are wrong at position {t}: it was divided by {count:.4g}, but it "
     "averages the t + 1 = {n} tokens 0..{t}; divide position t by t + 1, the running count "
     "torch.arange(1, T + 1), at every position, the last one too", _counts_read),
    ("average/no-cumsum", "right numbers, but no cumsum: your function never calls torch.cumsum (or "
     "x.cumsum); this exercise asks for the running sum x.cumsum(dim=1) divided by the running count",
     None),
)

_AVERAGE_HINTS = _table(
    ("average/hint-counts-axis", "your counts have shape {counts}, and broadcasting lines up the last "
     "axes, so they met x's channels (C = {C}), not its positions; give them one count per row, shape "
     "(T, 1): torch.arange(1, T + 1).view(T, 1) (or [:, None])", _counts_axis),
) + _HINTS


def _average_shapes(trial) -> list[tuple[int, int, int]]:
    """(B, T, C) of each input: the chapter's, B = T = 1, a long and a short one drawn, and the long
    one again with new numbers (an answer that keeps results by shape fails there)."""
    long = (trial.integer(2, 4), trial.integer(13, 64), trial.integer(2, 9))
    short = (trial.integer(1, 3), trial.integer(2, 12), trial.integer(2, 9))
    return [(4, 8, 384), (1, 1, 3), long, short, long]


@_check
def check_cumsum_average(fn, *, trial):
    """Chapter 1, the exercise "the causal average with cumsum": ``fn(x)`` maps (B, T, C) to its causal
    running mean, ``x.cumsum(dim=1)`` divided by the running counts 1, 2, ..., T; the right numbers
    without a call of cumsum fail.
    """
    for B, T, C in _average_shapes(trial):
        x = trial.randn(B, T, C)
        x64 = x.to(torch.float64)
        counts = torch.arange(1, T + 1, dtype=torch.float64).view(1, T, 1)
        expected = x64.cumsum(1) / counts
        case = Case(x=x64, B=B, T=T, C=C, counts=counts, ones=torch.ones(T, T, dtype=torch.float64))
        where = f"x of shape {_shape(x)}"
        _, watch = _try(fn, (x,), expected, what="your causal average", where=where, case=case,
                        table=_AVERAGE_ROWS, hints=_AVERAGE_HINTS, trial=trial)
        if not (watch.calls["cumsum"] or watch.calls["cumsum_"]):
            _fail("average/no-cumsum")
    return "your causal average, built with cumsum, matches the running mean (tested 5 inputs: T = 1 to 64, B = 1 to 4)"
