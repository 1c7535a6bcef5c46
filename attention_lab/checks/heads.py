"""A head's mistakes, shared by chapter 5's checks: rebuilt from the head's own weights, or measured.

:data:`_HEAD_ROWS` (with :data:`_MASK_ROWS`) rebuild each mistake with :func:`.references._head_output`'s
keyword arguments; :data:`_MEASURED_ROWS` read it off the weights the learner's head really uses
(:func:`_weights_read`), for forms no rebuilt row covers (a finite fill, a past key hidden, a scale
after the softmax, any other scale, weights that ignore the scores). :func:`_check_head_structure`
checks a head's parts as the lesson builds them.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

import torch.nn as nn

from . import running  # running._run, looked up at each call: a grader's replacement reaches it too
from .engine import Case, _fail, _fail_unless_float_cpu, _matches, _reference_with, _shape, _table
from .trial import _Saved


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


def _reversed(case, got):
    """The values, or the whole output, in the opposite order of positions."""
    if case.T < 2:
        return None
    backwards = case.build(values="v-reversed")
    if backwards is not None and _matches(got, backwards):
        return dict(how="key j's value was taken from position T - 1 - j (a flip of v along the "
                        "positions, or an index counted from the end)")
    right = case.build()
    if right is not None and _matches(got, right.flip(1)):
        return dict(how="out[:, t] holds what position T - 1 - t should get (the result was flipped "
                        "along the positions)")
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
    ("head/reversed", "your output runs backwards in time: {how}; keep the positions in their order: "
     "weights @ v, with v = self.value(x) as it comes, and no flip", _reversed),
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
    if W is None or case.T < 2 or torch.isnan(W).any() or float(case.raw.diff(dim=-1).abs().max()) < 1e-9:
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




# ---------------------------------------------------------------------------------------------
# a head's parts, and the weights it really uses

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
    """The head's parts, as the lesson builds them: three bias-free projections of float numbers on the
    CPU, and a `tril` buffer."""
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
        _fail_unless_float_cpu(layer.weight, what=f"self.{part}.weight", where=f"{name}({C}, {hs}, ...)")
    if "tril" in dict(head.named_parameters()):
        _fail("head/tril-parameter")
    if "tril" not in dict(head.named_buffers()):
        _fail("head/tril-not-buffer", found="a plain attribute, not a buffer" if hasattr(head, "tril") else "missing")


def _weights_read(Head, sizes: tuple, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """The (B, T, T) weights that a head of the learner's class ``Head(*sizes)`` really uses for the
    queries and keys ``q``, ``k`` (B, T, hs), in float64; None where they cannot be read.

    A new head of that class, in float64 and eval(), gets key, query and value weights that turn the
    one-hot positions x = I (T rows of width C) into these q and k and into one-hot values, so that its
    output is its weights, head_size columns at a time: no name or step of its forward is assumed.
    A head that is not built like the lesson's (or larger than C) is not measured.
    """
    return _with_new_head(Head, sizes, lambda probe: _probe_weights(probe, q, k, sizes[0]))


def _with_new_head(Head, sizes: tuple, use):
    """``use(head)`` for a new head of the learner's class ``Head(*sizes)``, built through ``running._run``;
    None if it cannot be built or ``use`` raises. The head gets its weights as built back afterwards (a
    grader compares what the learner's code handed out)."""
    built = running._quietly(running._run, Head, *sizes)  # (a grader may have no such call recorded)
    head = built[0] if built is not None and built[1] is None else None
    if not isinstance(head, nn.Module):
        return None
    own = _Saved([head])
    try:
        return use(head)
    except Exception:  # noqa: BLE001 - no head to measure or to compare with: nothing is named
        return None
    finally:
        own.restore()


def _probe_weights(probe: nn.Module, q: torch.Tensor, k: torch.Tensor, C: int) -> torch.Tensor | None:
    B, T, hs = q.shape
    probe.double().eval()
    layers = [probe.query, probe.key, probe.value]
    # a parametrized layer (weight_norm, spectral_norm) computes its weight at each use: it cannot be set
    if not all(isinstance(m, nn.Linear) and not nn.utils.parametrize.is_parametrized(m)
               and tuple(m.weight.shape) == (hs, C) for m in layers):
        return None
    x = torch.eye(T, C, dtype=torch.float64)[None]  # (1, T, C): row t is position t
    W = torch.zeros(B, T, T, dtype=torch.float64)
    for b in range(B):
        for start in range(0, T, hs):
            n = min(hs, T - start)
            v = torch.zeros(T, hs, dtype=torch.float64)
            v[range(start, start + n), range(n)] = 1.0  # position start + c has value e_c
            for layer, rows in zip(layers, (q[b], k[b], v)):  # nn.Linear: x @ weight.T, so column t is row t's
                with torch.no_grad():
                    layer.weight.copy_(torch.cat([rows.T, torch.zeros(hs, C - T, dtype=torch.float64)], 1))
            out, exc, _ = running._run(probe, x.clone())
            if exc is not None or not isinstance(out, torch.Tensor) or tuple(out.shape) != (1, T, hs):
                return None
            W[b, :, start:start + n] = out[0, :, :n].detach().to(torch.float64)
    return W
