"""Chapter 5's checks: the head class (:func:`check_head`), the weights of a real batch
(:func:`check_real_batch_weights`) and several heads in one fused call (:func:`check_multihead_sdpa`).
The head mistakes they share, a head's parts and the reading of its weights are in :mod:`.heads`.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools

import torch
import torch.nn as nn

from attention_lab.reference import ReferenceHead

from . import running  # running._run, looked up at each call: a grader's replacement reaches it too
from .engine import (CheckFailed, _answer_is, _compare, _factor, _fail, _fill, _matches, _name, _reference_with,
                     _shape, _table)
from .heads import (_HEAD_ROWS, _MEASURED_ROWS, HeadCase, _check_head_structure, _leak, _weights_read,
                    _with_new_head)
from .hints import _HINTS
from .references import _head_output, _head_weights, _Projected
from .running import _call, _check, _fail_if_changed, _raise_from, _try
from .trial import _Saved

_T_LT_BLOCK = ("your head breaks when T < block_size: it works for T = block_size = {bs} but not for T = "
               "{T}; a batch may be shorter than block_size, so slice the mask to the input's own length, "
               "T = x.shape[1]: self.tril[:T, :T]")

_HEAD_HINTS = _HINTS[:4] + _table(
    ("head/T-lt-block", _T_LT_BLOCK, lambda case, failure: {} if case.T < case.bs else None),
) + _HINTS[4:]

# check_head's table: the rebuilt mistakes, a mask of the full block_size (which broadcasts a
# (1, 1, 1) grid of scores to (1, bs, bs) without an error), then the measured ones
_CHECK_HEAD_ROWS = _HEAD_ROWS + _table(
    ("head/T-lt-block", _T_LT_BLOCK,
     lambda c, got: {} if c.T < c.bs and got.dim() == 3 and got.shape[1] == c.bs else None),
) + _MEASURED_ROWS

_HEAD_KINDS = _table(
    ("head/instance", "you passed a head, an instance of {cls}, but check_head takes the class itself: "
     "checks.check_head({cls}), so that it can build heads of several sizes", None),
    ("head/not-a-module", "`{name}` is not an nn.Module: write class {name}(nn.Module) and call "
     "super().__init__() first in __init__, so that its layers and the tril buffer belong to it", None),
    ("head/random", "two calls of your head on the same x, in eval() mode, differ by up to {gap:.3g} "
     "({where}): something random stays on, most likely dropout; use nn.Dropout, which eval() "
     "switches off, or F.dropout(weights, p, training=self.training)", None),
    ("head/kept-state", "your head keeps something between calls ({where}): {how}, while a new "
     "{name} with the same weights gives the right output; a forward computes from x and the weights "
     "alone (no cache of k, q or the scores, no counter kept on self)", None),
)


def _exactly_masked(case, what: str, where: str) -> None:
    """After a pass: the future must get weight exactly 0, as the chapter teaches (a fill of -100 or
    -20 is close at these small scores, but lets the future through at larger ones)."""
    __tracebackhide__ = True
    found = _leak(case, None, finite=True) or _leak(case, None, finite=False)
    if found is not None:
        row = _MEASURED_ROWS[0] if found["fill"] < -3 else _MEASURED_ROWS[1]
        raise CheckFailed(f"{_fill(row.message, case.sizes(), found)}\n  ({what}, {where})", row.id)


# sizes to draw a head from: none of them makes a scale written for the lesson's sizes (1/4, 1/√8,
# 1/√32, ...) equal to one written from the head's own (1/d_k, 1/√d_k, 1/√C), which would name the
# wrong mistake
_DRAWN_HS = (2, 3, 5, 6, 7, 9, 10, 11, 12)
_DRAWN_C = tuple(c for c in range(17, 65) if c not in (32, 64))


def _head_builds(trial) -> list[tuple[tuple[int, int, int], list[tuple[int, int]]]]:
    """((C, head_size, block_size), [(B, T), ...]) of each head built: the chapter's and one drawn,
    each tried at T = block_size, T = 1 or a T drawn below it, and its first shape again."""
    bs = trial.integer(5, 16)
    drawn = (trial.choice(_DRAWN_C), trial.choice(_DRAWN_HS), bs)
    return [((384, 16, 8), [(4, 8), (1, 1), (3, trial.integer(2, 7)), (4, 8)]),
            (drawn, [(2, bs), (1, trial.integer(2, bs - 1)), (2, bs)])]


class _BuiltHead:
    """One head the check built from the learner's class, with its weights as built, and the two
    questions that tell a head that keeps state between calls from one that is random."""

    def __init__(self, Head, name: str, sizes: tuple[int, int, int]):
        self.Head, self.name, self.sizes = Head, name, sizes
        C, hs, bs = sizes
        self.head, _ = _call(Head, *sizes, inputs=f"C={C}, head_size={hs}, block_size={bs}", name=name)
        if not isinstance(self.head, nn.Module):
            _fail("head/not-a-module", name=name)
        self.head.eval()  # compared as a model is used: nn.Dropout off
        self.state = {k: t.detach().clone() for k, t in self.head.state_dict().items()}

    def fresh_output(self, x: torch.Tensor):
        """A new head of the learner's class with these weights, on x: its output, or None."""

        def run(other):
            other.eval().load_state_dict(self.state)
            out, exc, _ = running._run(other, x.clone())
            return out if exc is None else None

        return _with_new_head(self.Head, self.sizes, run)

    def fail_if_kept_state(self, x, expected, where: str, how: str) -> None:
        """A wrong output (or an error) that a new head does not give comes from an earlier call."""
        __tracebackhide__ = True
        if expected is not None and _matches(self.fresh_output(x), expected):
            _fail("head/kept-state", how=how, name=self.name, where=where)

    def fail_if_unsteady(self, x, got, expected, where: str) -> None:
        """The same x again must give the same output: a factor that grows, state or randomness."""
        __tracebackhide__ = True
        if not (isinstance(got, torch.Tensor) and got.device.type == "cpu" and got.is_floating_point()):
            return  # the comparison names what is wrong with it
        again, exc, _ = running._run(self.head, x.clone())
        if exc is not None or not isinstance(again, torch.Tensor) or again.shape != got.shape or got.numel() == 0:
            return
        gap = float((again.detach().double() - got.detach().double()).abs().nan_to_num(0.0).max())
        if gap == 0:
            return
        now, before = (_factor(out, expected, 1.0) if expected is not None else None for out in (again, got))
        if now is not None and before is not None:
            _fail("general/counter", what=f"your {self.name}'s output", c=now, before=before, where=where)
        self.fail_if_kept_state(x, got, where, "a second call on the same x gives another output")
        _fail("head/random", gap=gap, where=where)


@_check
def check_head(Head, *, trial):
    """Chapter 5, exercise ``ex-head-diagnose``: the class ``Head``, built as ``Head(C, head_size, block_size)``.

    Its forward maps (B, T, C) to (B, T, head_size) for every T <= block_size, from bias-free ``key``,
    ``query`` and ``value`` layers and a ``tril`` buffer. The chapter's head (384, 16, 8) and one of
    drawn sizes are built and compared, in ``eval()`` mode, with the output of their own weights.
    """
    name = _name(Head)
    if isinstance(Head, nn.Module):
        _fail("head/instance", cls=type(Head).__name__)
    what = f"your {name}'s output"
    for (C, hs, bs), shapes in _head_builds(trial):
        built = _BuiltHead(Head, name, (C, hs, bs))
        head = built.head
        problem = None
        try:
            _check_head_structure(head, name, C, hs)
        except CheckFailed as found:  # raised after the first forward, whose error it explains better
            problem = found
        earlier = []
        for i, (B, T) in enumerate(shapes):
            x = trial.randn(B, T, C)
            where = f"{name}({C}, {hs}, {bs}) and x of shape {_shape(x)}"
            expected = case = None
            if problem is None:  # the reference, from the weights as they are before the forward
                p = _Projected(head, x)
                expected = _head_output(p)
                case = HeadCase(C=C, hs=hs, T=T, bs=bs, build=functools.partial(_head_output, p), raw=p.q @ p.k.mT,
                                weights=functools.cache(lambda p=p: _weights_read(Head, (C, hs, bs), p.q, p.k)))
            given = x.clone()
            saved = _Saved([head, given])
            got, exc, watch = running._run(head, given)
            if problem is not None:  # a missing part explains more than the error or the numbers it causes
                raise problem
            if exc is not None:
                with saved.put_back_on_failure():
                    if i > 0:
                        built.fail_if_kept_state(x, expected, where, f"this call raised {type(exc).__name__}")
                    _raise_from(exc, watch, name, where, case, _HEAD_HINTS)
            _fail_if_changed(saved, ["self", "x"], name, where)
            if i == 0:
                built.fail_if_unsteady(x, got, expected, where)
            try:
                _compare(got, expected, what=what, where=where, case=case, table=_CHECK_HEAD_ROWS, earlier=earlier)
            except CheckFailed:
                if i > 0:
                    built.fail_if_kept_state(x, expected, where, "its output on this call is wrong")
                raise
            if i == 0 and hs == 16:  # the chapter's head, read once: a finite fill is one at any size
                _exactly_masked(case, what, where)
            earlier.append((expected, got.detach()))
    return (f"{name} matches the reference head, and its tril is a buffer (tested T = 1 to "
            f"block_size, with block_size 8 and one drawn from 5 to 16; B = 1 to 4)")


def _weights_answer(weights):
    """The learner's weights, a tensor or a function of no arguments returning them (a stub stops); a
    function is called twice, and two calls that differ are named."""
    __tracebackhide__ = True
    if callable(weights) and not isinstance(weights, torch.Tensor):
        name = _name(weights)
        first, _ = _call(weights, inputs="no arguments")
        second, _ = _call(weights, inputs="no arguments, a second time")
        if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and first.shape == second.shape \
                and first.device.type == second.device.type == "cpu" and first.numel() and not _matches(second, first):
            gap = float((second.detach().double() - first.detach().double()).abs().nan_to_num(float("inf")).max())
            _fail("real/unsteady", name=name, gap=gap)
        weights = first
    if not isinstance(weights, torch.Tensor):
        _fail("general/not-a-tensor", what="your weights", shape="(B, T, T)", type=type(weights).__name__,
              where="the weights of the real batch")
    return weights


def _only_weights(p: _Projected):
    """case.build for weights: every head mistake except averaging the wrong tensor."""

    def build(values="v", **how):
        return _head_weights(p, **how) if values == "v" else None

    return build


_REAL_INPUTS = _table(
    ("real/bad-head", "`head` should be the chapter's head, an nn.Module with key and query nn.Linear "
     "layers of a size that fits x; got {got}: pass the head itself, checks.check_real_batch_weights("
     "real_batch_weights, head, x)", None),
    ("real/unsteady", "two calls of `{name}()` give weights that differ by up to {gap:.3g}: something random "
     "stays on (dropout), or your function keeps something between calls; the weights of one batch "
     "under one head are one tensor", None),
    ("real/bad-x", "`x` should be the real batch of section 5.9, a float tensor of shape (B, T, C) with "
     "C = {C} (the head's key.in_features) on the CPU, every number finite; got {got}", None),
    ("real/head-output", "your tensor has shape {got}, (B, T, head_size): that is the head's output, "
     "weights @ v, which F.scaled_dot_product_attention returns when v = head.value(x); the weights are "
     "(B, T, T) = {want}, so pass as v a (B, T, T) tensor for which weights @ v is the weights themselves",
     None),
    ("real/shape", "your tensor has shape {got}; the weights of the batch are one (T, T) grid per "
     "sequence, (B, T, T) = {want}", None),
)


def _real_inputs(head, x) -> None:
    """The check's own inputs, head and x, as chapter 5 passes them; else say which is wrong."""
    __tracebackhide__ = True
    layers = [getattr(head, n, None) for n in ("key", "query")]
    if not isinstance(head, nn.Module) or not all(isinstance(m, nn.Linear) for m in layers):
        _fail("real/bad-head", got=f"a {type(head).__name__} without them")
    C, hs = head.key.in_features, head.key.out_features
    if any(t.device.type != "cpu" or not t.dtype.is_floating_point for t in (head.key.weight, head.query.weight)):
        _fail("real/bad-head", got="one whose weights are not float numbers on the CPU")
    if hs < 1 or tuple(head.query.weight.shape) != (hs, C):
        _fail("real/bad-head", got=f"key {_shape(head.key.weight)} and query {_shape(head.query.weight)} weights")
    if not isinstance(x, torch.Tensor):
        _fail("real/bad-x", C=C, got=f"a {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != C or x.shape[1] < 1:
        _fail("real/bad-x", C=C, got=f"shape {_shape(x)}")
    if x.device.type != "cpu" or not x.dtype.is_floating_point:
        _fail("real/bad-x", C=C, got=f"a {str(x.dtype).replace('torch.', '')} tensor on {x.device.type}")
    if not torch.isfinite(x).all():
        b, t, c = (int(n) for n in (~torch.isfinite(x)).nonzero()[0])
        _fail("real/bad-x", C=C, got=f"x[{b}, {t}, {c}] = {x[b, t, c].item()}")


@_check
def check_real_batch_weights(weights, head, x, *, trial):
    """Chapter 5, the real-batch exercise (``ex-head-real-batch``): ``weights`` are the (B, T, T)
    attention weights that ``head`` computes for the batch ``x`` (B, T, C), softmax(q @ kᵀ / √head_size)
    with the future masked.

    ``weights`` is a tensor or, so that a stub reports "not yet implemented", a function of no
    arguments returning it, called twice. It reads the notebook's own head and x: it draws no inputs.
    """
    _real_inputs(head, x)
    C, hs = head.key.in_features, head.key.out_features
    p = _Projected(head, x)
    expected, raw = _head_weights(p), p.q @ p.k.mT  # before the learner's code runs
    saved = _Saved([x, head])
    where = f"the head's own weights for x of shape {_shape(x)}"
    try:
        got = _weights_answer(weights)
    finally:  # a stub or an error stops the check: the notebook's x and head are as they were
        _fail_if_changed(saved, ["x", "head"], "real_batch_weights", where)
    B, T = x.shape[:2]
    if tuple(got.shape) != (B, T, T):
        row = "real/head-output" if tuple(got.shape) == (B, T, hs) else "real/shape"
        _fail(row, got=_shape(got), want=_shape(expected))
    case = HeadCase(C=C, hs=hs, T=x.shape[1], build=_only_weights(p), raw=raw,
                    weights=lambda: got.detach().to(torch.float64))
    _compare(got, expected, what="your weights", where=where, case=case,
             table=_REAL_ROWS + _SDPA_ROWS + _HEAD_ROWS + _MEASURED_ROWS)
    _exactly_masked(case, "your weights", where)
    return (f"your weights are the head's own, softmax(q @ kᵀ / √{hs}) under the causal mask, "
            f"for all {B} × {T} rows")


@dataclasses.dataclass(kw_only=True)
class MultiheadCase(HeadCase):
    """The heads of the multi-head check and one input x: each head's own output, in float64."""

    n: int  # how many heads
    B: int
    outs: list  # each head's (B, T, hs) output
    width: int  # n * hs
    projected: list  # each head's _Projected q, k, v


def _qkv(case, join, dim):
    """q, k, v of every head joined by ``join`` (torch.stack or torch.cat) on axis ``dim``, in float64."""
    return [join([getattr(p, name) for p in case.projected], dim) for name in ("q", "k", "v")]


def _causal(q, k, v):
    return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def _merged(case, got, out):
    """{} if ``got`` is ``out`` merged to (B, T, n * hs), with or without a transpose first."""
    ends = (out.reshape(case.B, case.T, -1), out.transpose(1, 2).reshape(case.B, case.T, -1))
    return {} if any(_matches(got, end) for end in ends) else None


def _one_wide_head(case, got):
    """One head over the heads' q, k, v concatenated: every score sums all heads' products."""
    return {} if _matches(got, _causal(*_qkv(case, torch.cat, -1))) else None  # (B, T, n * hs)


def _wrong_stack_axis(case, got):
    """q, k, v stacked on axis 2, (B, T, n, hs): the call attends across heads, positions as its head axis."""
    return _merged(case, got, _causal(*_qkv(case, torch.stack, 2)))  # (B, T, n, hs)


def _concatenated_then_viewed(case, got):
    """q, k, v concatenated to (B, T, n * hs), then viewed as (B, n, T, hs) with no transpose: each "head"
    is a block of rows of the concatenation, positions and heads mixed."""
    viewed = (t.reshape(case.B, case.n, case.T, case.hs) for t in _qkv(case, torch.cat, -1))
    return _merged(case, got, _causal(*viewed))  # (B, n, T, hs)


def _ones_as_values(case, got):
    """weights @ ones: every entry is its row's sum, 1."""
    g = got.detach().to(torch.float64)
    return {} if g.numel() and torch.allclose(g, torch.ones_like(g), atol=1e-5) else None


_REAL_ROWS = _table(
    ("real/ones-v", "every entry of yours is 1: with v all ones, weights @ v holds each row's sum, which is "
     "1; to read the weights out, v must be the identity, torch.eye(T) expanded to (B, T, T), since "
     "weights @ I = weights", _ones_as_values),
)


_SDPA_ROWS = _table(  # a mask given to F.scaled_dot_product_attention the wrong way
    ("sdpa/float-mask", "a float attn_mask is added to the scores, not used to hide them: your 0/1 tril "
     "gave the past +1 and left the future open; pass is_causal=True (or a boolean mask, True where a "
     "key may be seen: tril == 1)", _reference_with(dict(mask="none", bias=True))),
    ("sdpa/no-causal", "no mask: pass is_causal=True to F.scaled_dot_product_attention",
     _reference_with(dict(mask="none"))),
)


def _heads_in_order(case, got):
    for order in itertools.permutations(range(len(case.outs))):
        if list(order) != sorted(order) and _matches(got, torch.cat([case.outs[i] for i in order], -1)):
            return dict(order=list(order))
    return None


def _heads_4d(case, got):
    if got.dim() == 4 and got.shape[0] == case.B and case.n in got.shape[1:2]:
        return dict(got_shape=_shape(got))
    return None


_MULTIHEAD_ROWS = _table(
    ("multihead/order", "your heads come out in the wrong order, {order}: the first {hs} columns must be "
     "heads[0]'s output, the next {hs} heads[1]'s, and so on; keep the list's order when you stack and "
     "when you merge", _heads_in_order),
    ("multihead/interleaved", "your heads' outputs are interleaved: column by column they alternate "
     "between heads, as when the head axis ends up last, (B, T, hs, n_heads), before the reshape; each "
     "head's {hs} columns must stay together: out.transpose(1, 2).reshape(B, T, n_heads * hs)",
     _answer_is(lambda c: torch.stack(c.outs, -1).flatten(-2))),
    ("multihead/reshape-without-transpose", "you reshaped (B, n_heads, T, hs) straight to (B, T, n_heads * "
     "hs): without a transpose first, reshape mixes positions and heads; move the head axis next to hs, "
     "then merge: out.transpose(1, 2).reshape(B, T, n_heads * hs)",
     _answer_is(lambda c: torch.stack(c.outs, 1).reshape(c.B, c.T, -1))),
    ("multihead/not-transposed-back", "you returned shape {got_shape}, the (B, n_heads, T, hs) layout the "
     "call works in; move the head axis back beside hs and merge the two: "
     "out.transpose(1, 2).reshape(B, T, n_heads * hs)", _heads_4d),
    ("multihead/not-merged", "you returned (B, T, n_heads, hs): merge the last two axes into one of "
     "n_heads * hs = {width} columns, .reshape(B, T, n_heads * hs)",
     lambda c, got: {} if tuple(got.shape) == (c.B, c.T, c.n, c.hs) else None),
    ("multihead/one-wide-head", "you ran one wide head: with the heads' q, k and v concatenated to "
     "(B, T, n_heads * hs), every score is the sum of all the heads' dot products (scaled by "
     "1/√(n_heads * hs)), so all heads share one set of weights; keep each head on its own axis, "
     "torch.stack(..., dim=1), (B, n_heads, T, hs)", _one_wide_head),
    ("multihead/stack-axis", "you stacked the heads on axis 2, (B, T, n_heads, hs): the call reads its "
     "input as (B, heads, T, hs), so it took the positions for heads and attended across the heads "
     "(causally, head i to heads 0..i) instead of across positions; stack on dim=1", _wrong_stack_axis),
    ("multihead/viewed-without-transpose", "you concatenated the heads' q, k and v to (B, T, n_heads * hs) "
     "and viewed them as (B, n_heads, T, hs) directly: the view cuts the memory in order, so each \"head\" "
     "holds rows of several positions and heads mixed; view as (B, T, n_heads, hs) first, then "
     ".transpose(1, 2), or stack the heads on dim=1", _concatenated_then_viewed),
    ("multihead/sum", "you added the heads' outputs: multi-head attention keeps every head's output and "
     "concatenates them along the last axis, (B, T, n_heads * hs) = (B, T, {width})",
     _answer_is(lambda c: torch.stack(c.outs).sum(0))),
    ("multihead/mean", "you averaged the heads' outputs: multi-head attention keeps every head's output "
     "and concatenates them along the last axis, (B, T, n_heads * hs) = (B, T, {width})",
     _answer_is(lambda c: torch.stack(c.outs).mean(0))),
    ("multihead/no-sdpa", "right numbers, but no call to F.scaled_dot_product_attention: the exercise is "
     "to stack the heads' q, k and v into (B, n_heads, T, hs) tensors and make one call", None),
    ("multihead/one-call", "right numbers, but {calls} calls to F.scaled_dot_product_attention, one per "
     "head: stack the heads' q, k and v into (B, n_heads, T, hs) tensors and make a single call; one "
     "call over all the heads is what lets PyTorch pick a fused kernel", None),
    ("multihead/unused-sdpa", "right numbers, but not from your call of F.scaled_dot_product_attention: "
     "with its result changed, your output stays the same, so the numbers come from somewhere else (each "
     "head's own forward?): return what the one call gives, its heads put side by side", None),
    ("multihead/not-4d", "right numbers, but your call got {axes}-D tensors: give it q, k and v of shape "
     "(B, n_heads, T, hs); PyTorch's fused kernels need that 4-D layout and run 3-D input on the plain "
     "math path", None),
) + _SDPA_ROWS + tuple(row for row in _HEAD_ROWS if row.id != "mask/none")


def _multihead_cases(trial) -> list[tuple[tuple[int, int, int, int], list[tuple[int, int]]]]:
    """((C, head_size, block_size, n_heads), [(B, T), ...]): Fig. 6's heads and drawn ones."""
    bs = trial.integer(5, 12)
    drawn = (trial.integer(8, 32), trial.integer(2, 6), bs, trial.integer(2, 4))
    return [((32, 8, 8, 3), [(4, 8), (1, 1), (3, trial.integer(2, 7))]),
            (drawn, [(2, bs), (1, trial.integer(2, bs - 1)), (2, bs)])]


@_check
def check_multihead_sdpa(fn, *, trial):
    """Chapter 5, the multi-head exercise: ``fn(heads, x)`` runs several heads with one fused call.

    ``heads`` is a list of heads like Fig. 6's (3 of ``Head(32, 8, 8)``, then 2 to 4 of drawn sizes).
    The answer stacks their q, k and v into (B, n_heads, T, hs) tensors, calls
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` once, and returns the heads' outputs
    side by side, ``torch.cat([h(x) for h in heads], -1)``.
    """
    probed = False
    for (C, hs, bs, n), shapes in _multihead_cases(trial):
        heads = [ReferenceHead(C, hs, bs) for _ in range(n)]  # drawn from the trial's seed
        earlier = []
        for B, T in shapes:
            x = trial.randn(B, T, C)
            where = f"{n} heads like Head({C}, {hs}, {bs}) and x of shape {_shape(x)}"
            projected = [_Projected(h, x) for h in heads]
            outs = [_head_output(p) for p in projected]

            def build(projected=projected, **how):
                return torch.cat([_head_output(p, **how) for p in projected], -1)

            case = MultiheadCase(C=C, hs=hs, n=n, B=B, T=T, outs=outs, width=n * hs, build=build,
                                 projected=projected)
            got, watch = _try(fn, (list(heads), x), torch.cat(outs, -1), what="your output", where=where,
                              case=case, table=_MULTIHEAD_ROWS, trial=trial, earlier=earlier)
            calls = watch.calls["scaled_dot_product_attention"]
            if calls == 0:
                _fail("multihead/no-sdpa")
            if calls > 1:
                _fail("multihead/one-call", calls=calls)
            if watch.sdpa_axes[0] != 4:
                _fail("multihead/not-4d", axes=watch.sdpa_axes[0])
            if not probed:  # once a check: the call's result must be what the output is made of
                probed = True
                doubled = running._quietly(running._with_doubled, "scaled_dot_product_attention", fn, list(heads), x)
                if isinstance(doubled, torch.Tensor) and isinstance(got, torch.Tensor) and torch.equal(doubled, got):
                    _fail("multihead/unused-sdpa")
    return ("one call of F.scaled_dot_product_attention on (B, n_heads, T, hs) tensors equals "
            "torch.cat([h(x) for h in heads], -1) (tested T = 1 to 12; 3 heads of size 8, and 2 to 4 "
            "drawn)")
