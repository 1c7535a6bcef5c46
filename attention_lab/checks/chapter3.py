"""Chapter 3's checks: the inverse temperature that gives logits of variance 1 (:func:`check_unit_scale`)
and a softmax safe for large logits (:func:`check_softmax`)."""
from __future__ import annotations

import math
import numbers

import torch

from .engine import Case, _fail, _matches, _name, _shape, _table
from .references import _softmax
from .running import _call, _check, _try

_SCALE_ROWS = _table(
    ("scale/not-a-number", "`{name}` should return one number (a float or a 0-d tensor); got {got}", None),
    ("scale/kept", "`{name}` returned {got:.4g} for two inputs of one shape whose entries have different "
     "variances ({first} and {second}): it keeps its first answer for that shape; compute s from the q "
     "and k it is given", None),
    ("scale/unit-variance", "that is 1/√d_k, the scale for entries of variance 1; these entries have "
     "variance {vq:.2f} (q) and {vk:.2f} (k), and Var(q·k) = d_k·Var(q_i)·Var(k_i) (section 3.5)", None),
    ("scale/variances", "divided by the variances, not by the standard deviation: s must be "
     "1/√(d_k·Var(q_i)·Var(k_i)), the square root of the whole product", None),
    ("scale/std", "standard deviations where variances belong: Var(q·k) = d_k·Var(q_i)·Var(k_i) multiplies "
     "the variances, q.var() and k.var(), not q.std() and k.std(); s = 1/√(d_k·Var(q_i)·Var(k_i))", None),
    ("scale/no-dk", "the d_k products of q·k add up their variances: keep the √d_k beside the entries' "
     "variances", None),
    ("scale/divide-dk", "that is 1/d_k, which flattens the logits (exercise 3.3); s is 1 over the standard "
     "deviation of q·k", None),
    ("scale/inverted", "upside down: multiplying by √d_k (or by the standard deviation) spreads the logits "
     "further; s divides by the standard deviation of q·k", None),
    ("scale/fixed", "the same s for every input ({got:.3g}): read d_k and the variances from q and k", None),
    ("scale/differ", "the logits s * (q @ k.transpose(-2, -1)) should have variance about 1; with your s = {got:.3g} they have "
     "{var:.3g} (d_k = {dk}, Var(q_i) = {vq:.2f}, Var(k_i) = {vk:.2f})", None),
)

# (d_k, Var(q_i), Var(k_i)): the chapter's own case, then two where no fixed or half-right s passes
_SCALE_CASES = ((16, 1 / 3, 1 / 3), (64, 4.0, 1.0), (8, 0.25, 0.04))
_SCALE_SHAPE = (32, 16)  # (B, T): 8,192 logits a case, whose variance a sample gives within a few percent
_DRAWN_DK = tuple(d for d in range(4, 49) if d not in (8, 16))
_SCALE_TOLERANCE = 0.15  # a sample's variance wobbles by a few percent; every mistake is off by 1.5x or more


def _scale_cases(trial) -> list[tuple[int, float, float]]:
    """The fixed cases (the second's shape given to a drawn d_k and drawn variances), and the chapter's
    shape again with variances whose right s is three times the first's."""
    dk = trial.choice(_DRAWN_DK)  # never 8 or 16, so that the four inputs have three shapes
    drawn = (dk, math.exp(trial.uniform(-2.0, 1.5)), math.exp(trial.uniform(-2.0, 1.5)))
    return [_SCALE_CASES[0], drawn, _SCALE_CASES[2], (16, 2.0, 0.5)]


def _scale_mistakes(dk: float, vq: float, vk: float) -> dict[str, float]:
    """The s each named mistake gives for entries of these sizes, by the mistake's id."""
    sq, sk = math.sqrt(vq), math.sqrt(vk)
    return {"scale/unit-variance": 1 / math.sqrt(dk), "scale/variances": 1 / (math.sqrt(dk) * vq * vk),
            "scale/std": 1 / math.sqrt(dk * sq * sk), "scale/no-dk": 1 / (sq * sk), "scale/divide-dk": 1 / dk,
            "scale/inverted": math.sqrt(dk * vq * vk)}


def _number(s) -> tuple[float | None, str]:
    """(s as a float, "") for any one real number, a NumPy scalar or a one-element float tensor;
    else (None, what it is, in the learner's words)."""
    if isinstance(s, torch.Tensor):
        dtype = str(s.dtype).replace("torch.", "")
        if s.device.type == "meta":
            return None, f"a tensor on the meta device, which holds no numbers; compute s on the CPU"
        if s.numel() != 1:
            return None, f"a tensor of shape {_shape(s)}, not one number"
        if s.dtype == torch.bool:
            return None, f"a {dtype} tensor, {s.item()}: the result of a comparison, not a number"
        if not s.is_floating_point():
            return None, (f"an {dtype} tensor, {s.item()}: integers hold no fractions (a // or .long() "
                          f"on the way?), and s is a fraction such as 0.18")
        s = s.item()
    if isinstance(s, bool) or not isinstance(s, numbers.Real):
        return None, type(s).__name__
    if not math.isfinite(float(s)):
        return None, repr(float(s))
    return float(s), ""


@_check
def check_unit_scale(unit_scale, *, trial):
    """Chapter 3, exercise ``ex-scaling-unit-scale``: ``unit_scale(q, k)`` returns the number s with
    which the logits ``s * (q @ k.transpose(-2, -1))`` of queries and keys ``(B, T, d_k)`` have variance
    about 1 (within 15 %): s = 1/√(d_k·Var(q_i)·Var(k_i)), as any one real number.
    """
    name = _name(unit_scale)
    cases = _scale_cases(trial)
    got, logits_var = [], []
    for dk, vq, vk in cases:
        q = trial.randn(*_SCALE_SHAPE, dk) * math.sqrt(vq)  # (B, T, d_k)
        k = trial.randn(*_SCALE_SHAPE, dk) * math.sqrt(vk)  # (B, T, d_k)
        raw = (q.double() @ k.double().transpose(-2, -1))  # (B, T, T), before the learner sees q, k
        answer, _ = _call(unit_scale, q, k, inputs=f"q, k of shape {_shape(q)}")
        s, what = _number(answer)
        if s is None:
            _fail("scale/not-a-number", name=name, got=what)
        got.append(s)
        logits_var.append(float((s * raw).var()))
    if all(abs(v - 1) <= _SCALE_TOLERANCE for v in logits_var):
        return ("s * (q @ k.transpose(-2, -1)) has variance 1, within 15 % (tested 4 inputs: d_k = 16, 8 and two drawn, "
                "Var(q_i)·Var(k_i) from 0.01 to 20)")
    pairs = list(zip(cases, got))
    for mistake in _scale_mistakes(1, 1, 1):
        if all(abs(s / _scale_mistakes(*case)[mistake] - 1) <= _SCALE_TOLERANCE for case, s in pairs):
            (dk, vq, vk), _ = pairs[2]  # (8, 0.25, 0.04): the case the message's numbers come from
            _fail(mistake, vq=vq, vk=vk)
    if max(got) - min(got) <= 1e-9 * max(abs(x) for x in got):
        _fail("scale/fixed", got=got[0])
    if got[0] == got[-1] and abs(logits_var[0] - 1) <= _SCALE_TOLERANCE:  # the first shape's answer, kept
        _fail("scale/kept", name=name, got=got[0], first="1/3 and 1/3", second="2 and 0.5")
    worst = max(range(len(pairs)), key=lambda i: abs(logits_var[i] - 1))
    (dk, vq, vk), s = pairs[worst]
    _fail("scale/differ", got=s, var=logits_var[worst], dk=dk, vq=vq, vk=vk)


def _global_max(case, got):
    """Subtracting the max of the whole tensor: rows far below it underflow to 0 / 0 in float32."""
    if not case.large:
        return None
    z = case.z.to(torch.float32)
    e = (z - z.max()).exp()
    return {} if _matches(got, (e / e.sum(-1, keepdim=True)).to(torch.float64)) else None


def _shifted(z: torch.Tensor) -> torch.Tensor:
    """z less each row's max, the first step of a safe softmax: a slip after it is keyed on this form too."""
    return z - z.max(-1, keepdim=True).values


def _softmax_axis(case, got):
    e = _shifted(case.z).exp()  # the row's max subtracted right, then the sum taken over another axis
    for d in range(case.z.dim() - 1):
        if _matches(got, _softmax(case.z, d)) or _matches(got, e / e.sum(d, keepdim=True)):
            return dict(dim=d)
    return None


def _whole_sum(case, got):
    e, shifted = case.z.exp(), _shifted(case.z).exp()
    return {} if _matches(got, e / e.sum()) or _matches(got, shifted / shifted.sum()) else None


def _no_exp(case, got):
    m = _shifted(case.z)
    return {} if _matches(got, case.z / case.z.sum(-1, keepdim=True)) or _matches(got, m / m.sum(-1, keepdim=True)) else None


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
     "e.sum(dim=-1, keepdim=True)", _whole_sum),
    ("softmax/no-exp", "you forgot the exp: softmax is exp(z) / sum(exp(z)), not z / sum(z) (after the max "
     "is subtracted, too: exp(z - max) / sum(exp(z - max)))", _no_exp),
    ("softmax/torch", "right numbers, but from torch's own softmax: your function calls {called}(); the "
     "exercise asks you to write it from exp and sum (after subtracting each row's max)", None),
)
_TORCH_SOFTMAX = ("softmax", "log_softmax", "_softmax")  # F.softmax, torch.softmax, z.softmax, log_softmax


def _softmax_inputs(trial) -> list[tuple[str, torch.Tensor]]:
    """Logits of 1 to 4 axes, the lesson's [8, 0], large ones fixed and drawn, and the first shape again."""
    return [
        ("random logits", trial.randn(3, 5, 5) * 3),
        ("the logits [8, 0]", torch.tensor([8.0, 0.0])),
        ("random logits", trial.randn(2, 1, 1)),
        ("large logits", torch.tensor([[1000.0, 0.0], [0.0, -1000.0], [-1000.0, -1001.0], [500.0, 499.0]])),
        ("random logits", trial.randn(2, 3, 4, trial.integer(2, 9)) * 3),
        ("large logits", trial.randn(trial.integer(2, 6), trial.integer(2, 9)) * 500),
        ("random logits", trial.randn(3, 5, 5) * 3),
    ]


@_check
def check_softmax(fn, *, trial):
    """Chapter 3, exercise ``ex-scaling-softmax``: ``fn(z)`` is softmax over the last axis, written from
    exp and sum (a call of torch's softmax fails) and safe for large logits such as [1000, 0].
    """
    for label, z in _softmax_inputs(trial):
        case = Case(z=z.to(torch.float64), large=label == "large logits")
        where = f"{label}, z of shape {_shape(z)}"
        _, watch = _try(fn, (z,), _softmax(z), what="your softmax", where=where, case=case,
                        table=_SOFTMAX_ROWS, trial=trial)
        called = next((name for name in _TORCH_SOFTMAX if watch.calls[name]), None)
        if called:
            _fail("softmax/torch", called=called)
    return ("your softmax matches torch.softmax(z, dim=-1), also for logits like [1000, 0] (tested 7 "
            "inputs, 1-D to 4-D)")
