"""Chapter 3's checks: the inverse temperature that gives logits of variance 1 (:func:`check_unit_scale`)
and a softmax safe for large logits (:func:`check_softmax`)."""
from __future__ import annotations

import dataclasses
import math

import torch

from . import running
from .engine import Case, _answer_is, _compare, _fail, _matches, _name, _shape, _table
from .references import _softmax
from .running import _call, _check

_SCALE_ROWS = _table(
    ("scale/not-a-number", "`{name}` should return one number (a float or a 0-d tensor); got {got}", None),
    ("scale/unit-variance", "that is 1/√d_k, the scale for entries of variance 1; these entries have "
     "variance {vq:.2f} (q) and {vk:.2f} (k), and Var(q·k) = d_k·Var(q_i)·Var(k_i) (section 3.5)", None),
    ("scale/variances", "divided by the variances, not by the standard deviation: s must be "
     "1/√(d_k·Var(q_i)·Var(k_i)), the square root of the whole product", None),
    ("scale/no-dk", "the d_k products of q·k add up their variances: keep the √d_k beside the entries' "
     "variances", None),
    ("scale/divide-dk", "that is 1/d_k, which flattens the logits (exercise 3.3); s is 1 over the standard "
     "deviation of q·k", None),
    ("scale/inverted", "upside down: multiplying by √d_k (or by the standard deviation) spreads the logits "
     "further; s divides by the standard deviation of q·k", None),
    ("scale/fixed", "the same s for every input ({got:.3g}): read d_k and the variances from q and k", None),
    ("scale/differ", "the logits s·(q @ kᵀ) should have variance about 1; with your s = {got:.3g} they have "
     "{var:.3g} (d_k = {dk}, Var(q_i) = {vq:.2f}, Var(k_i) = {vk:.2f})", None),
)

# (d_k, Var(q_i), Var(k_i)): the chapter's own case, then two where no fixed or half-right s passes
_SCALE_CASES = ((16, 1 / 3, 1 / 3), (64, 4.0, 1.0), (8, 0.25, 0.04))
_SCALE_TOLERANCE = 0.15  # a sample's variance wobbles by a few percent; every mistake is off by 1.5x or more


def _scale_mistakes(dk: float, vq: float, vk: float) -> dict[str, float]:
    """The s each named mistake gives for entries of these sizes, by the mistake's id."""
    sq, sk = math.sqrt(vq), math.sqrt(vk)
    return {"scale/unit-variance": 1 / math.sqrt(dk), "scale/variances": 1 / (math.sqrt(dk) * vq * vk),
            "scale/no-dk": 1 / (sq * sk), "scale/divide-dk": 1 / dk,
            "scale/inverted": math.sqrt(dk * vq * vk)}


@_check
def check_unit_scale(unit_scale):
    """Chapter 3, exercise ``ex-scaling-unit-scale``: ``unit_scale(q, k)`` returns the number s with
    which the logits ``s * (q @ kᵀ)`` of queries and keys ``(B, T, d_k)`` have variance about 1:
    s = 1/√(d_k·Var(q_i)·Var(k_i)).

    Tested on the chapter's kind of entries (variance 1/3, d_k = 16) and two others; within 15 %.
    Names: 1/√d_k, variances instead of standard deviations, no √d_k, 1/d_k, the scale upside down, one
    fixed number, anything else with the variance it gives.
    """
    name = _name(unit_scale)
    g = torch.Generator().manual_seed(running.SEED)  # read at call time: a grader may set the seed
    got, logits_var = [], []
    for dk, vq, vk in _SCALE_CASES:
        q = torch.randn(64, 8, dk, generator=g) * math.sqrt(vq)  # (B, T, d_k)
        k = torch.randn(64, 8, dk, generator=g) * math.sqrt(vk)  # (B, T, d_k)
        raw = (q.double() @ k.double().transpose(-2, -1))  # (B, T, T), before the learner sees q, k
        s, _ = _call(unit_scale, q, k, inputs=f"q, k of shape (64, 8, {dk})")
        if isinstance(s, torch.Tensor) and s.numel() == 1 and s.is_floating_point():
            s = s.item()
        if not isinstance(s, float | int) or isinstance(s, bool) or not math.isfinite(s):
            _fail("scale/not-a-number", name=name, got=repr(s) if isinstance(s, float | int) else type(s).__name__)
        got.append(float(s))
        logits_var.append(float((s * raw).var()))
    if all(abs(v - 1) <= _SCALE_TOLERANCE for v in logits_var):
        return (f"s·(q @ kᵀ) has variance {min(logits_var):.2f} to {max(logits_var):.2f} "
                f"(tested d_k = 16, 64, 8 with Var(q_i)·Var(k_i) = 1/9, 4, 0.01)")
    cases = list(zip(_SCALE_CASES, got))
    for mistake in _scale_mistakes(1, 1, 1):
        if all(abs(s / _scale_mistakes(*case)[mistake] - 1) <= _SCALE_TOLERANCE for case, s in cases):
            (dk, vq, vk), _ = cases[-1]
            _fail(mistake, vq=vq, vk=vk)
    if max(got) - min(got) <= 1e-9 * max(abs(x) for x in got):
        _fail("scale/fixed", got=got[0])
    worst = max(range(len(cases)), key=lambda i: abs(logits_var[i] - 1))
    (dk, vq, vk), s = cases[worst]
    _fail("scale/differ", got=s, var=logits_var[worst], dk=dk, vq=vq, vk=vk)


@dataclasses.dataclass(kw_only=True)
class SoftmaxCase(Case):
    """One input z of the softmax check, in float64; ``large`` for the logits such as [1000, 0]."""

    z: torch.Tensor
    large: bool


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


