"""The independent references, in float64, and the keyword arguments that rebuild the usual mistakes.

Computed from copies of the inputs (and from a module's weights as they are) before the learner's code
runs. :func:`_weights` and :func:`_head_output` with their defaults are the right answers; with
``mask=``, ``fill=``, ``dim=``, ``after=``, ``scale=``, ``swap=`` or ``values=`` they are the mistakes
that :func:`.engine._reference_with` matches.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn as nn


def _keep(T: int, kind: str = "future") -> torch.Tensor:
    """Boolean (T, T) mask of the positions a row may attend to, for each way of masking."""
    ones = torch.ones(T, T, dtype=torch.bool)
    return {
        "future": ones.tril(),         # correct: j <= i
        "past": ones.triu(),           # hides the past: j >= i
        "past-strict": ones.triu(1),   # `masked_fill(tril == 1, ...)`: j > i
        "diagonal": ones.tril(-1),     # hides the current token too: j < i
        "none": ones,
    }[kind]


def _softmax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.softmax(z.to(torch.float64), dim=dim)


def _weights(scores, mask="future", fill=-math.inf, dim=-1, after=None, bias=False) -> torch.Tensor:
    """Attention weights from scores; the keyword arguments rebuild the usual mistakes.

    ``after``: softmax first, then fill the future with that value (masking after the softmax);
    ``bias``: add the 0/1 float tril to the scores, as a float ``attn_mask`` of SDPA does.
    """
    scores = scores.to(torch.float64)
    T = scores.shape[-1]
    keep = _keep(T, mask)
    if bias:
        scores = scores + _keep(T).to(torch.float64)
    if after is not None:
        return _softmax(scores, dim).masked_fill(~keep, after)
    return _softmax(scores.masked_fill(~keep, fill), dim)


def _project(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    out = x.detach().to(torch.float64) @ layer.weight.detach().to(torch.float64).T
    if layer.bias is not None:
        out = out + layer.bias.detach().to(torch.float64)
    return out


class _Projected:
    """A head's k, q and v for one input x, in float64, each computed once however many mistakes use it."""

    def __init__(self, head: nn.Module, x: torch.Tensor):
        self.head = head
        self.x = x.detach().to(torch.float64)

    @functools.cached_property
    def k(self):
        return _project(self.x, self.head.key)

    @functools.cached_property
    def q(self):
        return _project(self.x, self.head.query)

    @functools.cached_property
    def v(self):
        return _project(self.x, self.head.value)


def _head_weights(p: _Projected, *, scale=None, swap=False, **weights_kw) -> torch.Tensor:
    """The (B, T, T) weights a head computes from its own projections ``p``, in float64.

    Defaults give the right answer; ``scale``, ``swap`` (scores = k @ qᵀ) and the keyword arguments
    of :func:`_weights` rebuild the mistakes.
    """
    if scale is None:
        scale = p.q.shape[-1] ** -0.5
    return _weights((p.k @ p.q.mT if swap else p.q @ p.k.mT) * scale, **weights_kw)


def _head_output(p: _Projected, *, values="v", **kw) -> torch.Tensor:
    """What the head returns, from its own projections ``p``; ``values`` ("v", "x", "k", "q", or
    "v-reversed": v in the opposite order of positions) rebuilds averaging the wrong tensor, the rest
    is passed to :func:`_head_weights`."""
    averaged = p.v.flip(-2) if values == "v-reversed" else getattr(p, values)
    return _head_weights(p, **kw) @ averaged

