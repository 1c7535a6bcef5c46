"""Chapter 6's checks: a previous-token head set by hand (:func:`check_previous_token_head`), the mean
weight at each distance (:func:`check_weight_by_distance`) and a trained head's scores split into token
and position parts (:func:`check_score_parts`)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from .engine import (Case, CheckFailed, _answer_is, _fail, _fail_unless_float_cpu, _lower_precision, _matches,
                     _name, _shape, _table)
from .references import _project, _weights
from .hints import _HINTS
from .running import _call, _check, _quietly, _try


_PREVIOUS_ROWS = _table(
    ("previous/not-a-head", "`{name}` should be a head like Fig. 6's, with key and query nn.Linear "
     "layers; missing or not nn.Linear: {missing}", None),
    ("previous/weight-shape", "wrong weight shape: head.{part}.weight is {got_shape}, but "
     "nn.Linear({C}, {hs}) stores its weight as (out, in) = ({hs}, {C}) and computes x @ weight.T; a "
     "matrix W written for x @ W goes in as W.T", None),
    ("previous/too-small", "this head has block_size {bs} and head_size {hs}: a head that looks back one "
     "position needs at least 2 positions and a head size of 1 or more; build it as Fig. 6's, e.g. "
     "Head(8, 8, 8)", None),
    ("previous/one-hot-size", "the inputs are one-hot position vectors, one axis per position, so the "
     "head needs C >= block_size; this one has C = {C} and block_size = {bs}", None),
    ("previous/next", "your query t matches the key of position t + 1 best, but the causal mask hides the "
     "future, so row {t} falls back on nearly even weights over 0..{t} ({prev:.2f} on t - 1); shift the "
     "other way. If you wrote W for x @ W, remember that nn.Linear computes x @ weight.T, so it needs W.T",
     None),
    ("previous/self", "your head attends to itself: row {t} puts {own:.2f} on position {t} (the diagonal) "
     "and {prev:.2f} on t - 1; query t matches its own key best, which is what W_Q = W_K tends to give; "
     "make query t match the key of position t - 1 instead, by shifting one of the matrices by one position",
     None),
    ("previous/two-back", "your head looks two back: row {t} puts {two:.2f} on position t - 2 and only "
     "{prev:.2f} on t - 1; shift by one position, not two", None),
    ("previous/too-soft", "your head prefers t - 1, but softly: row {t} puts only {prev:.2f} on t - 1, and "
     "at least 0.9 is needed; the scores are divided by √head_size = {root:.3g}, so make the score of "
     "(t, t - 1) larger: multiply W_Q (or W_K) by a bigger number", None),
    ("previous/none", "your function returned None: did you forget to `return head` at its end?", None),
    ("previous/negative", "your head puts its weight anywhere but on t - 1: the score of (t, t - 1) is "
     "{score:.2f}, below every other score of row {t}, as a negative factor makes it; use a positive "
     "factor", None),
    ("previous/weak", "row {t} puts only {prev:.2f} on position t - 1; its largest weight, {top:.2f}, is on "
     "position {s}. (Row 0 is not tested: its only allowed key is itself, so it is always [1, 0, 0, ...].)",
     None),
)


def _in_place_on_a_parameter(case, failure):
    text = str(failure.exc)
    return {} if isinstance(failure.exc, RuntimeError) and "leaf Variable" in text and "in-place" in text else None


def _tensor_for_a_parameter(case, failure):
    return {} if isinstance(failure.exc, TypeError) and "as parameter" in str(failure.exc) else None


_PREVIOUS_HINTS = _table(
    ("previous/no-grad", "a layer's weight is a parameter that requires grad, so torch refuses to change "
     "it in place while it records the gradient: set it inside `with torch.no_grad():`, as "
     "`with torch.no_grad(): head.key.weight.copy_(...)`", _in_place_on_a_parameter),
    ("previous/assigned", "head.key.weight must stay an nn.Parameter, so a plain tensor cannot be assigned "
     "to it: copy your matrix into it instead, `with torch.no_grad(): head.key.weight.copy_(...)`",
     _tensor_for_a_parameter),
) + _HINTS


@_check
def check_previous_token_head(head, *, trial):
    """Chapter 6, the exercise "set W_Q and W_K by hand": a head that attends to the previous position.

    ``head`` is a head like Fig. 6's with C >= block_size whose ``query`` and ``key`` weights were set
    by hand (or a function of no arguments returning it). On the one-hot positions
    ``torch.eye(block_size, C)[None]``, every position t >= 1 must put at least 0.9 of its weight on
    t - 1. Only ``head.query``, ``head.key`` and the size of ``head.tril`` are read; it draws no inputs.
    """
    if callable(head) and not isinstance(head, nn.Module):
        made, _ = _call(head, inputs="no arguments", hints=_PREVIOUS_HINTS)
        if made is None:
            _fail("previous/none", name=_name(head))
        head = made
    name = _name(head)
    missing = [n for n in ("key", "query") if not isinstance(getattr(head, n, None), nn.Linear)]
    if missing:
        _fail("previous/not-a-head", name=name, missing=", ".join(missing))
    for part in ("query", "key"):
        layer = getattr(head, part)
        C, hs = layer.in_features, layer.out_features
        for t in (layer.weight, layer.bias):
            if t is not None:
                _fail_unless_float_cpu(t, what=f"head.{part}.{'weight' if t is layer.weight else 'bias'}",
                                       where="the head's own layer")
        if tuple(layer.weight.shape) != (hs, C):
            _fail("previous/weight-shape", part=part, got_shape=_shape(layer.weight), C=C, hs=hs)
    C, hs = head.query.in_features, head.query.out_features
    tril = getattr(head, "tril", None)
    bs = tril.shape[-1] if isinstance(tril, torch.Tensor) and tril.dim() >= 2 else C
    if bs < 2 or hs < 1:
        _fail("previous/too-small", bs=bs, hs=hs)
    if C < bs:
        _fail("previous/one-hot-size", C=C, bs=bs)
    x = torch.eye(bs, C)[None]  # (1, T, C): row t is the one-hot vector of position t
    q, k = _project(x, head.query)[0], _project(x, head.key)[0]  # (T, hs) each
    scores = q @ k.T / math.sqrt(hs)  # (T, T), before the mask
    w = _weights(scores)
    t = torch.arange(1, bs)
    prev = w[t, t - 1]
    worst = int(t[prev.argmin()])
    if prev.min() >= 0.9:
        return (f"every position t >= 1 puts at least 0.9 of its weight on t - 1 (lowest {prev.min():.2f}, "
                f"at t = {worst}; block_size {bs}); row 0 can only be [1, 0, 0, ...]")
    fields = dict(t=worst, prev=float(w[worst, worst - 1]), own=float(w[worst, worst]), root=math.sqrt(hs))
    rows = range(1, bs)
    favourite = [int(w[r, : r + 1].argmax()) for r in rows]  # each row's largest allowed weight
    if bs > 2 and sum(int(scores[r].argmax()) == r + 1 for r in range(bs - 1)) > (bs - 1) / 2:
        _fail("previous/next", **fields)
    if sum(f == r for f, r in zip(favourite, rows)) > len(rows) / 2:
        _fail("previous/self", **fields)
    if bs > 2 and sum(f == r - 2 for f, r in zip(favourite, rows) if r >= 2) > (bs - 2) / 2:
        worst2 = max(2, worst)
        _fail("previous/two-back", **{**fields, "t": worst2, "prev": float(w[worst2, worst2 - 1]),
                                      "two": float(w[worst2, worst2 - 2])})
    if all(f == r - 1 for f, r in zip(favourite, rows)):
        _fail("previous/too-soft", **fields)
    if all(scores[r, r - 1] < scores[r, : r + 1].max() and scores[r, r - 1] == scores[r, : r + 1].min()
           and scores[r, : r + 1].min() < 0 for r in rows):
        _fail("previous/negative", **fields, score=float(scores[worst, worst - 1]))
    s = int(w[worst, : worst + 1].argmax())
    _fail("previous/weak", **fields, top=float(w[worst, s]), s=s)


def _by_distance(w: torch.Tensor, side: int = -1, rows: str = "mean") -> torch.Tensor:
    """A (T,) profile of (B, T, T) weights, in float64: entry d is the mean of w[b, i, i - d] over every
    b and every query i >= d. The keyword arguments rebuild the mistakes: ``side=1`` reads the
    diagonals above, (i, i + d); ``rows="all"`` divides each distance's sum by all B·T rows, ``"sum"``
    sums over the rows (and averages over the batch), ``"both"`` counts |i - j| = d on both sides."""
    w = w.detach().to(torch.float64)
    B, T, _ = w.shape
    out = []
    for d in range(T):
        diag = torch.diagonal(w, offset=side * d, dim1=-2, dim2=-1)  # (B, T - d)
        if rows == "mean":
            out.append(diag.mean())
        elif rows == "all":
            out.append(diag.sum() / (B * T))
        elif rows == "sum":
            out.append(diag.sum() / B)
        else:  # "both": the T - d entries above the diagonal (all 0) join the mean
            out.append(diag.sum() / (B * (T - d) * (1 if d == 0 else 2)))
    return torch.stack(out)


def _per_sequence(case, got):
    if case.B > 1 and tuple(got.shape) in ((case.B, case.T), (case.T, case.B)):
        rows = torch.stack([_by_distance(case.w[b : b + 1]) for b in range(case.B)])  # (B, T)
        if tuple(got.shape) == (case.B, case.T) and _matches(got, rows):
            return dict(got_shape=_shape(got), turned="")
        if tuple(got.shape) == (case.T, case.B) and _matches(got, rows.T):
            return dict(got_shape=_shape(got), turned=" (stacked distance by distance, so transposed: "
                                                    "(T, B))")
    return None


def _default_dims(case, got):
    """torch.diagonal(weights, offset=-d) without dim1 and dim2: the diagonal of the batch and query axes."""
    if tuple(got.shape) != (case.T,):
        return None
    wrong = torch.stack([torch.diagonal(case.w, offset=-d).mean() for d in range(case.T)])  # nan if empty
    g = got.detach().to(torch.float64)
    return {} if torch.allclose(g, wrong, rtol=1e-4, atol=1e-5, equal_nan=True) else None


def _summed(case, got):
    for total in (_by_distance(case.w, rows="sum"), _by_distance(case.w, rows="sum") * case.B):
        if _matches(got, total):
            return {}
    return None


_DISTANCE_ROWS = _table(
    ("distance/default-dims", "torch.diagonal(weights, offset=-d) without dim1 and dim2 takes its "
     "diagonal across the first two axes, the batch and the queries (and is empty, so its mean nan, where "
     "d >= B); name the query and key axes: torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _default_dims),
    ("distance/flipped-mean", "you flipped every row and averaged over all queries: flipping puts key j of "
     "row i at index T - 1 - j, so entry d is the weight on key T - 1 - d, d back only for the last query "
     "i = T - 1; every other query i has its key i - d elsewhere, so read each diagonal instead: "
     "torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _answer_is(lambda c: c.w.flip(-1).mean((0, 1)))),
    ("distance/per-sequence", "you returned one profile per sequence, shape {got_shape}{turned}: average over the "
     "batch as well, so that the answer holds one number per distance, shape ({T},)", _per_sequence),
    ("distance/last-row", "you used only the last query, row T - 1 = {last}: every query i >= d has a key "
     "d positions back, so average weights[b, i, i - d] over all of them (and over the batch), not over "
     "the last row alone", _answer_is(lambda c: c.w[:, -1].flip(-1).mean(0))),
    ("distance/wrong-side", "distances counted from the wrong side: entry (i, i + d) lies above the "
     "diagonal, in the future the mask hides, so every distance but 0 came out 0; the key d positions back "
     "from query i is i - d: torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _answer_is(lambda c: _by_distance(c.w, side=1))),
    ("distance/both-sides", "you counted the distance as |i - j|, on both sides of the diagonal: each "
     "distance d >= 1 then also averages the T - d entries above the diagonal, which the causal mask sets "
     "to 0, and its mean is halved; a causal head only looks back, so d = i - j with j <= i",
     _answer_is(lambda c: _by_distance(c.w, rows="both"))),
    ("distance/all-rows", "you divided each distance's total by all B·T = {rows} rows: only the T - d "
     "queries i >= d have a key d positions back, so divide by B·(T - d), or take the mean of the "
     "diagonal torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _answer_is(lambda c: _by_distance(c.w, rows="all"))),
    ("distance/sum", "you summed the weights at each distance instead of averaging them: divide each "
     "distance's total by the number of weights at that distance, B·(T - d), or take .mean() of its "
     "diagonal", _summed),
    ("distance/to-one", "you rescaled the profile to sum to one: the mean weights at the T distances need "
     "not add up to one (each averages a different set of rows), so return the means as they are",
     _answer_is(lambda c: c.ref / c.ref.sum())),
    ("distance/key-position", "you averaged by key position (over the batch and the queries): entry j is "
     "then the weight that position j receives from every query, whatever its distance; index by "
     "distance instead, entry d averaging weights[b, i, i - d]", _answer_is(lambda c: c.w.mean((0, 1)))),
)


@_check
def check_weight_by_distance(fn, *, trial):
    """Chapter 6, exercise ``ex-trained-distance``: ``fn(weights)`` measures how far back a head looks.

    ``weights`` are causal weights (B, T, T); the answer is a (T,) tensor whose entry d is the mean of
    ``weights[b, i, i - d]`` over every b and every query i >= d, computed any way.
    """
    drawn = (trial.integer(1, 4), trial.integer(13, 32))
    for B, T in [(4, 8), (1, 1), (3, 5), (2, 12), drawn, drawn]:
        weights = _weights(trial.randn(B, T, T) * 2).to(torch.float32)  # (B, T, T), causal
        expected = _by_distance(weights)
        case = Case(w=weights.to(torch.float64), ref=expected, B=B, T=T, last=T - 1, rows=B * T)
        where = f"causal weights of shape {_shape(weights)}"
        _try(fn, (weights,), expected, what="your profile", where=where, case=case, table=_DISTANCE_ROWS,
             trial=trial)
    return ("your profile is the mean weight at each distance d, over every query with a key d back "
            "(tested T = 1 to 32; B = 1 to 4)")


_PARTS_ROWS = _table(
    ("parts/bad-model", "`model` should be chapter 6's model, with a token_table and a position_table "
     "(nn.Embedding tables) and a head whose query and key are nn.Linear layers of float numbers on the CPU; "
     "got {got}: pass the model itself, checks.check_score_parts(score_parts, model, windows)", None),
    ("parts/bad-ids", "`ids` should be a (B, T) tensor of token ids, whole numbers from 0 to {top}, with "
     "T at most {block}; got {got}", None),
    ("parts/precision", "the {label} part is right to about {digits} significant digits only: it "
     "was computed in {dtype} (largest error {err:.2g}) and cast back; compute in float32, the "
     "model's dtype", None),
    ("parts/not-four", "`{name}` should return four tensors (tok·tok, tok·pos, pos·tok, pos·pos); got {got}",
     None),
    ("parts/shape", "each part should have shape (B, T, T) = {shape}; got {got}", None),
    ("parts/masked", "the parts are scores before the mask: a masked entry is -inf or 0 in yours; the mask "
     "comes after the scores are added up", None),
    ("parts/weights", "your parts are weights (rows sum to 1): return the scaled scores, before the softmax",
     None),
    ("parts/no-scale", "the parts are not divided by √head_size = {root:g}: the head divides its scores by "
     "it before the softmax, so divide each of the four parts too",
     None),
    ("parts/swapped", "the two cross terms are swapped: tok·pos means a token's query against a position's "
     "key, q_tok @ k_posᵀ", None),
    ("parts/sum", "your four parts add up to the head's scores, but they are not the four named parts "
     "(the largest difference is in the {part} part)", None),
    ("parts/differ", "the {label} part differs from the reference by up to {size:.3g}, and the four do "
     "not add up to the head's scores", None),
    ("parts/by-dk", "the parts are divided by head_size = {hs}, d_k itself: the head divides its scores by "
     "its square root, √d_k = {root:g}", None),
    ("parts/transposed", "each part is transposed: row i of a part should be query i against every key, "
     "q_part @ k_partᵀ; yours holds key i against every query, k_part @ q_partᵀ", None),
)

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


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:  # pos·pos is (T, T): broadcast against (B, T, T)
    return torch.allclose(a, b, rtol=1e-4, atol=1e-4)


def _table_weight(module) -> torch.Tensor | None:
    """An embedding table's (rows, C) weight, read as a parameter (a grader hands over state, not types)."""
    weight = getattr(module, "weight", None)
    return weight if isinstance(weight, torch.Tensor) and weight.dim() == 2 else None


def _parts_inputs(model, ids) -> tuple[int, int]:
    """The check's own inputs, as chapter 6 passes them: (vocabulary size, block size); else say which
    is wrong."""
    __tracebackhide__ = True
    tables = [_table_weight(getattr(model, n, None)) for n in ("token_table", "position_table")]
    head = getattr(model, "head", None)
    layers = [getattr(head, n, None) for n in ("query", "key")]
    if any(t is None for t in tables) or not all(isinstance(m, nn.Linear) for m in layers):
        _fail("parts/bad-model", got=f"a {type(model).__name__} without them")
    tensors = tables + [m.weight for m in layers]
    if any(t.device.type != "cpu" or not t.is_floating_point() for t in tensors):
        _fail("parts/bad-model", got="one whose weights are not float numbers on the CPU")
    vocab, block = tables[0].shape[0], tables[1].shape[0]
    fields = dict(top=vocab - 1, block=block)
    if not isinstance(ids, torch.Tensor):
        _fail("parts/bad-ids", got=f"a {type(ids).__name__}", **fields)
    if ids.dim() != 2 or not 1 <= ids.shape[1] <= block or ids.shape[0] < 1:
        _fail("parts/bad-ids", got=f"shape {_shape(ids)}", **fields)
    if ids.is_floating_point() or ids.device.type != "cpu" or ids.dtype == torch.bool or \
            int(ids.min()) < 0 or int(ids.max()) >= vocab:
        _fail("parts/bad-ids", got=f"a {str(ids.dtype).replace('torch.', '')} tensor on {ids.device.type} "
                                   f"from {ids.min().item()} to {ids.max().item()}", **fields)
    return vocab, block


@_check
def check_score_parts(score_parts, model, ids, *, trial):
    """Chapter 6, exercise ``ex-trained-parts``: ``score_parts(model, ids)`` returns the four parts
    (tok·tok, tok·pos, pos·tok, pos·pos) of the head's scaled scores for ids (B, T), each (B, T, T),
    before the mask: their sum is the head's scores. Tested on the ids given and on drawn ones.
    """
    name = _name(score_parts)
    vocab, block = _parts_inputs(model, ids)
    drawn = (trial.integer(1, 4), trial.integer(2, block))
    shapes = [drawn, (1, trial.integer(2, block)), (trial.integer(2, 4), 1), drawn]
    cases = [ids] + [trial.integers(0, vocab - 1, shape) for shape in shapes]
    earlier = []
    for case_ids in cases:
        expected = _reference_parts(model, case_ids)  # before the learner's code runs
        where = f"model and ids of shape {tuple(case_ids.shape)}"
        parts, _ = _call(score_parts, model, case_ids.clone(), inputs=where)
        if not (isinstance(parts, tuple | list) and len(parts) == 4
                and all(isinstance(p, torch.Tensor) for p in parts)):
            _fail("parts/not-four", name=name, got=type(parts).__name__)
        shape = tuple(expected[0].shape)
        # pos·pos of shape (T, T), made from the (T, C) table without the batch, is the same for all B rows
        parts = [*parts[:3], parts[3].expand(shape) if tuple(parts[3].shape) == shape[1:] else parts[3]]
        for label, p in zip(PART_LABELS, parts):
            if tuple(p.shape) != shape:
                _fail("parts/shape", shape=shape, got=tuple(p.shape))
            _fail_unless_float_cpu(p, what=f"the {label} part", where=f"ids of shape {tuple(case_ids.shape)}")
        got = [p.detach().double() for p in parts]
        try:
            _fail_unless_parts(got, expected, model, shape, where, earlier)
        except CheckFailed:  # the same parts for other ids of this shape: kept from an earlier call
            others = trial.integers(0, vocab - 1, case_ids.shape)
            other = _quietly(lambda: _call(score_parts, model, others, inputs=where)[0])
            if isinstance(other, tuple | list) and len(other) == 4 and all(
                    isinstance(o, torch.Tensor) and torch.equal(o.detach().double(), g) for o, g in zip(other, got)):
                _fail("general/kept-state", what="your parts", where=where)
            raise
        earlier.append((expected, got))
    return (f"the four parts are the head's scores split by what the query and the key come from, and add "
            f"up to them (tested the {ids.shape[0]:,} windows of {ids.shape[1]} given, and 4 batches drawn)")


def _fail_unless_parts(got, expected, model, shape, where: str, earlier) -> None:
    """The four parts against the reference's, each mistake named by what the parts show."""
    __tracebackhide__ = True
    future = torch.ones(shape[1:]).triu(1).bool()  # (T, T): the keys after each query
    past = torch.ones(shape[1:]).tril(-1).bool()  # (T, T): the keys before it
    if any(not torch.isfinite(p).all() or ((p[:, future] == 0).all() and (p[:, past] != 0).any())
           for p in got if shape[-1] > 1):
        _fail("parts/masked")
    if shape[-1] > 1 and all(torch.allclose(p.sum(-1), torch.ones(shape[:2], dtype=p.dtype)) for p in got):
        _fail("parts/weights")
    close = [_close(g, e) for g, e in zip(got, expected)]
    if all(close):
        return
    if any(all(_close(g, e) for g, e in zip(got, parts)) for before in earlier for parts in before
           if parts[0].shape == got[0].shape):
        _fail("general/kept-state", what="your parts", where=where)
    root = math.sqrt(model.head.key.weight.shape[0])
    if all(_close(g / root, e) for g, e in zip(got, expected)):
        _fail("parts/no-scale", root=root)
    if all(_close(g * root, e) for g, e in zip(got, expected)):
        _fail("parts/by-dk", hs=model.head.key.weight.shape[0], root=root)
    if all(_close(g.transpose(-2, -1), e) for g, e in zip(got, expected)):
        _fail("parts/transposed")
    if close[0] and close[3] and _close(got[1], expected[2]) and _close(got[2], expected[1]):
        _fail("parts/swapped")
    sizes = [float((g - e).abs().max()) for g, e in zip(got, expected)]
    worst = max(range(4), key=lambda i: sizes[i])
    if _close(sum(got), sum(expected)):
        _fail("parts/sum", part=PART_LABELS[worst])
    lower = _lower_precision(got[worst], expected[worst].expand(shape))
    if lower is not None:
        _fail("parts/precision", label=PART_LABELS[worst], **lower)
    _fail("parts/differ", label=PART_LABELS[worst], size=sizes[worst])
