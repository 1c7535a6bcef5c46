"""Chapter 5's checks: the head class (:func:`check_head`), the weights of a real batch
(:func:`check_real_batch_weights`) and several heads in one fused call (:func:`check_multihead_sdpa`).
The head mistakes they share are in :mod:`.heads`.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import itertools

import torch
import torch.nn as nn

from attention_lab.reference import ReferenceHead

from . import running  # running._run, looked up at each call: a grader's replacement reaches it too
from .engine import (CheckFailed, _answer_is, _compare, _fail, _fill, _matches, _name, _reference_with, _shape,
                     _table, _tested)
from .heads import _HEAD_ROWS, _MEASURED_ROWS, HeadCase, _leak
from .hints import _HINTS
from .references import _head_output, _head_weights, _Projected
from .running import _call, _check, _fail_if_changed, _raise_from, _snapshot


_HEAD_STRUCTURE = _table(
    ("head/missing-parts", "`{name}` needs the attributes key, query and value, each an nn.Linear(C, "
     "head_size, bias=False) as in the lesson; missing or not nn.Linear: {missing}", None),
    ("head/bias", "projections with bias: self.{part} has a bias; attention projections are bias-free: "
     "nn.Linear(C, head_size, bias=False)", None),
    ("head/wrong-size", "self.{part} has the wrong size: {name}({C}, {hs}, ...) should build "
     "nn.Linear({C}, {hs}, bias=False), whose weight is ({hs}, {C}); got a weight of shape {got_shape}",
     None),
    ("head/tril-parameter", "`tril` is registered as a parameter: the optimizer would train the mask. A "
     "fixed tensor that belongs to the module is a buffer: self.register_buffer('tril', torch.tril(...))",
     None),
    ("head/tril-not-buffer", "`tril` is {found}: register the mask as a buffer, self.register_buffer("
     "'tril', torch.tril(torch.ones(block_size, block_size))), so it moves with .to(device) and is "
     "saved with the module, but is not trained", None),
)


def _check_head_structure(head: nn.Module, name: str, C: int, hs: int) -> None:
    """The head's parts, as the lesson builds them: three bias-free projections and a `tril` buffer."""
    __tracebackhide__ = True
    missing = [n for n in ("key", "query", "value") if not isinstance(getattr(head, n, None), nn.Linear)]
    if missing:
        _fail("head/missing-parts", name=name, missing=", ".join(missing))
    for part in ("key", "query", "value"):
        layer = getattr(head, part)
        if layer.bias is not None:
            _fail("head/bias", part=part)
        if tuple(layer.weight.shape) != (hs, C):
            _fail("head/wrong-size", part=part, name=name, C=C, hs=hs, got_shape=_shape(layer.weight))
    if "tril" in dict(head.named_parameters()):
        _fail("head/tril-parameter")
    if "tril" not in dict(head.named_buffers()):
        _fail("head/tril-not-buffer", found="a plain attribute, not a buffer" if hasattr(head, "tril") else "missing")


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
)


def _weights_of(head: nn.Module, x: torch.Tensor) -> torch.Tensor | None:
    """The (B, T, T) weights the learner's head really uses for x, in float64, or None if unreadable.

    On a float64 copy in eval(), the value layer's output is replaced by one-hot columns, so the
    head's output is its weights (head_size columns at a time): no name or step is assumed.
    """
    try:
        probe = copy.deepcopy(head).double().eval()
        value = probe.value
        hs = value.out_features
    except Exception:  # noqa: BLE001 - a head that cannot be copied is simply not measured
        return None
    B, T, _ = x.shape
    W = torch.zeros(B, T, T, dtype=torch.float64)
    for start in range(0, T, max(hs, 1)):
        n = min(hs, T - start)
        v = torch.zeros(B, T, hs, dtype=torch.float64)
        v[:, range(start, start + n), range(n)] = 1.0
        fired = []
        hook = value.register_forward_hook(lambda m, i, o, v=v: fired.append(1) or v)
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                out = probe(x.detach().double())
        except Exception:  # noqa: BLE001
            return None
        finally:
            hook.remove()
        if not fired or not isinstance(out, torch.Tensor) or tuple(out.shape) != (B, T, hs):
            return None
        W[:, :, start:start + n] = out[:, :, :n].double()
    return W


def _exactly_masked(case, what: str, where: str) -> None:
    """After a pass: the future must get weight exactly 0, as the chapter teaches (a fill of -100 or
    -20 is close at these small scores, but lets the future through at larger ones)."""
    __tracebackhide__ = True
    found = _leak(case, None, finite=True) or _leak(case, None, finite=False)
    if found is not None:
        row = _MEASURED_ROWS[0] if found["fill"] < -3 else _MEASURED_ROWS[1]
        raise CheckFailed(f"{_fill(row.message, case.sizes(), found)}\n  ({what}, {where})", row.id)


def _head_problem(head, name: str, C: int, hs: int) -> CheckFailed | None:
    try:
        _check_head_structure(head, name, C, hs)
    except CheckFailed as problem:
        return problem
    return None


@_check
def check_head(Head):
    """Chapter 5, exercise ``ex-head-diagnose``: the class ``Head``, built as ``Head(C, head_size, block_size)``.

    Its forward maps (B, T, C) to (B, T, head_size) for every T <= block_size; it has the attributes
    ``key``, ``query`` and ``value`` (bias-free ``nn.Linear(C, head_size)``) and a ``tril`` buffer. The
    expected output is computed from the head's own key, query and value weights before its forward
    runs, with the head in ``eval()`` mode (an ``nn.Dropout`` is off); a forward that changes the
    head's weights or its input ``x``, or gives two outputs for the same ``x``, fails, saying so. Mistakes the
    tables do not rebuild are named by measurement, from the weights the head really uses (read on
    a copy whose values are one-hot): a future key with weight, a finite fill, a past key hidden, a
    scale after the softmax, any other scale; so is a mask that only fits T = block_size.
    """
    name = _name(Head)
    if isinstance(Head, nn.Module):
        _fail("head/instance", cls=type(Head).__name__)
    builds = [((384, 16, 8), [(4, 8), (1, 1), (3, 5)]), ((32, 8, 12), [(2, 12), (2, 7)])]
    tested = []
    for (C, hs, bs), shapes in builds:
        head, _ = _call(Head, C, hs, bs, inputs=f"C={C}, head_size={hs}, block_size={bs}", name=name)
        if not isinstance(head, nn.Module):
            _fail("head/not-a-module", name=name)
        head.eval()  # compared as a model is used: nn.Dropout off
        problem = _head_problem(head, name, C, hs)
        for i, (B, T) in enumerate(shapes):
            x = torch.randn(B, T, C)
            where = f"{name}({C}, {hs}, {bs}) and x of shape {_shape(x)}"
            p = _Projected(head, x)
            if problem is None:  # the reference, from the weights as they are before the forward
                expected, raw = _head_output(p), p.q @ p.k.mT
            given = x.clone()
            before = _snapshot([head, given])
            got, exc, watch = running._run(head, given)
            if problem is not None:  # a missing part explains more than the error or the numbers it causes
                raise problem
            case = HeadCase(C=C, hs=hs, T=T, bs=bs, build=functools.partial(_head_output, p), raw=raw,
                            weights=functools.cache(lambda head=head, x=x: _weights_of(head, x)))
            if exc is not None:
                _raise_from(exc, watch, name, where, case, _HEAD_HINTS)
            _fail_if_changed(before, [head, given], ["self", "x"], name, where)
            what = f"your {name}'s output"
            if i == 0 and isinstance(got, torch.Tensor):  # the same x again: a random head gives itself away
                again, exc, watch = running._run(head, x.clone())
                if exc is None and isinstance(again, torch.Tensor) and again.shape == got.shape:
                    gap = float((again.detach().double() - got.detach().double()).abs().nan_to_num(0.0).max())
                    if gap > 0:
                        _fail("head/random", gap=gap, where=where)
            _compare(got, expected, what=what, where=where, case=case, table=_CHECK_HEAD_ROWS)
            _exactly_masked(case, what, where)
            tested.append((B, T, bs))
    return (f"{name} matches the reference head, and its tril is a buffer "
            f"(tested {_tested('T', [t[1] for t in tested])} with block_size 8 and 12; "
            f"{_tested('B', [t[0] for t in tested])})")


def _weights_answer(weights) -> torch.Tensor:
    """The learner's weights: a tensor, or a function of no arguments returning them (a stub stops)."""
    __tracebackhide__ = True
    if callable(weights) and not isinstance(weights, torch.Tensor):
        weights, _ = _call(weights, inputs="no arguments")
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
    ("real/bad-x", "`x` should be the real batch of section 5.9, a float tensor of shape (B, T, C) with "
     "C = {C} (the head's key.in_features) on the CPU, every number finite; got {got}", None),
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
def check_real_batch_weights(weights, head, x):
    """Chapter 5, the real-batch exercise (``ex-head-real-batch``): ``weights`` are the (B, T, T)
    attention weights that ``head`` computes for the batch ``x`` (B, T, C).

    ``weights`` is the learner's tensor or, so that a stub reports "not yet implemented", a function of
    no arguments returning it (None counts as not yet computed). ``head`` is the chapter's head (its
    ``key`` and ``query`` are read, never trained) and ``x`` the real batch; each is checked first.
    The expected weights are the head's own, computed before the learner's function runs:
    softmax(q @ kᵀ / √head_size) with the future masked, q and k from the head's projections of
    ``x``. So unscaled, wrongly scaled, q/k-swapped or wrongly masked weights fail, by name (the head
    mistakes of :func:`check_head`), and so do weights that are close but not exactly 0 above the
    diagonal (a finite fill), and a function that changes ``head`` or ``x``.
    """
    _real_inputs(head, x)
    C, hs = head.key.in_features, head.key.out_features
    p = _Projected(head, x)
    expected, raw = _head_weights(p), p.q @ p.k.mT  # before the learner's code runs
    before = _snapshot([x, head])
    got = weights = _weights_answer(weights)
    where = f"the head's own weights for x of shape {_shape(x)}"
    _fail_if_changed(before, [x, head], ["x", "head"], "real_batch_weights", where)
    case = HeadCase(C=C, hs=hs, T=x.shape[1], build=_only_weights(p), raw=raw,
                    weights=lambda: got.detach().to(torch.float64) if isinstance(got, torch.Tensor) else None)
    _compare(weights, expected, what="your weights", where=where, case=case, table=_HEAD_ROWS + _MEASURED_ROWS)
    _exactly_masked(case, "your weights", where)
    B, T = x.shape[:2]
    return (f"your weights are the head's own, softmax(q @ kᵀ / √{hs}) under the causal mask, "
            f"for all {B} × {T} rows")


@dataclasses.dataclass(kw_only=True)
class MultiheadCase(HeadCase):
    """The heads of the multi-head check and one input x: each head's own output, in float64."""

    n: int  # how many heads
    B: int
    outs: list  # each head's (B, T, hs) output
    width: int  # n * hs


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
    ("multihead/mean", "you averaged the heads' outputs: multi-head attention keeps every head's output "
     "and concatenates them along the last axis, (B, T, n_heads * hs) = (B, T, {width})",
     _answer_is(lambda c: torch.stack(c.outs).mean(0))),
    ("multihead/no-sdpa", "right numbers, but no call to F.scaled_dot_product_attention: the exercise is "
     "to stack the heads' q, k and v into (B, n_heads, T, hs) tensors and make one call", None),
    ("multihead/one-call", "right numbers, but {calls} calls to F.scaled_dot_product_attention, one per "
     "head: stack the heads' q, k and v into (B, n_heads, T, hs) tensors and make a single call; one "
     "call over all the heads is what lets PyTorch pick a fused kernel", None),
    ("multihead/not-4d", "right numbers, but your call got {axes}-D tensors: give it q, k and v of shape "
     "(B, n_heads, T, hs); PyTorch's fused kernels need that 4-D layout and run 3-D input on the plain "
     "math path", None),
) + _SDPA_ROWS + tuple(row for row in _HEAD_ROWS if row.id != "mask/none")


@_check
def check_multihead_sdpa(fn):
    """Chapter 5, the multi-head exercise: ``fn(heads, x)`` runs several heads with one fused call.

    ``heads`` is a list of 3 heads built like Fig. 6's ``Head(32, 8, 8)`` (bias-free ``key``, ``query``,
    ``value``, a ``tril`` buffer), ``x`` is (B, T, 32) with T = 8, 1, 5. The answer stacks the heads'
    q, k and v into (B, n_heads, T, hs) tensors, calls ``F.scaled_dot_product_attention(q, k, v,
    is_causal=True)`` once on them, and returns the heads' outputs side by side, (B, T, n_heads * hs),
    equal to ``torch.cat([h(x) for h in heads], -1)``.

    Names: heads in the wrong order, outputs interleaved (head axis last), a reshape without the
    transpose, the (B, n_heads, T, hs) result returned as it is or with the last two axes not merged,
    the mean instead of the concatenation, no causal mask (or a float mask), the head mistakes of
    :func:`check_head`; and, with the right numbers, no call, one call per head, or a call on 3-D input.
    """
    C, hs, bs, n = 32, 8, 8, 3
    heads = [ReferenceHead(C, hs, bs) for _ in range(n)]
    shapes = [(4, 8), (1, 1), (3, 5)]
    for B, T in shapes:
        x = torch.randn(B, T, C)
        where = f"{n} heads like Head({C}, {hs}, {bs}) and x of shape {_shape(x)}"
        projected = [_Projected(h, x) for h in heads]
        outs = [_head_output(p) for p in projected]

        def build(projected=projected, **how):
            return torch.cat([_head_output(p, **how) for p in projected], -1)

        case = MultiheadCase(C=C, hs=hs, n=n, B=B, T=T, outs=outs, width=n * hs, build=build)
        got, watch = _call(fn, list(heads), x.clone(), inputs=where, case=case)
        _compare(got, torch.cat(outs, -1), what="your output", where=where, case=case, table=_MULTIHEAD_ROWS)
        calls = watch.calls["scaled_dot_product_attention"]
        if calls == 0:
            _fail("multihead/no-sdpa")
        if calls > 1:
            _fail("multihead/one-call", calls=calls)
        if watch.sdpa_axes[0] != 4:
            _fail("multihead/not-4d", axes=watch.sdpa_axes[0])
    return (f"one call of F.scaled_dot_product_attention on (B, {n}, T, {hs}) tensors equals "
            f"torch.cat([h(x) for h in heads], -1) (tested {_tested('T', [s[1] for s in shapes])}; "
            f"{n} heads of size {hs})")


