"""A head's mistakes, shared by chapter 5's checks: rebuilt from the head's own weights, or measured.

:data:`_HEAD_ROWS` (with :data:`_MASK_ROWS`) rebuild each mistake with :func:`.references._head_output`'s
keyword arguments; :data:`_MEASURED_ROWS` read it off the weights the learner's head really uses, for
forms no rebuilt row covers (a finite fill, a past key hidden, a scale after the softmax, any other
scale, weights that ignore the scores).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from .engine import Case, _matches, _reference_with, _table


@dataclasses.dataclass(kw_only=True)
class HeadCase(Case):
    """A head and one input x, as the head's mistakes read them."""

    C: int  # the model width, x.shape[-1]
    hs: int  # the head size, d_k
    T: int
    build: Callable  # (**variant) -> the head's output (or weights) with that mistake, or None
    raw: torch.Tensor | None = None  # (B, T, T) q @ kᵀ in float64, unscaled
    weights: Callable | None = None  # () -> the (B, T, T) weights the answer uses, or None if unreadable
    bs: int | None = None  # block_size, where the check built the head


# the sizes the lesson fixes (head_size, C, the real batch's C, block_size): a scale written with one of
# them works for that head only
_LESSON_SIZES = (16, 384, 32, 8)


def _fixed_scale(case, got):
    for n in _LESSON_SIZES:
        if n not in (case.hs, case.C):
            candidate = case.build(scale=n ** -0.5)
            if candidate is not None and _matches(got, candidate):
                return dict(n=n)
    return None


# mistakes in the mask and the softmax, shared by every check that masks: the keyword arguments rebuild them
_MASK_ROWS = _table(
    ("mask/hides-past", "your mask hides the past instead of the future: row i must keep columns j <= i; "
     "fill the scores where tril == 0 (torch.tril), not where tril == 1",
     _reference_with(dict(mask="past"), dict(mask="past-strict"))),
    ("mask/hides-diagonal", "your mask also hides the current token (the diagonal): row i must keep j <= i, "
     "including j = i; use torch.tril(...) without a diagonal offset", _reference_with(dict(mask="diagonal"))),
    ("mask/none", "no mask: the weights above the diagonal are not 0, so every position sees the future; "
     "fill the scores with -inf where tril[:T, :T] == 0 before the softmax", _reference_with(dict(mask="none"))),
    ("mask/after-softmax", "masking after the softmax: the softmax had already spread each row over every "
     "key, so overwriting the future afterwards leaves rows that don't sum to one (or inf and nan, with "
     "-inf); fill the scores with -inf first, then take the softmax",
     _reference_with(dict(after=0.0), dict(after=-math.inf), dict(after=-1e9))),
    ("mask/fill-zero", "the future was filled with 0 instead of -inf: exp(0) = 1, so the future still gets "
     "weight; use float('-inf') (or -1e9)", _reference_with(dict(fill=0.0))),
    ("mask/softmax-columns", "softmax over the wrong axis: dim=-2 makes the columns sum to one; use dim=-1 "
     "(each row, over the keys)", _reference_with(dict(dim=-2))),
    ("mask/softmax-batch", "softmax over the wrong axis: dim=0 normalizes across the batch; use dim=-1 "
     "(each row, over the keys)", _reference_with(dict(dim=0))),
)

# a head's mistakes, rebuilt from its own weights (check_head, check_real_batch_weights,
# check_multihead_sdpa); case.hs is the head size, case.C the model width
_HEAD_ROWS = _table(
    ("head/no-scale", "no 1/√d_k scaling: divide the scores by √d_k = √{hs} (d_k is the head size, "
     "k.shape[-1])", _reference_with(dict(scale=1.0))),
    ("head/divide-dk", "dividing by d_k: you divided the scores by d_k = {hs}; divide by its square root, "
     "√d_k", _reference_with(lambda c: dict(scale=1 / c.hs))),
    ("head/sqrt-C", "scaling by √C: you divided the scores by √C = √{C}, the model width; the scale is "
     "1/√d_k with d_k = head_size = {hs}", _reference_with(lambda c: dict(scale=c.C ** -0.5))),
    ("head/multiply", "multiplying by √d_k: divide the scores by √d_k = √{hs}, don't multiply",
     _reference_with(lambda c: dict(scale=c.hs ** 0.5))),
    ("head/fixed-scale", "your scale is a fixed number, 1/√{n}: it fits one head size only; this head's "
     "d_k is {hs}, so take it from the tensors, k.shape[-1]", _fixed_scale),
    *_MASK_ROWS,
    ("head/averages-x", "averaging x instead of v: the output is weights @ v, the values, not weights @ x",
     _reference_with(dict(values="x"))),
    ("head/averages-k", "averaging k instead of v: the output is weights @ v, the values",
     _reference_with(dict(values="k"))),
    ("head/averages-q", "averaging q instead of v: the output is weights @ v, the values",
     _reference_with(dict(values="q"))),
    ("head/qk-swapped", "q and k swapped: scores = k @ qᵀ transposes the weights; row i must be query i "
     "against every key: q @ k.transpose(-2, -1)", _reference_with(dict(swap=True))),
)

# mistakes named by measurement, from the weights a head really uses (case.weights(): (B, T, T) in
# float64, or None where they cannot be read) and its raw scores case.raw = q @ kᵀ; they name forms
# that no row above rebuilds

SUPPORT = 1e-6  # a weight below this counts as masked when reading which keys a row uses


def _future(W: torch.Tensor) -> torch.Tensor:
    T = W.shape[-1]
    return torch.ones(T, T, dtype=torch.bool).triu(1).expand(W.shape)


def _read_weights(case: HeadCase):
    W = case.weights() if case.weights is not None else None
    return W if W is not None and W.dim() == 3 else None


def _implied_fill(case, W, b, i, j) -> float:
    """The score a masked entry must have had: w_ij / w_ii = exp(fill - s_ii), s the scaled scores."""
    s_ii = float(case.raw[b, i, i]) * case.hs ** -0.5
    return math.log(float(W[b, i, j]) / float(W[b, i, i])) + s_ii


def _leak(case, got, finite: bool):
    """The first future entry with weight: a tiny one (finite=True) from a finite fill, else a real one."""
    W = _read_weights(case)
    if W is None or torch.isnan(W).any():
        return None
    seen = _future(W) & (W > 0)
    if not seen.any():
        return None
    b, i, j = (int(n) for n in seen.nonzero()[0])
    fill = _implied_fill(case, W, b, i, j) if W[b, i, i] > 0 else 0.0
    if finite != (fill < -3):  # -3: the weight is e^3 = 20 times below an unmasked one of score 0
        return None
    return dict(b=b, i=i, j=j, w=float(W[b, i, j]), fill=fill)


def _hidden_past(case, got):
    W = _read_weights(case)
    if W is None:
        return None
    nan_rows = torch.isnan(W).any(-1)
    if nan_rows.any():
        b, i = (int(n) for n in nan_rows.nonzero()[0])
        return dict(b=b, i=i, detail=f"row {i} is nan: every one of its keys is masked, key {i} itself "
                                     f"too, and a softmax over nothing but -inf is 0 / 0")
    past = ~_future(W) & (W <= 0)
    if not past.any():
        return None
    b, i, j = (int(n) for n in past.nonzero()[0])
    return dict(b=b, i=i, detail=f"row {i} gives key {j} no weight, though {j} <= {i}")


def _scaled_after(case, got):
    W = _read_weights(case)
    if W is None or torch.isnan(W).any():
        return None
    sums = W.sum(-1)
    total = float(sums.mean())
    if abs(total - 1) < 1e-3 or not torch.allclose(sums, torch.full_like(sums, total), rtol=1e-4, atol=1e-6):
        return None
    return dict(total=total, square=1 / total**2)


def _scale_read(case, got):
    """The factor s in softmax(s * q @ kᵀ) that fits the weights the head uses, if not 1/√d_k."""
    W = _read_weights(case)
    if W is None or torch.isnan(W).any():
        return None
    used = W > SUPPORT
    n = used.sum(-1, keepdim=True).clamp_min(1)
    L = torch.where(used, W.clamp_min(1e-300).log(), 0.0)
    dL = (L - L.sum(-1, keepdim=True) / n) * used
    S = case.raw.to(torch.float64)
    dS = (S * used - (S * used).sum(-1, keepdim=True) / n) * used
    if float((dS * dS).sum()) < 1e-12:
        return None
    s = float((dL * dS).sum() / (dS * dS).sum())
    pred = torch.softmax((s * S).masked_fill(~used, -math.inf), -1).nan_to_num(0.0)
    right = case.hs ** -0.5
    if float((pred - W).abs().max()) > 1e-4 or abs(s - right) < 1e-3 * right or abs(s) < 1e-6 * right:
        return None  # (s about 0: weights that ignore the scores, _uniform's case)
    root = f" (= 1/√{1 / s**2:.4g})" if s > 0 else " (a negative factor: a large score now gets less weight)"
    return dict(s=s, as_root=root, right=right)


def _uniform(case, got):
    """Weights spread evenly over the keys each row sees, whatever the scores: they play no part."""
    W = _read_weights(case)
    if W is None or torch.isnan(W).any() or float((case.raw.to(torch.float64).diff(dim=-1)).abs().max()) < 1e-9:
        return None
    seen = W > SUPPORT
    even = seen / seen.sum(-1, keepdim=True).clamp_min(1)
    return {} if float((W - even).abs().max()) < 1e-6 else None


_MEASURED_ROWS = _table(
    ("mask/finite-fill", "the mask fills the future with a finite number, about {fill:.3g} (batch {b}, row "
     "{i}: key {j}, after it, gets weight {w:.3g}, not exactly 0): exp of a finite fill is not 0, and "
     "larger scores would let the future through; fill with float('-inf'), or -1e9, whose exp is "
     "exactly 0", lambda c, got: _leak(c, got, finite=True)),
    ("head/sees-future", "not causal: row {i} gives key {j} the weight {w:.3g} (batch {b}), though key {j} "
     "comes after it; every key j > i must get exactly 0: fill the scores where tril[:T, :T] == 0 with "
     "-inf, before the softmax", lambda c, got: _leak(c, got, finite=False)),
    ("head/hides-key", "your mask hides keys it must keep: {detail} (batch {b}); the comparison that builds "
     "the mask picks the wrong entries: fill where tril[:T, :T] == 0, which is True exactly above the "
     "diagonal", _hidden_past),
    ("head/scale-after-softmax", "every row of your weights sums to {total:.4g}, not 1: the output is "
     "scaled after the softmax (by {total:.4g} = 1/√{square:.4g}); the scale belongs on the scores, "
     "before it: softmax(q @ kᵀ / √d_k), and nothing multiplies the weights or the output afterwards",
     _scaled_after),
    ("head/ignores-scores", "every row of your weights is spread evenly over the keys it sees, whatever q "
     "and k are: the scores play no part (multiplied by 0, or the softmax taken of something else); the "
     "weights are softmax(q @ kᵀ / √d_k) over the scores, masked", _uniform),
    ("head/other-scale", "your scores are multiplied by {s:.4g}{as_root} before the softmax; "
     "the scale is 1/√d_k = 1/√{hs} = {right:.4g}, with d_k the head size, k.shape[-1]", _scale_read),
)


