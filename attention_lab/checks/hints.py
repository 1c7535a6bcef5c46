"""Hints: what a failed torch call in the learner's code says about the mistake behind it.

Each row's match reads the failure (:class:`.running._Failure`: the exception, the torch call that
raised, the watch of every call); the message follows the "raised" line as ``hint: ...``. A check
may put its own rows before these (chapters 1, 2, 4 and 5 do).
"""
from __future__ import annotations

import torch

from .engine import _fmt, _shape, _table


_ELEMENTWISE = {"div", "true_divide", "divide", "sub", "subtract", "rsub", "add", "mul", "multiply",
                "__truediv__", "__rtruediv__", "__sub__", "__rsub__", "__add__", "__radd__", "__mul__"}
_MASKING = {"masked_fill", "masked_fill_", "where"}


def _reversed_axes(case, failure):
    shape = failure.watch.reversed
    if shape is None:
        return None
    return dict(n=len(shape), before=_fmt(shape), after=_fmt(shape[::-1]))


def _lost_axis(case, failure):
    call = failure.call
    if call is None or call.name not in _ELEMENTWISE or len(call.tensors) < 2:
        return None
    small, big = sorted((tuple(t.shape) for t in call.tensors[:2]), key=len)
    if len(big) == len(small) + 1 and any(big[:i] + big[i + 1:] == small for i in range(len(big))):
        return dict(small=_fmt(small), big=_fmt(big))
    return None


def _non_bool_mask(case, failure):
    call = failure.call
    if call is None:
        return None
    if call.name in ("__invert__", "bitwise_not") and call.tensors and call.tensors[0].dtype != torch.bool:
        return {}
    position = {"masked_fill": 1, "masked_fill_": 1, "where": 0}.get(call.name)
    if position is not None and len(call.tensors) > position and call.tensors[position].dtype != torch.bool:
        return {}
    return None


def _mask_size(case, failure):
    call = failure.call
    if call is None or call.name not in _MASKING | _ELEMENTWISE:
        return None
    grids = [t for t in call.tensors if t.dim() == 3 and t.shape[-1] == t.shape[-2]]
    masks = [t for t in call.tensors if t.dim() == 2 and t.shape[0] == t.shape[1]]
    if grids and masks and masks[0].shape[-1] != grids[0].shape[-1]:
        return dict(mask=_shape(masks[0]), grid=_shape(grids[0]), n=grids[0].shape[-1])
    return None


_HINTS = _table(
    ("hint/T-on-3d", ".T reverses every axis of a {n}-D tensor: it turned {before} into {after}; to swap "
     "only the last two axes, write .transpose(-2, -1) (or .mT)", _reversed_axes),
    ("hint/keepdim", "a tensor of shape {small} met one of shape {big}: a sum (or max) over one axis "
     "without keepdim=True drops that axis, so the result no longer lines up with the rows; keep it, "
     "e.g. e.sum(dim=-1, keepdim=True)", _lost_axis),
    ("hint/max-values", "x.max(dim) returns two tensors, (values, indices): take the values, "
     "z.max(dim=-1, keepdim=True).values",
     lambda case, failure: {} if "return_types" in str(failure.exc) else None),
    ("hint/bool-mask", "the mask must be boolean: masked_fill and torch.where take True where to "
     "fill, and ~ works on booleans only; compare to get one, e.g. tril[:T, :T] == 0", _non_bool_mask),
    ("hint/mask-size", "your mask is {mask} but the scores are {grid}: build the mask from the input's "
     "own length, T = {n} (scores.shape[-1], or x.shape[1] in a head), or slice a bigger one, "
     "tril[:T, :T]", _mask_size),
)

