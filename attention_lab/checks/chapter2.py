"""Chapter 2's check: a bias-free ``nn.Linear`` computed by hand (:func:`check_projection`)."""
from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn

from .engine import ATOL, RTOL, Case, _answer_is, _compare, _fmt, _shape, _table, _tested
from .hints import _HINTS
from .references import _project
from .running import _call, _check


@dataclasses.dataclass(kw_only=True)
class ProjectionCase(Case):
    """One input x and layer of the projection check, in float64."""

    x: torch.Tensor  # (B, T, C)
    W: torch.Tensor  # (head_size, C), the layer's weight
    T: int
    C: int
    expected: torch.Tensor  # (B, T, head_size), x @ W.T
    out_in: str  # the weight's shape, as the message writes it


def _is_biased(case, got):
    if tuple(got.shape) != tuple(case.expected.shape):
        return None
    offset = got.detach().to(torch.float64) - case.expected
    same_everywhere = torch.allclose(offset, offset[:1, :1].expand_as(offset), rtol=RTOL, atol=ATOL)
    return {} if same_everywhere and offset.abs().max() > ATOL else None


_PROJECTION_ROWS = _table(
    ("projection/bias", "adding a bias: your result is x @ layer.weight.T plus the same offset at every "
     "position; attention projections have no bias (bias=False)", _is_biased),
    # the transposition mistakes run only where the shapes let them (the first, square case)
    ("projection/no-transpose", "x @ W without the transpose: nn.Linear stores its weight as (out, in) = "
     "{out_in}, so the projection is x @ layer.weight.T",
     _answer_is(lambda c: c.x @ c.W if c.W.shape[0] == c.W.shape[1] == c.C else None)),
    ("projection/wrong-side", "W @ x multiplies from the wrong side: the tokens are the rows of x, so the "
     "weight goes on the right, transposed: x @ layer.weight.T",
     _answer_is(lambda c: c.W @ c.x if c.W.shape[1] == c.T else None)),
    ("projection/axes-swapped", "W @ xᵀ gives (B, head_size, T): the right numbers with the last two axes "
     "swapped; write x @ layer.weight.T to get (B, T, head_size)", _answer_is(lambda c: c.expected.mT)),
)

_PROJECTION_HINTS = _table(
    ("projection/hint-no-bias", "layer.bias is None: attention projections have no bias (bias=False), so "
     "compute x @ layer.weight.T and add nothing",
     lambda case, failure: {} if "NoneType" in str(failure.exc) else None),
) + _HINTS


@_check
def check_projection(fn):
    """Chapter 2, exercise ``ex-qkv-projection``: ``fn(x, layer)`` computes a bias-free ``nn.Linear``
    by hand, ``x @ layer.weight.T``, for x of shape (B, T, C)."""
    # a square case first (T = C = head_size) so that the transposition mistakes run and can be named
    cases = [(2, 6, 6, 6), (4, 8, 384, 16), (1, 1, 5, 3), (3, 5, 32, 8)]
    for B, T, C, hs in cases:
        x = torch.randn(B, T, C)
        layer = nn.Linear(C, hs, bias=False)
        W = layer.weight.detach().to(torch.float64)
        expected = _project(x, layer)
        case = ProjectionCase(x=x.to(torch.float64), W=W, T=T, C=C, expected=expected, out_in=_fmt(W.shape))
        where = f"x of shape {_shape(x)} and layer = nn.Linear({C}, {hs}, bias=False)"
        got, _ = _call(fn, x.clone(), layer, inputs=where, case=case, hints=_PROJECTION_HINTS)
        _compare(got, expected, what="your projection", where=where, case=case, table=_PROJECTION_ROWS)
    return (f"your projection matches x @ layer.weight.T "
            f"(tested {_tested('T', [c[1] for c in cases])}; C → head_size = "
            + ", ".join(f"{c[2]} → {c[3]}" for c in cases) + ")")


