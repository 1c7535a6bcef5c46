"""Chapter 7's checks: splitting a tensor into heads (:func:`check_split_heads`) and a whole
multi-head layer from its two linear layers (:func:`check_multi_head`).

Both rebuild the mistakes learners make when they first write nanoGPT's few lines of reshaping: a
``view`` with no ``transpose``, a ``transpose`` of the wrong axes, heads put back in the wrong order
or interleaved, the output projection W_O (``c_proj``) left out, and the scores scaled by √C, the
width of ``x``, instead of √hs, the width of one head.
"""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn as nn

from .engine import Case, _answer_is, _matches, _shape, _table
from .hints import _HINTS, _MASKING
from .running import _check, _try


def _as_view(c: Case) -> torch.Tensor:  # (B, T, n_head, hs): the view before the transpose
    return c.t.view(c.B, c.T, c.n_head, c.hs)


def _wrong_axes(case: Case, got):
    """A transpose of any other pair of the view's axes (or of the pair (1, 2) of the wrong view)."""
    if not isinstance(got, torch.Tensor):
        return None
    view = _as_view(case)
    for a, b in itertools.combinations(range(4), 2):
        if (a, b) != (1, 2) and _matches(got, view.transpose(a, b)):
            return dict(a=a, b=b, got_shape=_shape(got))
    return None


_SPLIT_ROWS = _table(
    ("split/view-only", "you viewed (B, T, C) straight as (B, n_head, T, hs): a view reads the numbers in the "
     "order they lie in memory, position after position, so your 'head 0' holds the first {hs} channels of "
     "position 0, then the next {hs} channels of position 0, ...: positions and heads are mixed; view as "
     "(B, T, n_head, hs) first, then .transpose(1, 2)",
     _answer_is(lambda c: c.t.view(c.B, c.n_head, c.T, c.hs))),
    ("split/no-transpose", "you returned the view (B, T, n_head, hs) without the transpose: the heads must be "
     "the second axis, (B, n_head, T, hs), so that each head's (T, hs) block is one matrix for @; add "
     ".transpose(1, 2)", _answer_is(_as_view)),
    ("split/interleaved", "your heads take every {n_head}th channel (channel c goes to head c % {n_head}): "
     "the view (B, T, hs, n_head) puts the heads last; head h must hold the {hs} channels next to each "
     "other, h·hs to (h + 1)·hs - 1: view as (B, T, n_head, hs), then .transpose(1, 2)",
     _answer_is(lambda c: c.t.view(c.B, c.T, c.hs, c.n_head).permute(0, 3, 1, 2))),
    ("split/view-heads-first-transposed", "you viewed (B, T, C) as (B, n_head, T, hs) and then transposed axes "
     "1 and 2, which gives (B, T, n_head, hs) of numbers already mixed: the view must come first with the "
     "time axis where it is, (B, T, n_head, hs), and only then .transpose(1, 2)",
     _answer_is(lambda c: c.t.view(c.B, c.n_head, c.T, c.hs).transpose(1, 2))),
    ("split/hs-heads-transposed", "you viewed (B, T, C) as (B, T, hs, n_head), the heads last, then transposed "
     "axes 1 and {b}, which gives shape {got_shape}: in that view channel c goes to head c % {n_head}; "
     "view as (B, T, n_head, hs), then .transpose(1, 2)",
     lambda c, got: next(({"b": b, "got_shape": _shape(got)} for b in (2, 3)
                          if _matches(got, c.t.view(c.B, c.T, c.hs, c.n_head).transpose(1, b))), None)),
    ("split/wrong-axes", "you transposed axes {a} and {b} of the view (B, T, n_head, hs), which gives shape "
     "{got_shape}: the head axis, 2, must change places with the time axis, 1: .transpose(1, 2)", _wrong_axes),
)


def _split_shapes(trial):
    """(B, T, n_head, hs): the chapter's sizes, then drawn ones with four different sizes, T = 1, and
    one shape twice."""
    nh, hs = trial.choice((3, 5)), trial.choice((2, 6, 7))
    drawn = (trial.choice((1, 2)), trial.integer(8, 12), nh, hs)
    return [(4, 8, 4, 16), (1, 1, 4, 16), (3, 2, 4, 5), drawn, drawn]


@_check
def check_split_heads(fn, *, trial):
    """Chapter 7, exercise ``ex-many-split``: ``fn(t, n_head)`` splits t (B, T, C) into heads,
    ``t.view(B, T, n_head, C // n_head).transpose(1, 2)``: head h holds channels h·hs to (h + 1)·hs - 1.
    """
    for B, T, nh, hs in _split_shapes(trial):
        C = nh * hs
        t = trial.randn(B, T, C)
        expected = t.double().view(B, T, nh, hs).transpose(1, 2)
        case = Case(t=t.double(), B=B, T=T, C=C, n_head=nh, hs=hs)
        where = f"t of shape {_shape(t)} and n_head = {nh}"
        _try(fn, (t, nh), expected, what="your heads", where=where, case=case, table=_SPLIT_ROWS, trial=trial)
    return ("your split is (B, n_head, T, hs), head h holding channels h·hs to (h + 1)·hs - 1 "
            "(tested T = 1 to 12, n_head = 3 to 5)")


# ---- the whole layer ------------------------------------------------------------------------------


def layer(x, w_attn, w_proj, n_head, *, split="right", merge="right", scale="hs", proj=True,
          parts="qkv", axes=(1, 2), back=None, mask="causal", softmax_dim=-1):
    """The layer in float64 (x @ W.T for each linear layer), and the wrong versions the check names.

    ``split="view"`` views q, k, v straight as (B, n_head, T, hs); ``merge="view"`` reads
    (B, n_head, T, hs) straight as (B, T, C), ``merge="interleaved"`` puts the head axis last before
    merging (``merge="heads"``: no merge, each head's output); ``scale`` is "hs", "C", "none",
    "hs-value" (√hs by value, whatever the last axis holds) or "times-hs" (the scores multiplied by
    √hs); ``proj=False`` leaves W_O out; ``parts`` is the order c_attn's rows are read in; ``axes`` is
    the pair of axes of the view (B, T, n_head, hs) that the split transposes and ``back`` the pair the
    merge transposes (default: the same), the attention running over the second-to-last axis whatever
    it holds (torch raises where those shapes cannot be computed; ``axes=(1, 1)`` keeps the view
    untransposed, so the attention runs over the heads); ``mask`` is "causal", "none" or "reversed"
    (each position sees itself and the future); ``softmax_dim`` the axis the softmax runs over.
    """
    x, w_attn, w_proj = (a.detach().double() for a in (x, w_attn, w_proj))
    B, T, C = x.shape
    hs = C // n_head
    chunks = dict(zip("qkv", (x @ w_attn.T).split(C, dim=-1)))  # (B, T, C) each
    q, k, v = (chunks[p] for p in parts)
    if split == "view":
        q, k, v = (a.reshape(B, n_head, T, hs) for a in (q, k, v))
    else:
        q, k, v = (a.view(B, T, n_head, hs).transpose(*axes) for a in (q, k, v))
    scores = q @ k.transpose(-2, -1)  # (B, nh, T, T)
    if scale == "times-hs":
        scores = scores * math.sqrt(hs)
    elif scale != "none":  # the width of each dot product, from q's last axis or by value
        scores = scores / math.sqrt({"hs": q.shape[-1], "hs-value": hs}.get(scale, C))
    L = scores.shape[-1]
    future = torch.ones(L, L, dtype=torch.bool).triu(1)
    if mask == "reversed":
        future = future.T  # (L, L): the past hidden, the future seen
    if mask != "none":
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=softmax_dim)
    out = weights @ v  # (B, nh, T, hs)
    if merge == "heads":  # each head's output, (B, nh, T, hs), before the merge
        return out
    if merge == "view":
        out = out.reshape(B, T, C)
    elif merge == "interleaved":
        out = out.permute(0, 2, 3, 1).reshape(B, T, C)
    else:  # the split's own transpose back, or ``back``
        out = out.transpose(*(back or axes)).reshape(B, T, C)
    return out @ w_proj.T if proj else out


def _variant(**how):
    return _answer_is(lambda c: layer(c.x, c.w_attn, c.w_proj, c.n_head, **how))


def _in_order(case: Case, got):
    """The heads put side by side in another order, with W_O or without: the heads' outputs are computed
    once, and only their order changes from one candidate to the next."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (case.B, case.T, case.C):
        return None
    heads = layer(case.x, case.w_attn, case.w_proj, case.n_head, merge="heads")  # (B, nh, T, hs)
    for order in itertools.permutations(range(case.n_head)):
        if list(order) != sorted(order):
            merged = heads[:, list(order)].transpose(1, 2).reshape(case.B, case.T, case.C)
            for candidate in (merged @ case.w_proj.T, merged):
                if _matches(got, candidate):
                    return dict(order=list(order))
    return None


_AXES = ("the batch", "the positions", "the heads", "the channels")  # of the view (B, T, n_head, hs)


def _wrong_layer_axes(case: Case, got):
    """The layer split with a transpose of another pair of axes, merged back by the same or the usual one."""
    for a, b in itertools.combinations(range(4), 2):
        if (a, b) == (1, 2):
            continue
        order = [0, 1, 2, 3]
        order[a], order[b] = order[b], order[a]  # which axis of the view lands where
        for back, scale in itertools.product(((a, b), (1, 2)), ("hs", "hs-value")):
            try:
                candidate = layer(case.x, case.w_attn, case.w_proj, case.n_head, axes=(a, b), back=back,
                                  scale=scale)
            except RuntimeError:  # shapes this mistake cannot make
                continue
            if _matches(got, candidate):
                sizes = (case.B, case.T, case.n_head, case.hs)
                return dict(a=a, b=b, shape_q=_shape(torch.empty(*(sizes[n] for n in order))), over=_AXES[order[2]])
    return None


_LAYER_ROWS = _table(
    ("layer/no-proj", "you left out W_O: the heads' outputs, side by side, still go through c_proj, the "
     "(C, C) layer that mixes them; return c_proj(out)", _variant(proj=False)),
    ("layer/scale-C", "you divided the scores by √C = √{C} = {root_C:.3g}: each head's scores are dot "
     "products of hs = {hs} numbers, so divide by √hs = {root_hs:.3g}, the width of one head (q.shape[-1] "
     "after the split), not the width of x", _variant(scale="C")),
    ("layer/no-scale", "you did not scale the scores: divide each head's q @ kᵀ by √hs = {root_hs:.3g}",
     _variant(scale="none")),
    ("layer/scale-times", "you multiplied the scores by √hs = {root_hs:.3g}: divide by it, q @ kᵀ / √hs",
     _variant(scale="times-hs")),
    ("layer/no-mask", "you left out the causal mask: every position also attends to the positions after it; "
     "pass is_causal=True to F.scaled_dot_product_attention, or fill the scores above the diagonal with "
     "-inf before the softmax", _variant(mask="none")),
    ("layer/mask-reversed", "your mask is the wrong triangle: each position sees itself and the positions "
     "after it, and not the ones before; hide the scores above the diagonal (tril[:T, :T] == 0), not below",
     _variant(mask="reversed")),
    ("layer/softmax-dim", "you took the softmax over dim=-2, down each column of the scores: each query's "
     "row of weights must sum to 1, so softmax over the keys, dim=-1", _variant(softmax_dim=-2)),
    ("layer/no-transpose", "you split q, k and v into (B, T, n_head, hs) with no transpose: the attention "
     "then runs over the heads of one position, not over the positions of one head; add .transpose(1, 2) "
     "after the split, and again before the merge", _variant(axes=(1, 1))),
    ("layer/split-view-only", "you split q, k and v straight into (B, n_head, T, hs) (with reshape: on the "
     "chunks that split returns, view refuses, 'view size is not compatible', and suggests reshape): both "
     "read the numbers in memory order, so your heads mix positions with channels; view as "
     "(B, T, n_head, hs), then .transpose(1, 2)", _variant(split="view")),
    ("layer/merge-view-only", "you put the heads back with a view of (B, n_head, T, hs) straight to (B, T, C): "
     "without the transpose back, the rows of position t come from several positions of one head; "
     "first .transpose(1, 2) to (B, T, n_head, hs), then .contiguous().view(B, T, C) (or .reshape)",
     _variant(merge="view")),
    ("layer/interleaved", "your heads' outputs are interleaved, column by column (the head axis ended up last "
     "before the merge): each head's {hs} columns must stay together, head 0's first: "
     "out.transpose(1, 2).reshape(B, T, C)", _variant(merge="interleaved")),
    ("layer/wrong-axes", "you split the heads with a transpose of axes {a} and {b} of the view (B, T, n_head, hs), "
     "which makes q {shape_q}: the attention then runs over {over}; the head axis must change places with "
     "the time axis, .transpose(1, 2), so that each head's (T, hs) block is one matrix, and the same "
     "transpose puts the heads back", _wrong_layer_axes),
    ("layer/order", "your heads are put side by side in the wrong order, {order}: columns h·hs to (h + 1)·hs "
     "- 1 must hold head h's output, the order c_attn made them in, since W_O's columns are read in that "
     "order", _in_order),
    ("layer/parts-order", "you read c_attn's output in the wrong order: its first C columns are the queries, "
     "the next C the keys, the last C the values (q, k, v = c_attn(x).split(C, dim=-1))",
     lambda c, got: next(({"parts": p} for p in ("kqv", "vkq", "qvk", "kvq", "vqk")
                          if _matches(got, layer(c.x, c.w_attn, c.w_proj, c.n_head, parts=p))), None)),
)

def _mask_too_big(case, failure):
    """A mask kept at a block size, (L, L), not cut to the sequence's T: masked_fill raises, or (at T = 1,
    where the scores broadcast to the mask) the product with v does."""
    call = failure.call
    if call is None or call.name not in _MASKING | {"matmul", "__matmul__", "bmm"}:
        return None
    for t in call.tensors:
        if t.dim() >= 2 and t.shape[-1] == t.shape[-2] and t.shape[-1] > case.T:
            return dict(L=t.shape[-1])
    return None


_LAYER_HINTS = _HINTS[:1] + _table(
    ("layer/hint-mask-size", "your mask is {L} × {L}, sized to a block size, but here T = {T}: cut it to "
     "the sequence, tril[:T, :T] == 0, as Fig. 10 does", _mask_too_big),
) + _HINTS[1:]


def _layer_shapes(trial):
    """(B, T, n_head, hs): the chapter's, T = 1, and drawn ones (√C never equal to √hs), one twice."""
    drawn = (trial.choice((1, 2, 3)), trial.integer(5, 12), trial.choice((2, 3, 5)), trial.choice((3, 6, 7)))
    return [(4, 8, 4, 16), (1, 1, 4, 16), drawn, drawn]


@_check
def check_multi_head(fn, *, trial):
    """Chapter 7, exercise ``ex-many-layer``: ``fn(x, c_attn, c_proj, n_head)`` computes the layer of
    Fig. 10: ``c_attn``, a bias-free ``nn.Linear(C, 3 * C)``, gives every head's q, then k, then v; the
    causal heads' outputs, side by side in head order, go through ``c_proj`` (W_O), giving (B, T, C).
    """
    for B, T, nh, hs in _layer_shapes(trial):
        C = nh * hs
        c_attn, c_proj = nn.Linear(C, 3 * C, bias=False), nn.Linear(C, C, bias=False)
        trial.fill(c_attn, 0.15)
        trial.fill(c_proj, 0.3)
        x = trial.randn(B, T, C)
        expected = layer(x, c_attn.weight, c_proj.weight, nh)
        case = Case(x=x.double(), w_attn=c_attn.weight.detach().double(),
                    w_proj=c_proj.weight.detach().double(), B=B, T=T, C=C, n_head=nh, hs=hs,
                    root_C=math.sqrt(C), root_hs=math.sqrt(hs))
        where = f"x of shape {_shape(x)}, {nh} heads of size {hs}"
        _try(fn, (x, c_attn, c_proj, nh), expected, what="your output", where=where, case=case,
             table=_LAYER_ROWS, hints=_LAYER_HINTS, trial=trial)
    return ("your layer equals causal multi-head attention, heads side by side, then W_O (tested T = 1 to "
            "12, 2 to 5 heads of sizes 3 to 16)")
