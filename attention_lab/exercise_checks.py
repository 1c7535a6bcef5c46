"""Checks for the exercises that ask to predict, explain or change something (issue 21).

- chapter 2: :func:`check_one_way`, a query and a key that make one token look for another, not back;
- chapter 3: :func:`check_unit_scale`, the inverse temperature that gives logits of variance 1;
- chapter 6: :func:`check_score_parts`, a trained head's scores split into token and position parts.

They behave as the checks of :mod:`attention_lab.checks` do (one line in learner mode, ``strict=True``
for graders, a kind line for a stub, :class:`~attention_lab.checks.CheckFailed` naming the mistake) and
run the learner's code through that module's ``_call``, the one road the graders record and replay.
:func:`fresh` gives graders what ``checks.fresh()`` gives them, with these checks on it.
"""
from __future__ import annotations

import importlib.util
import math

import torch
import torch.nn as nn

from attention_lab import checks

__all__ = ["check_one_way", "check_unit_scale", "check_score_parts", "MISTAKES", "fresh"]

# the checks module whose _call runs the learner's code and whose CheckFailed is raised; fresh() points
# a new copy of this module at a fresh copy of it
_checks = checks

MISTAKES: dict[str, str] = {
    # chapter 2
    "one-way/not-layers": "`{name}` should return two nn.Linear layers, (query, key); got {got}",
    "one-way/width": "query and key must both take the 2 numbers of a token and give vectors of one "
                     "width (the head size); got nn.Linear({qin}, {qout}) and nn.Linear({kin}, {kout})",
    "one-way/bias": "use bias=False, as the chapter's projections do: a bias adds to every score of a row "
                    "and hides what the weights do",
    "one-way/tied": "a looks for b exactly as much as b looks for a ({ab:.2f} both ways): with one matrix "
                    "for the query and the key the grid is symmetric (section 2.5); give the key its own "
                    "weights",
    "one-way/reversed": "the wrong way round: b looks for a (score {ba:.2f}) and a does not look for b "
                        "({ab:.2f}); the query belongs to the token that looks, the key to the one it looks for",
    "one-way/layout": "your weights would work as (in, out) matrices, x @ weight, but nn.Linear stores "
                      "(out, in) and computes x @ weight.T (section 2.3), which gives a -> b {ab:.2f} and "
                      "b -> a {ba:.2f}; transpose the weights you wrote",
    "one-way/weak": "not yet one-way enough: a -> b scores {ab:.2f} (needs 2 or more) and b -> a {ba:.2f} "
                    "(needs 0 or less)",
    # chapter 3
    "scale/not-a-number": "`{name}` should return one number (a float or a 0-d tensor); got {got}",
    "scale/unit-variance": "that is 1/√d_k, the scale for entries of variance 1; these entries have "
                           "variance {vq:.2f} (q) and {vk:.2f} (k), and Var(q·k) = d_k·Var(q_i)·Var(k_i) "
                           "(section 3.5)",
    "scale/variances": "divided by the variances, not by the standard deviation: s must be "
                       "1/√(d_k·Var(q_i)·Var(k_i)), the square root of the whole product",
    "scale/no-dk": "the d_k products of q·k add up their variances: keep the √d_k beside the entries' "
                   "variances",
    "scale/divide-dk": "that is 1/d_k, which flattens the logits (exercise 3.3); s is 1 over the standard "
                       "deviation of q·k",
    "scale/inverted": "upside down: multiplying by √d_k (or by the standard deviation) spreads the logits "
                      "further; s divides by the standard deviation of q·k",
    "scale/fixed": "the same s for every input ({got:.3g}): read d_k and the variances from q and k",
    "scale/differ": "the logits s·(q @ kᵀ) should have variance about 1; with your s = {got:.3g} they have "
                    "{var:.3g} (d_k = {dk}, Var(q_i) = {vq:.2f}, Var(k_i) = {vk:.2f})",
    # chapter 6
    "parts/not-four": "`{name}` should return four tensors (tok·tok, tok·pos, pos·tok, pos·pos); got {got}",
    "parts/shape": "each part should have shape (B, T, T) = {shape}; got {got}",
    "parts/masked": "the parts are scores before the mask: a masked entry is -inf or 0 in yours; the mask "
                    "comes after the scores are added up",
    "parts/weights": "your parts are weights (rows sum to 1): return the scaled scores, before the softmax",
    "parts/no-scale": "the parts are not divided by √head_size = {root:g}; the scores the softmax takes are",
    "parts/swapped": "the two cross terms are swapped: tok·pos means a token's query against a position's "
                     "key, q_tok @ k_posᵀ",
    "parts/sum": "your four parts add up to the head's scores, but they are not the four named parts "
                 "(the largest difference is in part {part})",
    "parts/differ": "part {part} ({label}) differs from the reference by up to {size:.3g}, and the four do "
                    "not add up to the head's scores",
}


def _fail(mistake: str, **fields):
    __tracebackhide__ = True
    raise _checks.CheckFailed(MISTAKES[mistake].format(**fields), mistake)


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


# ---------------------------------------------------------------------------------------------
# chapter 2: one token looks for another, not back

A = torch.tensor([1.0, 0.0])  # token a
B = torch.tensor([0.0, 1.0])  # token b


def _one_way_scores(query: nn.Linear, key: nn.Linear, transposed: bool = False) -> tuple[float, float]:
    """(a -> b, b -> a): the raw score of a's query against b's key, and the other way round."""
    wq, wk = (query.weight.detach().double(), key.weight.detach().double())
    if transposed:  # the weights read as (in, out), the mistake of x @ weight
        wq, wk = wq.T, wk.T
    q = lambda t: t.double() @ wq.T  # noqa: E731
    k = lambda t: t.double() @ wk.T  # noqa: E731
    return float(q(A) @ k(B)), float(q(B) @ k(A))


def _check_one_way(one_way):
    """Chapter 2: ``one_way()`` returns ``(query, key)``, bias-free ``nn.Linear(2, hs)`` layers with which
    token a = [1, 0] looks for token b = [0, 1] (raw score 2 or more) and b does not look for a (0 or less).

    Names: tied weights (one matrix for both), the two directions swapped, weights written as (in, out),
    a bias, layers of the wrong sizes, scores that lean the right way but too little.
    """
    got, _ = _checks._call(one_way, inputs="no arguments")
    name = _name(one_way)
    if not (isinstance(got, tuple | list) and len(got) == 2 and all(isinstance(m, nn.Linear) for m in got)):
        _fail("one-way/not-layers", name=name, got=type(got).__name__)
    query, key = got
    if not (query.in_features == key.in_features == 2 and query.out_features == key.out_features):
        _fail("one-way/width", qin=query.in_features, qout=query.out_features, kin=key.in_features,
              kout=key.out_features)
    if query.bias is not None or key.bias is not None:
        _fail("one-way/bias")
    ab, ba = _one_way_scores(query, key)
    if ab >= 2 and ba <= 0:
        return (f"a looks for b (raw score {ab:.2f}) and b does not look for a ({ba:.2f}): one way, as "
                f"tied weights could never be")
    if query is key or torch.equal(query.weight, key.weight):
        _fail("one-way/tied", ab=ab)
    if ba >= 2 and ab <= 0:
        _fail("one-way/reversed", ab=ab, ba=ba)
    tab, tba = _one_way_scores(query, key, transposed=True)
    if tab >= 2 and tba <= 0:
        _fail("one-way/layout", ab=ab, ba=ba)
    _fail("one-way/weak", ab=ab, ba=ba)


# ---------------------------------------------------------------------------------------------
# chapter 3: the inverse temperature that gives logits of variance 1

# (d_k, Var(q_i), Var(k_i)): the chapter's own case, then two where no fixed or half-right s passes
_SCALE_CASES = ((16, 1 / 3, 1 / 3), (64, 4.0, 1.0), (8, 0.25, 0.04))
_SCALE_TOLERANCE = 0.15  # a sample's variance wobbles by a few percent; every mistake is off by 1.5x or more


def _scale_mistakes(dk: float, vq: float, vk: float) -> dict[str, float]:
    sq, sk = math.sqrt(vq), math.sqrt(vk)
    return {"scale/unit-variance": 1 / math.sqrt(dk), "scale/variances": 1 / (math.sqrt(dk) * vq * vk),
            "scale/no-dk": 1 / (sq * sk), "scale/divide-dk": 1 / dk,
            "scale/inverted": math.sqrt(dk * vq * vk)}


def _check_unit_scale(unit_scale):
    """Chapter 3: ``unit_scale(q, k)`` returns the number s with which the logits ``s * (q @ kᵀ)`` of
    queries and keys ``(B, T, d_k)`` have variance about 1: s = 1/√(d_k·Var(q_i)·Var(k_i)).

    Tested on the chapter's kind of entries (variance 1/3, d_k = 16) and two others; within 15 %.
    Names: 1/√d_k, variances instead of standard deviations, no √d_k, 1/d_k, the scale upside down, one
    fixed number, anything else with the variance it gives.
    """
    name = _name(unit_scale)
    g = torch.Generator().manual_seed(_checks.SEED)
    got, right, logits_var = [], [], []
    for dk, vq, vk in _SCALE_CASES:
        q = torch.randn(64, 8, dk, generator=g) * math.sqrt(vq)  # (B, T, d_k)
        k = torch.randn(64, 8, dk, generator=g) * math.sqrt(vk)  # (B, T, d_k)
        raw = (q.double() @ k.double().transpose(-2, -1))  # (B, T, T), before the learner sees q, k
        s, _ = _checks._call(unit_scale, q, k, inputs=f"q, k of shape (64, 8, {dk})")
        if isinstance(s, torch.Tensor) and s.numel() == 1 and s.is_floating_point():
            s = s.item()
        if not isinstance(s, float | int) or isinstance(s, bool) or not math.isfinite(s):
            _fail("scale/not-a-number", name=name, got=repr(s) if isinstance(s, float | int) else type(s).__name__)
        got.append(float(s))
        right.append(1 / math.sqrt(dk * vq * vk))
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


# ---------------------------------------------------------------------------------------------
# chapter 6: a trained head's scores, split into token and position parts

PART_LABELS = ("tok·tok", "tok·pos", "pos·tok", "pos·pos")


def _reference_parts(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """The four parts of ``q @ kᵀ / √hs`` for x = tok_emb + pos_emb, in float64: (B, T, T) each."""
    T = ids.shape[1]
    tok = model.token_table.weight.detach().double()[ids]  # (B, T, C)
    pos = model.position_table.weight.detach().double()[:T]  # (T, C)
    wq, wk = model.head.query.weight.detach().double(), model.head.key.weight.detach().double()
    root = math.sqrt(wk.shape[0])
    q_tok, q_pos, k_tok, k_pos = tok @ wq.T, pos @ wq.T, tok @ wk.T, pos @ wk.T
    return [a @ b.transpose(-2, -1) / root
            for a, b in ((q_tok, k_tok), (q_tok, k_pos), (q_pos, k_tok), (q_pos, k_pos))]


def _check_score_parts(score_parts, model, ids):
    """Chapter 6: ``score_parts(model, ids)`` returns the four parts (tok·tok, tok·pos, pos·tok, pos·pos)
    of the head's scaled scores for ids (B, T): the query of one part of x against the key of one part,
    each ``(B, T, T)``, before the mask; their sum is the head's scores.

    Tested on the model and ids given, and on their first 5 positions of 3 windows.
    Names: a mask applied, weights instead of scores, no 1/√head_size, the cross terms swapped, parts that
    add up but are not the four, a part that differs.
    """
    name = _name(score_parts)
    cases = [(ids, "the chapter's windows"), (ids[:3, :5], "3 windows of 5")]
    for case_ids, where in cases:
        expected = _reference_parts(model, case_ids)
        parts, _ = _checks._call(score_parts, model, case_ids.clone(),
                                 inputs=f"model and ids of shape {tuple(case_ids.shape)}")
        if not (isinstance(parts, tuple | list) and len(parts) == 4
                and all(isinstance(p, torch.Tensor) for p in parts)):
            _fail("parts/not-four", name=name, got=type(parts).__name__)
        shape = tuple(expected[0].shape)
        for p in parts:
            if tuple(p.shape) != shape:
                _fail("parts/shape", shape=shape, got=tuple(p.shape))
        got = [p.detach().double() for p in parts]
        future = torch.ones(shape[1:]).triu(1).bool()  # (T, T): the keys after each query
        past = torch.ones(shape[1:]).tril(-1).bool()  # (T, T): the keys before it
        if any(not torch.isfinite(p).all() or ((p[:, future] == 0).all() and (p[:, past] != 0).any())
               for p in got if shape[-1] > 1):
            _fail("parts/masked")
        if shape[-1] > 1 and all(torch.allclose(p.sum(-1), torch.ones(shape[:2], dtype=p.dtype)) for p in got):
            _fail("parts/weights")
        close = [torch.allclose(g, e, rtol=1e-4, atol=1e-4) for g, e in zip(got, expected)]
        if all(close):
            continue
        root = math.sqrt(model.head.key.weight.shape[0])
        if all(torch.allclose(g / root, e, rtol=1e-4, atol=1e-4) for g, e in zip(got, expected)):
            _fail("parts/no-scale", root=root)
        if close[0] and close[3] and torch.allclose(got[1], expected[2], rtol=1e-4, atol=1e-4) \
                and torch.allclose(got[2], expected[1], rtol=1e-4, atol=1e-4):
            _fail("parts/swapped")
        sizes = [float((g - e).abs().max()) for g, e in zip(got, expected)]
        worst = max(range(4), key=lambda i: sizes[i])
        if torch.allclose(sum(got), sum(expected), rtol=1e-4, atol=1e-4):
            _fail("parts/sum", part=PART_LABELS[worst])
        _fail("parts/differ", part=worst, label=PART_LABELS[worst], size=sizes[worst])
    T = ids.shape[1]
    return (f"the four parts are the head's scores split by what the query and the key come from, and add "
            f"up to them (tested {ids.shape[0]:,} windows of {T}, 3 of 5)")


# ---------------------------------------------------------------------------------------------
# the checks, and a fresh copy for graders

_RAW = {"check_one_way": _check_one_way, "check_unit_scale": _check_unit_scale,
        "check_score_parts": _check_score_parts}


def _named(raw, name):
    raw.__name__ = raw.__qualname__ = name
    return raw


check_one_way = checks._check(_named(_check_one_way, "check_one_way"))
check_unit_scale = checks._check(_named(_check_unit_scale, "check_unit_scale"))
check_score_parts = checks._check(_named(_check_score_parts, "check_score_parts"))


def fresh():
    """``checks.fresh()`` with this module's checks on it, for graders.

    The new checks come from a copy of this file read again, run the learner's code through that fresh
    copy's ``_call`` and raise its ``CheckFailed``, so recording or replaying the copy's ``_run`` (as
    :mod:`attention_lab.observe` and :mod:`attention_lab.judge` do) covers them too.
    """
    graded = checks.fresh()
    spec = importlib.util.spec_from_file_location("attention_lab._fresh_exercise_checks", __file__)
    mine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mine)
    mine._checks = graded
    for name, raw in mine._RAW.items():
        setattr(graded, name, graded._check(raw))
    return graded
