"""Chapter 3's checks: the scaled scores (:func:`check_scaled_scores`) and a softmax safe for large
logits (:func:`check_softmax`)."""
from __future__ import annotations

import dataclasses
import math

import torch

from .engine import ATOL, RTOL, Case, _answer_is, _compare, _matches, _shape, _table, _tested
from .references import _softmax
from .running import _call, _check


@dataclasses.dataclass(kw_only=True)
class ScoresCase(Case):
    """One pair q, k of the scores check: their product q @ kᵀ in float64, unscaled."""

    qk: torch.Tensor  # (B, T, T)
    d_k: int
    T: int


@dataclasses.dataclass(kw_only=True)
class SoftmaxCase(Case):
    """One input z of the softmax check, in float64; ``large`` for the logits such as [1000, 0]."""

    z: torch.Tensor
    large: bool


def _transposed_q(case, got):
    B, d = case.qk.shape[0], case.d_k
    return {} if tuple(got.shape) == (B, d, d) and d != case.T else None


def _other_scale(case, got):
    """A positive scalar multiple of q @ kᵀ other than the ones named above: name the divisor."""
    raw = case.qk
    if tuple(got.shape) != tuple(raw.shape) or not torch.isfinite(got).all():
        return None
    g = got.detach().to(torch.float64)
    s = float((g * raw).sum() / (raw * raw).sum())
    if s > 0 and torch.allclose(g, raw * s, rtol=RTOL, atol=ATOL):
        return dict(divisor=1 / s, square=1 / s**2)
    return None


_SCORES_ROWS = _table(
    ("scores/no-scale", "no 1/√d_k scaling: divide q @ kᵀ by √d_k = √{d_k} (d_k = q.shape[-1])",
     _answer_is(lambda c: c.qk)),
    ("scores/divide-dk", "dividing by d_k: you divided by d_k = {d_k}; divide by its square root, √d_k",
     _answer_is(lambda c: c.qk / c.d_k)),
    ("scores/multiply", "multiplying by √d_k: divide q @ kᵀ by √d_k = √{d_k}, don't multiply",
     _answer_is(lambda c: c.qk * math.sqrt(c.d_k))),
    ("scores/qk-swapped", "q and k swapped: your grid is k @ qᵀ, the transpose; entry (i, j) must be "
     "query i against key j: q @ k.transpose(-2, -1)", _answer_is(lambda c: c.qk.mT / math.sqrt(c.d_k))),
    ("scores/qk-swapped-no-scale", "q and k swapped, and no scaling: your grid is k @ qᵀ, the transpose of "
     "q @ kᵀ, and it is not divided by √d_k = √{d_k}; write q @ k.transpose(-2, -1) / √d_k",
     _answer_is(lambda c: c.qk.mT)),
    ("scores/transposed-q", "you transposed q instead of k: q.transpose(-2, -1) @ k multiplies features "
     "with features and gives a (B, d_k, d_k) grid; the scores pair every query with every key, "
     "(B, T, T): q @ k.transpose(-2, -1)", _transposed_q),
    ("scores/other-scale", "scaling by a fixed number: your scores are q @ kᵀ divided by {divisor:.4g} = "
     "√{square:.4g}; the scale is 1/√d_k with d_k = q.shape[-1] = {d_k}, the head size, not C (the "
     "model width) or any number written into the code", _other_scale),
)


@_check
def check_scaled_scores(fn):
    """Chapter 3, exercise ``ex-scaling-scores``: ``fn(q, k)`` returns the (B, T, T) scores
    ``q @ kᵀ / √d_k`` with ``d_k = q.shape[-1]``."""
    cases = [(4, 8, 16), (1, 1, 16), (3, 5, 8), (2, 7, 32)]
    for B, T, d in cases:
        q, k = torch.randn(B, T, d), torch.randn(B, T, d)
        qk = q.to(torch.float64) @ k.to(torch.float64).mT
        case = ScoresCase(qk=qk, d_k=d, T=T)
        where = f"q and k of shape {_shape(q)} (d_k = {d})"
        got, _ = _call(fn, q.clone(), k.clone(), inputs=where, case=case)
        _compare(got, qk / math.sqrt(d), what="your scores", where=where, case=case, table=_SCORES_ROWS)
    return (f"your scores match q @ kᵀ / √d_k "
            f"(tested {_tested('T', [c[1] for c in cases])}; {_tested('d_k', [c[2] for c in cases])})")


def _global_max(case, got):
    """Subtracting the max of the whole tensor: rows far below it underflow to 0 / 0 in float32."""
    if not case.large:
        return None
    z = case.z.to(torch.float32)
    e = (z - z.max()).exp()
    return {} if _matches(got, (e / e.sum(-1, keepdim=True)).to(torch.float64)) else None


def _softmax_axis(case, got):
    for d in range(case.z.dim() - 1):
        if _matches(got, _softmax(case.z, d)):
            return dict(dim=d)
    return None


_SOFTMAX_ROWS = _table(
    ("softmax/global-max", "you subtracted the largest logit of the whole tensor, z.max(), not each row's "
     "own: a row whose logits all lie far below it (here [-1000, -1001]) underflows to exp(...) = 0 "
     "everywhere, and 0 / 0 is nan; subtract z.max(dim=-1, keepdim=True).values", _global_max),
    ("softmax/overflow", "your softmax overflows: exp(1000) is inf in floating point and inf / inf is nan "
     "(and exp(-1000) / sum underflows to 0 / 0). Subtract each row's max first, "
     "z - z.max(dim=-1, keepdim=True).values: the softmax is unchanged and the largest exponent becomes "
     "exp(0) = 1", lambda c, got: {} if c.large and not torch.isfinite(got).all() else None),
    ("softmax/wrong-axis", "softmax over the wrong axis: you normalized over dim={dim}, so the rows don't "
     "sum to one; normalize over the last axis, dim=-1", _softmax_axis),
    ("softmax/whole-sum", "you divided by the sum of the whole tensor: each row needs its own sum, "
     "e.sum(dim=-1, keepdim=True)", _answer_is(lambda c: c.z.exp() / c.z.exp().sum())),
    ("softmax/no-exp", "you forgot the exp: softmax is exp(z) / sum(exp(z)), not z / sum(z)",
     _answer_is(lambda c: c.z / c.z.sum(-1, keepdim=True))),
)


@_check
def check_softmax(fn):
    """Chapter 3, exercise ``ex-scaling-softmax``: ``fn(z)`` is softmax over the last axis.

    The exercise writes it by hand (exp / sum); the check compares numbers only, so ``torch.softmax``
    passes too. It must be safe for large logits such as [1000, 0]: subtract each row's max first.
    """
    cases = [
        ("random logits", torch.randn(3, 5, 5) * 3),
        ("the logits [8, 0]", torch.tensor([8.0, 0.0])),
        ("random logits", torch.randn(2, 1, 1)),
        ("large logits", torch.tensor([[1000.0, 0.0], [0.0, -1000.0], [-1000.0, -1001.0], [500.0, 499.0]])),
    ]
    for label, z in cases:
        case = SoftmaxCase(z=z.to(torch.float64), large=label == "large logits")
        where = f"{label}, z of shape {_shape(z)}"
        got, _ = _call(fn, z.clone(), inputs=where, case=case)
        _compare(got, _softmax(z), what="your softmax", where=where, case=case, table=_SOFTMAX_ROWS)
    return "your softmax matches torch.softmax(z, dim=-1), also for logits like [1000, 0] (tested 4 inputs, 1-D to 3-D)"


