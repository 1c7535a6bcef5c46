"""Chapter 2's check: a query and a key set by hand so that one token looks for another and not back
(:func:`check_one_way`)."""
from __future__ import annotations

import torch
import torch.nn as nn

from .engine import _fail, _fail_unless_float_cpu, _name, _table
from .hints import _HINTS
from .running import _call, _check

_ONE_WAY_ROWS = _table(
    ("one-way/not-layers", "`{name}` should return two nn.Linear layers, (query, key); got {got}", None),
    ("one-way/width", "query and key must both take the 2 numbers of a token and give vectors of one "
     "width (the head size); got nn.Linear({qin}, {qout}) and nn.Linear({kin}, {kout})", None),
    ("one-way/bias", "use bias=False, as the exercise asks, so that the scores come from the weights alone: "
     "a key bias adds one number to every score of a row (the softmax would ignore it, but the raw scores "
     "this check reads move), and a query bias adds b_Q · k_j, a term of each key's own (Exercise 2.2 (b))",
     None),
    ("one-way/tied", "a looks for b exactly as much as b looks for a ({ab:.2f} both ways): with one matrix "
     "for the query and the key the grid is symmetric (section 2.5); give the key its own weights", None),
    ("one-way/reversed", "the wrong way round: b looks for a (score {ba:.2f}) and a does not look for b "
     "({ab:.2f}); the query belongs to the token that looks, the key to the one it looks for", None),
    ("one-way/layout", "your weights would work as (in, out) matrices, x @ weight, but nn.Linear stores "
     "(out, in) and computes x @ weight.T (section 2.3), which gives a -> b {ab:.2f} and b -> a {ba:.2f}; "
     "transpose the weights you wrote", None),
    ("one-way/weak", "not yet one-way enough: a -> b scores {ab:.2f} (needs 2 or more) and b -> a {ba:.2f} "
     "(needs 0 or less)", None),
)

_ONE_WAY_HINTS = _table(
    ("one-way/hint-no-grad", "a layer's weight is a parameter that autograd tracks (requires_grad=True), "
     "and PyTorch refuses to change such a tensor in place, as weight.copy_(...) or weight[0, 0] = 2.0 do, "
     "while it records operations; write the weights inside `with torch.no_grad():`",
     lambda case, failure: {} if "leaf Variable that requires grad" in str(failure.exc) else None),
) + _HINTS

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


@_check
def check_one_way(one_way, *, trial):
    """Chapter 2, exercise ``ex-qkv-one-way``: ``one_way()`` returns ``(query, key)``, bias-free
    ``nn.Linear(2, hs)`` layers with which token a = [1, 0] looks for token b = [0, 1] (raw score 2 or
    more) and b does not look for a (0 or less). It draws no inputs.
    """
    got, _ = _call(one_way, inputs="no arguments", hints=_ONE_WAY_HINTS)
    name = _name(one_way)
    if not (isinstance(got, tuple | list) and len(got) == 2 and all(isinstance(m, nn.Linear) for m in got)):
        _fail("one-way/not-layers", name=name, got=type(got).__name__)
    query, key = got
    if not (query.in_features == key.in_features == 2 and query.out_features == key.out_features):
        _fail("one-way/width", qin=query.in_features, qout=query.out_features, kin=key.in_features,
              kout=key.out_features)
    for part, layer in (("query", query), ("key", key)):  # numbers on the CPU, before any arithmetic
        _fail_unless_float_cpu(layer.weight, what=f"the {part} layer's weight", where=f"returned by `{name}`")
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
