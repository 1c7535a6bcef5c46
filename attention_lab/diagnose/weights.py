"""What a head's weights are made of, read off the weights themselves (for :func:`attention_lab.diagnose`).

:func:`_read_weights` takes the weights W(q, k) a head uses for random q and k, and W(2q, k). The
softmax axis is the one along which W sums to one number (or, masked after a softmax over every key,
the last row does and the others less). The scale s is read from log W(2q, k) - log W(q, k), which
is s * q @ kᵀ plus a constant for each softmax: an additive bias, a fill or a float mask on the scores
cancels out of it. What remains of log W - s * q @ kᵀ then names a bias (ALiBi's is linear in the
distance), a finite fill of the future, or a float mask; and weights that float16 holds exactly were
rounded to it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SUPPORT = 1e-6  # a weight below this counts as masked when reading which keys a row uses
_LOWER = ((torch.bfloat16, "bfloat16"), (torch.float16, "float16"))


@dataclass
class _Reading:
    """What the weights W (B, T, T) are made of; None where it could not be read."""

    W: torch.Tensor
    S: torch.Tensor  # q @ kᵀ (B, T, T), unscaled, as the head uses it (transposed when q, k are swapped)
    dim: int | None = None  # the softmax axis: -1 the keys, -2 the queries, 0 the batch
    total: float = 1.0  # what each softmax sums to (not 1: the output is scaled after the mix)
    after: bool = False  # masked after a softmax over every key
    s: float | None = None  # the factor on q @ kᵀ
    err: float = math.inf  # how far log W is from a softmax of s * q @ kᵀ, at best
    swapped: bool = False  # the weights are a softmax of k @ qᵀ
    precision: str | None = None  # "float16" or "bfloat16": the weights were rounded to it
    bias: str | None = None  # words for an additive bias on the scores the head keeps
    future_bias: float | None = None  # the future's scores still count, shifted by this (a float mask)
    fill: float | None = None  # the finite score a masked future key was given


def _precision(W: torch.Tensor) -> str | None:
    """The lower precision that holds every weight exactly (float32 weights almost never are)."""
    values = W[(W > 0) & (W < 1)].float()
    if values.numel() < 8:
        return None
    return next((name for dtype, name in _LOWER if torch.equal(values.to(dtype).float(), values)), None)


def _axis(W: torch.Tensor, tol: float):
    """(dim, what each group sums to, masked after): the axis along which W sums to one number."""
    for dim in (-1, -2, 0):
        sums = W.sum(dim)
        total = float(sums.mean())
        if total > 0 and torch.allclose(sums, torch.full_like(sums, total), rtol=tol, atol=tol):
            return dim, total, False
    rows = W.sum(-1)  # masked after the softmax: the last row keeps every key, the rows before lose some
    last = float(rows[:, -1].mean())
    if W.shape[-1] > 1 and torch.allclose(rows[:, -1], torch.full_like(rows[:, -1], last), rtol=tol, atol=tol) \
            and bool((rows[:, :-1] <= last + tol).all()) and bool((rows[:, :-1] < last - tol).any()):
        return -1, last, True
    return None, 1.0, False


def _centred(t: torch.Tensor, A: torch.Tensor, dim: int) -> torch.Tensor:
    """``t`` minus its mean over the entries ``A`` of each softmax group (along ``dim``), 0 off A."""
    n = A.sum(dim, keepdim=True).clamp_min(1)
    return (t - (t * A).sum(dim, keepdim=True) / n) * A


def _fit(D, S, A, dim) -> tuple[float, float]:
    """(s, the largest misfit): least squares s in D = s * S + a constant per group, over A."""
    dD, dS = _centred(D, A, dim), _centred(S, A, dim)
    s = float((dD * dS).sum() / (dS * dS).sum().clamp_min(1e-300))
    return s, float((dD - s * dS).abs().max()) if A.any() else math.inf


def _log(W: torch.Tensor) -> torch.Tensor:
    return W.clamp_min(1e-300).log()


def _read_weights(W1: torch.Tensor, W2: torch.Tensor, S: torch.Tensor) -> _Reading:
    """Read W1 = W(q, k) and W2 = W(2q, k), with S = q @ kᵀ (all (B, T, T), float64)."""
    r = _Reading(W=W1, S=S, precision=_precision(W1))
    tol = 2e-3 if r.precision else 1e-4  # float16 weights are off by 2⁻¹¹ of themselves
    r.dim, r.total, r.after = _axis(W1, tol)
    if r.dim is None:
        return r
    T = W1.shape[-1]
    A = (W1 > SUPPORT) & (W2 > SUPPORT)  # the entries the head uses, at both sizes of q
    lower = torch.ones(T, T, dtype=torch.bool).tril().expand_as(A)
    D = (_log(W2) - _log(W1)) * A
    fits = [(*_fit(D, Sx, where, r.dim), swap, where) for where in (A & lower, A)  # first where a mask keeps keys
            for swap, Sx in ((False, S), (True, S.transpose(-2, -1)))]
    s, r.err, r.swapped, fit = min(fits, key=lambda f: f[1] - (1e-9 if not f[2] else 0))
    if r.err > (5e-2 if r.precision else 1e-3):
        return r
    r.s = s
    r.S = S.transpose(-2, -1) if r.swapped else S
    if r.dim == -1 and bool(fit.any(-1).all()):
        _read_scores(r, A, fit, lower, tol=5e-2 if r.precision else 1e-3)
    return r


def _read_scores(r: _Reading, A, fit, lower, tol: float) -> None:
    """What is on the scores besides s * q @ kᵀ: a bias on the kept keys, and the future's treatment."""
    R = _log(r.W) - r.s * r.S  # the scores' other terms, minus each row's log of its sum
    row = ((R * fit).sum(-1, keepdim=True) / fit.sum(-1, keepdim=True).clamp_min(1))
    kept = (R - row) * fit
    if float(kept.abs().max()) > tol:
        T = r.W.shape[-1]
        back = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).double().expand_as(R)  # i - j
        dc = _centred(back, fit, -1)
        m = float((kept * dc).sum() / (dc * dc).sum().clamp_min(1e-300))
        if float((kept - m * dc).abs().max()) <= tol:
            r.bias = (f"ALiBi's linear bias, {m:+.3g} × (i − j) on the score of query i and key j (a "
                      f"penalty for each position back)")
        else:
            r.bias = f"a bias that changes from key to key, by up to {float(kept.abs().max()):.3g}"
    future = A & ~lower
    if not future.any():
        seen = (r.W > 0) & ~lower  # too small to count at these sizes, yet not 0: a finite fill
        if seen.any():
            b, i, j = seen.nonzero()[0].tolist()
            r.fill = math.log(float(r.W[b, i, j] / r.W[b, i, i])) + r.s * float(r.S[b, i, i])
        return
    shifted = float(((R - row) * future).sum() / future.sum())
    moves = _centred(R - row, future, -1)  # a fill is one score: whatever q is, log W(q) - s q kᵀ moves
    if float(moves.abs().max()) > tol:
        b, i, j = future.nonzero()[0].tolist()
        r.fill = math.log(float(r.W[b, i, j] / r.W[b, i, i])) + r.s * float(r.S[b, i, i])
    elif abs(shifted) > tol:
        r.future_bias = shifted
