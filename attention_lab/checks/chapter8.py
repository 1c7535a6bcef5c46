"""Chapter 8's checks: one decode step of attention with a KV cache (:func:`check_attend_cached`) and
the input of a decode step, token plus position (:func:`check_embed_next`). A cache is passed in and
handed back by the answer, so a changed cache is what the answer is meant to return.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from .engine import Case, _answer_is, _compare, _fail, _shape, _table
from .hints import _HINTS
from .running import _call, _check


def _all_rows(c: Case):  # (B, nh, T + 1, hs) each: every row, the new one last, nothing dropped
    if c.k_cache is None:
        return c.k, c.v
    return torch.cat([c.k_cache, c.k], dim=2), torch.cat([c.v_cache, c.v], dim=2)


def _attend(q, k, v):  # (B, nh, 1, hs) over (B, nh, L, hs): no mask
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


def cached(c: Case, *, keep="last"):
    """The right step (``keep="last"``: the last block_size rows) and the wrong trims the check names:
    ``keep="all"`` (no trim), ``keep="first"`` (the oldest block_size rows, the new one dropped)."""
    k, v = _all_rows(c)
    if keep == "last":
        k, v = k[:, :, -c.block_size:], v[:, :, -c.block_size:]
    elif keep == "first":
        k, v = k[:, :, :c.block_size], v[:, :, :c.block_size]
    return _attend(c.q, k, v), (k, v)


def _only_first(c: Case):  # the query sees the first kept key only: tril[:1, :L], or is_causal=True
    if c.T < 1:
        return None
    _, (k, v) = cached(c)
    return v[:, :, :1]


def _only_itself(c: Case):  # the query sees its own key only: a mask that keeps the diagonal of a (1, 1)
    if c.T < 1:
        return None
    return c.v


def _no_scale(c: Case):
    _, (k, v) = cached(c)
    return torch.softmax(c.q @ k.transpose(-2, -1), dim=-1) @ v


def _sqrt_C(c: Case):  # the scores divided by √(n_head · hs), the model's width
    _, (k, v) = cached(c)
    return torch.softmax(c.q @ k.transpose(-2, -1) / math.sqrt(c.C), dim=-1) @ v


def _softmax_over_query(c: Case):  # softmax over the one query's axis: every weight 1, the values summed
    _, (k, v) = cached(c)
    return v.sum(dim=2, keepdim=True) if v.shape[2] > 1 else None


def _untrimmed(c: Case):
    return cached(c, keep="all")[0] if c.T + 1 > c.block_size else None


def _kept_oldest(c: Case):
    return cached(c, keep="first")[0] if c.T + 1 > c.block_size else None


_CACHE_ROWS = _table(
    ("cache/mask-first", "the query attends to the first key only: a mask hides the past from it. A decode "
     "step's one query is the newest position, so no key in the cache is in its future and it needs no mask; "
     "tril[:1, :T] (the mask of a query at position 0) and F.scaled_dot_product_attention(..., "
     "is_causal=True) with one query and many keys (its mask is aligned to the top left) both let it see "
     "key 0 alone", _answer_is(_only_first)),
    ("cache/mask-self", "the query attends to its own new key only: the cached keys are hidden from it. "
     "Attend over every row of the cache after appending the new one, with no mask",
     _answer_is(_only_itself)),
    ("cache/untrimmed", "you attend over all {T_plus} rows: the cache held {T} and block_size is {block_size}, "
     "so after appending the new row keep only the last {block_size}, k[:, :, -block_size:] (the model has "
     "{block_size} positions)", _answer_is(_untrimmed)),
    ("cache/trim-newest", "you kept the oldest {block_size} rows and dropped the new one: trimming drops the "
     "oldest row, k[:, :, -block_size:], so that the query attends to its own key and the ones just before",
     _answer_is(_kept_oldest)),
    ("cache/no-scale", "you did not scale the scores: divide q @ kᵀ by √hs = {root_hs:.3g}",
     _answer_is(_no_scale)),
    ("cache/sqrt-C", "you divided the scores by √C = √{C}, C = n_head · hs the model's width: each head's "
     "scores are dot products of its own hs = {hs} channels, so divide by √hs = {root_hs:.3g}",
     _answer_is(_sqrt_C)),
    ("cache/softmax-dim", "every weight is 1, so out is the plain sum of the values: the softmax ran over "
     "dim=-2, the axis of the one query, where the scores (B, n_head, 1, L) hold one number; take it over "
     "the keys, dim=-1", _answer_is(_softmax_over_query)),
)


def _wrong_axis(case, failure):
    """torch.cat refused the cache and the new key: joined on another axis than time, they differ in it."""
    call = failure.call
    if call is None or call.name not in ("cat", "concat", "concatenate") or case.k_cache is None:
        return None
    return dict(cache_shape=_shape(case.k_cache), new_shape=_shape(case.k))


_CACHE_HINTS = _table(
    ("cache/cat-axis", "torch.cat could not join the cache {cache_shape} and the new key {new_shape}: they "
     "differ in their time axis, so append on it: torch.cat([k_cache, k], dim=2) (or dim=-2)", _wrong_axis),
) + _HINTS

_table(
    ("cache/not-a-pair", "{name} returned {got}: return (out, (k_cache, v_cache)), the output and the new "
     "cache as a pair of tensors", None),
    ("cache/untrimmed-cache", "your new cache has {rows} rows, more than block_size = {block_size}: drop the "
     "oldest, k[:, :, -block_size:], so it never holds more positions than the model has", None),
    ("cache/trim-newest-cache", "your new cache keeps the oldest {block_size} rows and drops the new one: "
     "trimming drops the oldest row, k[:, :, -block_size:], so the newest character stays in the cache", None),
    ("cache/short-cache", "your new cache keeps the last {rows} rows, one fewer than block_size = {block_size}: "
     "k[:, :, -block_size:] keeps {block_size}, the new row and the {rows} before it", None),
)

def _check_cache(got, case: Case, expected_k, expected_v, name: str, where: str):
    __tracebackhide__ = True
    for which, t, e, n in (("keys", got[0], expected_k, 0), ("values", got[1], expected_v, 1)):
        if not isinstance(t, torch.Tensor):
            _fail("cache/not-a-pair", name=name, got="a cache that is not two tensors")
        if t.dim() == 4 and (t.shape[0], t.shape[1], t.shape[3]) == (e.shape[0], e.shape[1], e.shape[3]) \
                and t.shape[2] > case.block_size:  # (the expected cache has block_size rows at most)
            _fail("cache/untrimmed-cache", rows=t.shape[2], block_size=case.block_size)
        oldest = _all_rows(case)[n][:, :, :case.block_size]
        if case.T + 1 > case.block_size and tuple(t.shape) == tuple(oldest.shape) and torch.allclose(
                t.double(), oldest, rtol=1e-4, atol=1e-5):
            _fail("cache/trim-newest-cache", block_size=case.block_size)
        if e.shape[2] == case.block_size and tuple(t.shape) == tuple(e[:, :, 1:].shape) and torch.allclose(
                t.double(), e[:, :, 1:], rtol=1e-4, atol=1e-5):
            _fail("cache/short-cache", rows=case.block_size - 1, block_size=case.block_size)
        _compare(t, e, what=f"your new cache's {which}", where=where)


@_check
def check_attend_cached(fn, *, trial):
    """Chapter 8, exercise ``ex-gen-cache``: ``fn(q, k, v, cache, block_size)`` is one decode step.

    ``q``, ``k``, ``v`` (B, n_head, 1, hs) are the new position's; ``cache`` is None or ``(k_cache,
    v_cache)``, each (B, n_head, T, hs). The answer appends k and v on the time axis, keeps the last
    ``block_size`` rows and returns ``(out, (k_cache, v_cache))``, out the query's attention over them.
    """
    nh, hs = trial.choice((2, 3)), trial.choice((4, 5, 8))
    bs = trial.integer(4, 6)
    shapes = [(2, 3, nh, hs, bs), (1, 0, 4, 16, 8), (2, 1, 2, hs, bs), (1, bs, nh, hs, bs),
              (trial.choice((1, 3)), bs, 4, 16, bs), (1, bs, nh, hs, bs)]
    name = getattr(fn, "__name__", "attend_cached")
    for B, T, nh_, hs_, bs_ in shapes:
        q, k, v = (trial.randn(B, nh_, 1, hs_) for _ in range(3))
        cache = None if T == 0 else (trial.randn(B, nh_, T, hs_), trial.randn(B, nh_, T, hs_))
        case = Case(q=q.double(), k=k.double(), v=v.double(),  # (B, nh, 1, hs) each, and the cache
                    k_cache=None if cache is None else cache[0].double(),
                    v_cache=None if cache is None else cache[1].double(),
                    B=B, T=T, n_head=nh_, hs=hs_, C=nh_ * hs_, block_size=bs_, T_plus=T + 1,
                    root_hs=math.sqrt(hs_))
        out, (ek, ev) = cached(case)
        where = (f"q, k, v of shape {_shape(q)}, " + ("no cache" if cache is None else
                 f"a cache of shape {_shape(cache[0])}") + f", block_size = {bs_}")
        got, _ = _call(fn, q, k, v, cache, bs_, inputs=where, case=case, hints=_CACHE_HINTS, name=name,
                       may_change=(3,))
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], (tuple, list))
                and len(got[1]) == 2):
            _fail("cache/not-a-pair", name=name, got=f"a {type(got).__name__}")
        _check_cache(got[1], case, ek, ev, name, where)
        _compare(got[0], out, what="your out", where=where, case=case, table=_CACHE_ROWS,
                 earlier=trial.earlier)
        trial.earlier.append((out, got[0].detach()))
    return ("your step appends on the time axis, trims to block_size and attends over every kept row "
            "(tested with no cache, 1 row, a few, and full)")


# ---- the input of a decode step ---------------------------------------------------------------------


def _embedded(c: Case, row: int | None):
    if row is None or not 0 <= row < c.block_size:
        return None
    return c.tok[c.ids] + c.pos[row]  # (B, 1, C)


def right_row(past: int, block_size: int) -> int:
    """The position-table row of the character after ``past`` cached ones (the last row past the end)."""
    return min(past, block_size - 1)


_EMBED_ROWS = _table(
    ("embed/wrapped", "you gave the new character row 0 of the position table after {past} cached characters, "
     "more than its {block_size} rows hold: once the window is full the new character takes the last row, "
     "{last}, so take min(past, block_size - 1), not past % block_size",
     _answer_is(lambda c: _embedded(c, 0) if c.past >= c.block_size else None)),
    ("embed/from-zero", "you gave the new character row 0 of the position table: after {past} cached "
     "characters it sits at position {past}, so add position_table(torch.tensor([past])) (torch.arange(1) "
     "starts from 0 at every step)", _answer_is(lambda c: _embedded(c, 0) if 0 < c.past < c.block_size
                                                 else None)),
    ("embed/one-more", "you gave the new character row {past_plus} of the position table: the {past} cached "
     "characters are positions 0 to {past_minus}, so the new one is position {past}",
     _answer_is(lambda c: _embedded(c, right_row(c.past, c.block_size) + 1))),
    ("embed/one-less", "you gave the new character row {past_minus} of the position table, the last cached "
     "character's: the new one is position {past}",
     _answer_is(lambda c: _embedded(c, right_row(c.past, c.block_size) - 1) if c.past < c.block_size
                else None)),
    ("embed/no-token", "you left out the token's row: add token_table(ids) to the position's row",
     _answer_is(lambda c: c.pos[right_row(c.past, c.block_size)].expand(c.ids.shape[0], 1, -1))),
)


def _past_the_end(case, failure):
    if case.past < case.block_size or not isinstance(failure.exc, IndexError):
        return None
    return {}


_EMBED_HINTS = _table(
    ("embed/past-the-end", "the position table has {block_size} rows, 0 to {last}, and the cache already "
     "holds {past}: past the end, a trimmed cache puts the new character at the last row, "
     "min(past, block_size - 1), with block_size = position_table.weight.shape[0]", _past_the_end),
) + _HINTS


@_check
def check_embed_next(fn, *, trial):
    """Chapter 8, exercise ``ex-gen-embed``: ``fn(ids, past, token_table, position_table)`` is the input
    of a decode step, (B, 1, C): the token's row plus the position table's row ``min(past, block_size - 1)``.
    """
    vocab, C, bs = trial.integer(5, 9), trial.choice((6, 8)), trial.integer(5, 7)
    tok, pos = nn.Embedding(vocab, C), nn.Embedding(bs, C)
    trial.fill(tok, 1.0)
    trial.fill(pos, 1.0)
    name = getattr(fn, "__name__", "embed_next")
    for B, past in ((6, 3), (1, 0), (3, bs - 1), (4, bs), (6, bs + trial.integer(1, 5)), (2, 2)):
        ids = trial.integers(0, vocab - 1, (B, 1))
        case = Case(tok=tok.weight.detach().double(), pos=pos.weight.detach().double(), ids=ids,
                    past=past, block_size=bs, past_plus=right_row(past, bs) + 1,
                    past_minus=past - 1, last=bs - 1)
        expected = _embedded(case, right_row(past, bs))
        where = f"ids of shape {_shape(ids)}, past = {past}, a position table of {bs} rows"
        got, _ = _call(fn, ids, past, tok, pos, inputs=where, case=case, hints=_EMBED_HINTS, name=name)
        _compare(got, expected, what="your x", where=where, case=case, table=_EMBED_ROWS,
                 earlier=trial.earlier)
        trial.earlier.append((expected, got.detach() if isinstance(got, torch.Tensor) else got))
    return ("your x is the token's row plus the position's, row past up to the table's end (tested past = 0 "
            "to beyond block_size)")
