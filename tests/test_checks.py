"""Tests of attention_lab.checks: every right answer passes, every message in the mistake tables is
produced by a wrong answer (each in at least two code forms), and strict mode and fresh() hold for
graders."""

from __future__ import annotations

import collections
import copy
import functools
import inspect
import json
import math
import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course import layout
from attention_lab import checks, training
from attention_lab.reference import ReferenceHead

NEG = float("-inf")


def _tril(T, diagonal=0):
    return torch.tril(torch.ones(T, T), diagonal)


def strict(check):
    return functools.partial(check, strict=True)


# ---------------------------------------------------------------- chapter 1


def average_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros(B, T, C)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(dim=0)
    return xbow


def average_matmul(x):
    w = _tril(x.shape[1])
    return (w / w.sum(dim=1, keepdim=True)) @ x


def average_cumsum(x):
    T = x.shape[1]
    return x.cumsum(dim=1) / torch.arange(1, T + 1).view(1, T, 1)


def average_cumsum_2(x):
    return torch.cumsum(x, 1) / torch.arange(1, x.shape[1] + 1)[:, None]


def average_by(normalize):
    """A Fig. 2 average whose (T, T) weights come from ``normalize(tril)``."""
    return lambda x: normalize(_tril(x.shape[1])) @ x


def cumsum_over(counts, dim=1):
    """cumsum along ``dim`` divided by ``counts(T)``."""
    return lambda x: x.cumsum(dim) / counts(x.shape[1])


def average_future_loop(x):
    out = torch.zeros_like(x)
    for t in range(x.shape[1]):
        out[:, t] = x[:, t:].mean(dim=1)
    return out


def average_without_current_loop(x):
    out = torch.zeros_like(x)
    for t in range(1, x.shape[1]):
        out[:, t] = x[:, :t].mean(dim=1)
    return out


# ---------------------------------------------------------------- chapter 2


def layers(wq, wk, bias=False, sizes=(2, 2)):
    """(query, key): nn.Linear layers whose weights are ``wq`` and ``wk``, as the exercise sets them."""
    query, key = nn.Linear(*sizes, bias=bias), nn.Linear(*sizes, bias=bias)
    with torch.no_grad():
        query.weight.copy_(torch.tensor(wq))
        key.weight.copy_(torch.tensor(wk))
    return query, key


RIGHT_Q, RIGHT_K = [[2.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]


def one_way():
    return layers(RIGHT_Q, RIGHT_K)


def one_way_in_place(write):
    """The exercise's layers, their weights written by ``write(weight, rows)`` outside torch.no_grad()."""
    def build():
        query, key = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
        write(query.weight, torch.tensor(RIGHT_Q))
        write(key.weight, torch.tensor(RIGHT_K))
        return query, key
    return build


def one_way_parameters():
    """The same layers, their weights set as new Parameters."""
    query, key = nn.Linear(2, 3, bias=False), nn.Linear(2, 3, bias=False)
    query.weight = nn.Parameter(torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 0.0]]))
    key.weight = nn.Parameter(torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    return query, key


# ---------------------------------------------------------------- chapters 3 and 4


def unit_scale(q, k):
    return 1 / math.sqrt(q.shape[-1] * q.var().item() * k.var().item())




def softmax_safe(z):
    e = (z - z.max(dim=-1, keepdim=True).values).exp()
    return e / e.sum(dim=-1, keepdim=True)


def row_max(z):
    return z.max(dim=-1, keepdim=True).values


def softmax_hand(shift, total):
    """exp(z - shift(z)) / total(e): the pieces learners get wrong."""

    def softmax(z):
        e = (z - shift(z)).exp()
        return e / total(e)

    return softmax


def weights_ref(scores, fill=NEG, where=False):
    tril = _tril(scores.shape[-1])
    if where:
        scores = torch.where(tril == 0, torch.full_like(scores, fill), scores)
    else:
        scores = scores.masked_fill(tril == 0, fill)
    return F.softmax(scores, dim=-1)


def masked(hidden, fill=NEG, dim=-1):
    """Fill the scores where ``hidden(T)`` is True, then softmax over ``dim``."""
    return lambda s: F.softmax(s.masked_fill(hidden(s.shape[-1]), fill), dim=dim)


def hand_softmax_without_keepdim(s):
    e = s.masked_fill(_tril(s.shape[-1]) == 0, NEG).exp()
    return e / e.sum(-1)


def pad_weights(scores, pad, *, fill=NEG, empty="nan_to_num", hidden="keys", causal=True):
    """Padding-mask answers: ``hidden`` says what the padding hides, ``empty`` how empty rows are zeroed."""
    T = scores.shape[-1]
    hide = _tril(T) == 0 if causal else torch.zeros(T, T, dtype=torch.bool)  # (T, T)
    hide = hide | {"keys": pad[:, None, :], "queries": pad[:, :, None], "real": ~pad[:, None, :],
                   None: torch.zeros_like(pad[:, None, :])}[hidden]  # (B, T, T)
    w = F.softmax(scores.masked_fill(hide, fill), dim=-1)
    if empty == "nan_to_num":
        w = torch.nan_to_num(w, nan=0.0)
    elif empty == "where":
        w = torch.where(hide.all(-1, keepdim=True), torch.zeros_like(w), w)
    elif empty == "multiply":
        w = w * (~hide).any(-1, keepdim=True)
    return w


def pad_over_queries(zero):
    """The padding answer with the softmax over dim=-2, its nan zeroed by ``zero``."""
    def fn(scores, pad):
        T = scores.shape[-1]
        hide = (_tril(T) == 0) | pad[:, None, :]
        return zero(F.softmax(scores.masked_fill(hide, float("-inf")), dim=-2))
    return fn


def pad_in_two_steps(scores, pad):
    T = scores.shape[-1]
    scores = scores.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
    scores = scores.masked_fill(pad.unsqueeze(1), float("-inf"))
    return F.softmax(scores, dim=-1).nan_to_num(0.0)


# ---------------------------------------------------------------- chapter 5


class Head(nn.Module):
    """One causal self-attention head; the class attributes below rebuild one mistake at a time."""

    names = ("key", "query", "value")
    biased = ()  # the projections that get a bias
    slice_mask = True
    tril_as = "buffer"

    @staticmethod
    def sizes(C, head_size):  # the arguments of each nn.Linear
        return C, head_size

    @staticmethod
    def score(q, k, C):
        return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])

    @staticmethod
    def attend(scores, tril):
        return F.softmax(scores.masked_fill(tril == 0, NEG), dim=-1)

    @staticmethod
    def average(weights, x, k, q, v):
        return weights @ v

    def __init__(self, C, head_size, block_size):
        super().__init__()
        for name in self.names:
            setattr(self, name, nn.Linear(*self.sizes(C, head_size), bias=name in self.biased))
        tril = torch.tril(torch.ones(block_size, block_size))
        if self.tril_as == "buffer":
            self.register_buffer("tril", tril)
        elif self.tril_as == "parameter":
            self.tril = nn.Parameter(tril, requires_grad=False)
        elif self.tril_as == "trainable":
            self.tril = nn.Parameter(tril)
        elif self.tril_as == "attribute":
            self.tril = tril

    def forward(self, x):
        _, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        weights = self.attend(self.score(q, k, C), self.tril[:T, :T] if self.slice_mask else self.tril)
        return self.average(weights, x, k, q, v)


def head_variant(**attrs):
    hooks = {"sizes", "score", "attend", "average"}
    return type("Head", (Head,), {k: staticmethod(v) if k in hooks else v for k, v in attrs.items()})


def sdpa_forward(self, x):
    return F.scaled_dot_product_attention(self.query(x), self.key(x), self.value(x), is_causal=True)


def head_scaled(scale):
    """A head whose scores are q @ kᵀ times ``scale(d, C)``."""
    return head_variant(score=lambda q, k, C: q @ k.transpose(-2, -1) * scale(k.shape[-1], C))


def head_attending(weights_fn):
    """A head whose weights come from a chapter-4 answer ``weights_fn(scores)``."""
    return head_variant(attend=lambda scores, tril: weights_fn(scores))


def sdpa_with(**kwargs):
    def fn(head, x):
        return F.scaled_dot_product_attention(head.query(x), head.key(x), head.value(x), **kwargs)

    return fn


def stub(*args):
    raise NotImplementedError("fill me in")


def counting(answer, per_instance=False):
    """``answer`` times the number of times it has been called (on ``self`` for a forward)."""
    calls = collections.Counter()

    def counted(*args):
        calls[id(args[0]) if per_instance else 0] += 1
        return answer(*args) * calls[id(args[0]) if per_instance else 0]

    return counted


def cached_by_shape(answer, key=lambda *args: tuple(args[-1].shape)):
    """``answer``, computed once per ``key`` (the shape of the last argument) and then returned again."""
    kept = {}

    key_of = key

    def cached(*args):
        key = key_of(*args)
        if key not in kept:
            kept[key] = answer(*args)
        return kept[key]

    return cached


class CachingHead(Head):
    """A head that keeps the keys of its first call and uses them again for every later x."""

    def forward(self, x):
        T = x.shape[1]
        if not hasattr(self, "first_k"):
            self.first_k = self.key(x)
        k, q, v = self.first_k[:, :T], self.query(x), self.value(x)
        return self.attend(self.score(q, k, x.shape[-1]), self.tril[:T, :T]) @ v


class CachingWeightsHead(Head):
    """A head that keeps the weights it computed for each length T and uses them again."""

    def forward(self, x):
        T = x.shape[1]
        self.__dict__.setdefault("by_T", {})
        if T not in self.by_T:
            self.by_T[T] = self.attend(self.score(self.query(x), self.key(x), x.shape[-1]), self.tril[:T, :T])
        return self.by_T[T] @ self.value(x)


def half_sdpa(self, x):
    """The head's attention computed in float16, cast back to float32."""
    q, k, v = (layer(x).half() for layer in (self.query, self.key, self.value))
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).float()


class StubHead(nn.Module):
    def __init__(self, C, head_size, block_size):
        super().__init__()
        raise NotImplementedError("build the head")


class StubForwardHead(nn.Module):
    def __init__(self, C, head_size, block_size):
        super().__init__()

    def forward(self, x):
        raise NotImplementedError("write forward")


def seeded(build, seed=0):
    """``build()`` with the global RNG seeded, leaving the notebook's (here: pytest's) stream alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


REAL_HEAD, REAL_X = seeded(lambda: (ReferenceHead(32, 16, 8), torch.randn(4, 8, 32)))
REAL_X_NAN = REAL_X.clone().index_put_((torch.tensor(1), torch.tensor(3), torch.tensor(0)), torch.tensor(math.nan))


def unfinished(t):
    raise NotImplementedError("a helper the answer calls")


class HeadCallingAStub(Head):
    def forward(self, x):
        return unfinished(x)


class PlainHead:
    """Fig. 6's head without nn.Module."""

    def __init__(self, C, head_size, block_size):
        self.key, self.query, self.value = (nn.Linear(C, head_size, bias=False) for _ in range(3))
        self.tril = torch.tril(torch.ones(block_size, block_size))

    def __call__(self, x):
        return ReferenceHead.forward(self, x)


class DropoutHead(Head):
    """Dropout on the weights, as nanoGPT has it: off in eval(), where check_head compares."""

    def __init__(self, C, head_size, block_size):
        super().__init__(C, head_size, block_size)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        T = x.shape[1]
        k, q, v = self.key(x), self.query(x), self.value(x)
        return self.drop(self.attend(self.score(q, k, x.shape[-1]), self.tril[:T, :T])) @ v


def in_place(step):
    """A head whose forward first does ``step(self, x)``: a side effect on its weights or its input."""

    def forward(self, x):
        with torch.no_grad():
            step(self, x)
        return Head.forward(self, x)

    return head_variant(forward=forward)


def one_future_key(s):
    """Masked softmax, except that row T - 2 also sees key T - 1."""
    T = s.shape[-1]
    hide = _tril(T) == 0
    if T > 1:
        hide[T - 2, T - 1] = False
    return F.softmax(s.masked_fill(hide, NEG), dim=-1)


def zeroing(part):
    """A real-batch answer that zeroes the head's ``part`` weights (of its own copy of the head)."""
    head = copy.deepcopy(REAL_HEAD)

    def real_batch_weights():
        getattr(head, part).weight.data.zero_()
        return real_weights()()

    return real_batch_weights, head, REAL_X


def head_dtype(dtype):
    head = previous_token_head()
    for layer in (head.query, head.key):
        layer.weight = nn.Parameter(layer.weight.detach().to(dtype), requires_grad=False)
    return head


def real_weights(scale=0.25, swap=False, fill=NEG):
    """The real-batch exercise's answer, as a function of no arguments (scale 1/√16 = 0.25 is right)."""

    def real_batch_weights():
        q, k = REAL_HEAD.query(REAL_X), REAL_HEAD.key(REAL_X)
        scores = (k @ q.mT if swap else q @ k.mT) * scale
        return F.softmax(scores.masked_fill(REAL_HEAD.tril == 0, fill), dim=-1)

    return real_batch_weights


def multihead(order=None, stack_dim=1, merge=None, per_head=False, flat=False, **sdpa):
    """Multi-head with one fused call; the keyword arguments rebuild one mistake at a time."""
    sdpa = sdpa or dict(is_causal=True)

    def fn(heads, x):
        B, T, _ = x.shape
        heads = [heads[i] for i in order(len(heads))] if order else heads
        if per_head:
            return torch.cat([F.scaled_dot_product_attention(h.query(x), h.key(x), h.value(x), **sdpa)
                              for h in heads], -1)
        q, k, v = (torch.stack([getattr(h, n)(x) for h in heads], dim=stack_dim) for n in ("query", "key", "value"))
        if flat:  # (B * n, T, hs): one call, but on 3-D tensors
            out = F.scaled_dot_product_attention(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), **sdpa)
            out = out.view(B, len(heads), T, -1)
        else:
            out = F.scaled_dot_product_attention(q, k, v, **sdpa)  # (B, n, T, hs)
        if merge is not None:
            return merge(out)
        return out.transpose(1, 2).reshape(B, T, -1)

    return fn


def multihead_cat_viewed(back):
    """The heads' q, k, v concatenated, then viewed as (B, n, T, hs) with no transpose."""
    def fn(heads, x):
        B, T, _ = x.shape
        n, hs = len(heads), heads[0].key.out_features
        q, k, v = (torch.cat([getattr(h, name)(x) for h in heads], -1).view(B, n, T, hs)
                   for name in ("query", "key", "value"))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.reshape(B, T, -1) if back == "reshape" else out.transpose(1, 2).reshape(B, T, -1)
    return fn


def real_sdpa(values, causal=True, **sdpa):
    """The real-batch answer from one call of F.scaled_dot_product_attention, with ``values(q, k)`` as v."""

    def real_batch_weights():
        q, k = REAL_HEAD.query(REAL_X), REAL_HEAD.key(REAL_X)
        return F.scaled_dot_product_attention(q, k, values(q, k), is_causal=causal, **sdpa)

    return real_batch_weights


def multihead_wide(four_d):
    """One head over the heads' q, k, v concatenated, (B, T, n * hs): every score sums every head's product."""

    def fn(heads, x):
        q, k, v = (torch.cat([getattr(h, n)(x) for h in heads], -1) for n in ("query", "key", "value"))
        if four_d:
            return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=True)[:, 0]
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return fn


def multihead_batched_3d(heads, x):
    B = x.shape[0]
    q, k, v = (torch.cat([getattr(h, n)(x) for h in heads], 0) for n in ("query", "key", "value"))  # (n * B, T, hs)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (n * B, T, hs)
    return torch.cat(out.split(B, 0), dim=-1)


def multihead_by_hand(heads, x):
    q = torch.cat([h.query(x)[:, None] for h in heads], 1)  # (B, n, T, hs)
    k = torch.cat([h.key(x)[:, None] for h in heads], 1)
    v = torch.cat([h.value(x)[:, None] for h in heads], 1)
    T = x.shape[1]
    scores = (q @ k.mT / k.shape[-1] ** 0.5).masked_fill(_tril(T) == 0, NEG)
    return torch.cat((F.softmax(scores, -1) @ v).unbind(1), dim=-1)


# ---------------------------------------------------------------- chapter 6


def shift(n, by):
    """(n, n) matrix S with S @ e_t = e_(t + by): moves a one-hot position by ``by``."""
    return torch.diag(torch.ones(n - abs(by)), -by)


def head_with(Wq, Wk, C=8, hs=8, bs=8):
    head = ReferenceHead(C, hs, bs)
    with torch.no_grad():
        head.query.weight.copy_(Wq)
        head.key.weight.copy_(Wk)
    return head


def previous_token_head():
    # query t is position t, key s is position s + 1: query t meets key t - 1
    return head_with(20 * torch.eye(8), shift(8, 1))


def previous_head_without_no_grad():
    head = ReferenceHead(8, 8, 8)
    head.query.weight.copy_(20 * torch.eye(8))  # a parameter that requires grad, changed in place
    return head


def previous_head_assigned():
    head = ReferenceHead(8, 8, 8)
    head.key.weight = shift(8, 1)  # a tensor where an nn.Parameter must stay
    return head


def previous_head_not_returned():
    head = head_with(20 * torch.eye(8), shift(8, 1))
    head.eval()  # built, never returned


def head_with_data(part, W, C=8, hs=16, bs=8):
    head = ReferenceHead(C, hs, bs)
    getattr(head, part).weight.data = W
    return head


def head_with_parameter(part, W, C=8, hs=16, bs=8):
    head = ReferenceHead(C, hs, bs)
    getattr(head, part).weight = nn.Parameter(W)
    return head


# chapter 6: how far back a head looks


def diagonals(w):
    """The diagonals of (B, T, T) weights below the main one, d = 0..T-1: each (B, T - d)."""
    return [torch.diagonal(w, offset=-d, dim1=-2, dim2=-1) for d in range(w.shape[-1])]


def by_distance_loop(w):
    B, T, _ = w.shape
    out = torch.zeros(T)
    for d in range(T):
        out[d] = sum(w[b, i, i - d] for b in range(B) for i in range(d, T)) / (B * (T - d))
    return out


def by_distance_masks(w, normalize="mean", distance=lambda i, j: i - j):
    """Entry d from a (T, T) mask of the pairs at distance d; ``normalize`` and ``distance`` rebuild mistakes."""
    B, T, _ = w.shape
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    out = []
    for d in range(T):
        at = distance(i, j) == d  # (T, T)
        total = (w * at).sum()
        out.append({"mean": total / (B * at.sum()), "rows": total / (B * T), "sum": total}[normalize])
    return torch.stack(out)


def by_distance_both_sides(w):
    """Every pair (i, j) with |i - j| = d, a loop over both sides of the diagonal."""
    B, T, _ = w.shape
    out = torch.zeros(T)
    for d in range(T):
        pairs = [(i, j) for i in range(T) for j in range(T) if abs(i - j) == d]
        out[d] = sum(w[b, i, j] for b in range(B) for i, j in pairs) / (B * len(pairs))
    return out


# chapter 6: a trained head's scores in token and position parts

PARTS_MODEL = training.load_trained().trained  # the shipped trained head (a small file, read in ms)
PARTS_IDS = torch.randint(0, 65, (6, 32), generator=torch.Generator().manual_seed(0))  # (B, T)


def score_parts(model, ids, swap=False, scale=True, mask=False, softmax=False):
    """The four parts through the model's own layers; the keywords rebuild the mistakes."""
    B, T = ids.shape
    tok = model.token_table(ids)  # (B, T, C)
    pos = model.position_table(torch.arange(T)).expand(B, T, -1)  # (B, T, C)
    head = model.head
    root = head.key.weight.shape[0] ** 0.5 if scale else 1.0
    parts = [a @ b.transpose(-2, -1) / root for a in (head.query(tok), head.query(pos))
             for b in (head.key(tok), head.key(pos))]
    if swap:
        parts[1], parts[2] = parts[2], parts[1]
    if mask:
        future = torch.ones(T, T).tril() == 0
        parts = [p.masked_fill(future, NEG) for p in parts]
    if softmax:
        parts = [p.softmax(-1) for p in parts]
    return parts


def score_parts_einsum(model, ids, scale=True, tril=False, softmax=False):
    """The four parts from the weight matrices, with einsum; ``tril`` zeroes the future entries."""
    T = ids.shape[1]
    tok, pos = model.token_table.weight[ids], model.position_table.weight[:T]  # (B, T, C), (T, C)
    wq, wk = model.head.query.weight, model.head.key.weight  # (hs, C) each
    root = wk.shape[0] ** 0.5 if scale else 1.0
    q_tok, k_tok = torch.einsum("btc,hc->bth", tok, wq), torch.einsum("btc,hc->bth", tok, wk)
    q_pos, k_pos = torch.einsum("tc,hc->th", pos, wq), torch.einsum("tc,hc->th", pos, wk)
    parts = [torch.einsum("bih,bjh->bij", q_tok, k_tok), torch.einsum("bih,jh->bij", q_tok, k_pos),
             torch.einsum("ih,bjh->bij", q_pos, k_tok), torch.einsum("ih,jh->ij", q_pos, k_pos).expand_as(q_tok @ k_tok.mT)]
    parts = [p / root for p in parts]
    if tril:
        parts = [p * torch.ones(T, T).tril() for p in parts]
    if softmax:
        parts = [F.softmax(p, dim=-1) for p in parts]
    return parts


def whole_scores_four_times(model, ids):
    """Each part the whole head's scores, from x = tok + pos: four parts that add up to four times them."""
    T = ids.shape[1]
    x = model.token_table(ids) + model.position_table(torch.arange(T))
    return [model.head.query(x) @ model.head.key(x).mT / model.head.key.weight.shape[0] ** 0.5] * 4


# ---------------------------------------------------------------- chapter 8: a decode step with a cache


def step_by_hand(q, k, v, cache, block_size, *, axis=2, mask=None, trim="last", attend="kept", scale=True,
                 returns="pair", dim=-1):
    """Chapter 8's decode step written out, right or with one named mistake."""
    if cache is not None:
        k_all, v_all = torch.cat([cache[0], k], dim=axis), torch.cat([cache[1], v], dim=axis)
    else:
        k_all, v_all = k, v
    kept = {"last": lambda t: t[:, :, -block_size:], "none": lambda t: t,
            "first": lambda t: t[:, :, :block_size], "narrow": lambda t: t.narrow(2, 0, min(block_size, t.shape[2])),
            "short": lambda t: t[:, :, -(block_size - 1):]}
    k_kept, v_kept = kept[trim](k_all), kept[trim](v_all)
    ka, va = {"kept": (k_kept, v_kept), "all": (k_all, v_all), "new": (k, v),
              "oldest": (k_all[:, :, :block_size], v_all[:, :, :block_size])}[attend]
    scores = q @ ka.transpose(-2, -1)
    if scale == "C":  # the model's width, n_head * hs
        scores = scores / math.sqrt(q.shape[1] * q.shape[-1])
    elif scale:
        scores = scores / q.shape[-1] ** 0.5
    L = ka.shape[2]
    if mask == "first":
        scores = scores.masked_fill(torch.ones(L, L).tril()[:1, :L] == 0, float("-inf"))
    elif mask == "self":
        scores = scores.masked_fill(torch.eye(L)[-1:] == 0, float("-inf"))
    out = F.softmax(scores, dim=dim) @ va
    if returns == "out":
        return out
    if returns == "flat":
        return out, k_kept, v_kept
    return out, (k_kept, v_kept)


def step_sdpa(q, k, v, cache, block_size, *, axis=-2, is_causal=False, trim="last", attend="kept", scale=None):
    """The same step in another code form: F.scaled_dot_product_attention, negative axes."""
    if cache is not None:
        k, v = torch.cat((cache[0], k), axis), torch.cat((cache[1], v), axis)
    new = (k[:, :, -1:], v[:, :, -1:])
    kept = {"last": (k[:, :, -block_size:], v[:, :, -block_size:]), "none": (k, v),
            "short": (k[:, :, 1 - block_size:], v[:, :, 1 - block_size:])}[trim]
    if scale == "C":
        scale = 1 / math.sqrt(q.shape[1] * q.shape[-1])
    ka, va = {"kept": kept, "all": (k, v), "new": new,
              "oldest": (k[:, :, :block_size], v[:, :, :block_size])}[attend]
    return F.scaled_dot_product_attention(q, ka, va, is_causal=is_causal, scale=scale), kept


def embed_rows(ids, past, token_table, position_table, *, row="right", token=True):
    """Chapter 8's decode input, right or with a named mistake, with the tables called."""
    bs = position_table.weight.shape[0]
    p = {"right": min(past, bs - 1), "zero": 0, "plus": min(past + 1, bs - 1), "minus": past - 1,
         "uncapped": past, "wrapped": past % bs}[row]
    pos = position_table(torch.tensor([p]))
    return token_table(ids) + pos if token else pos.expand(ids.shape[0], 1, -1)


def embed_weights(ids, past, token_table, position_table, *, row="right", token=True):
    """The same input from the tables' weights, indexed."""
    bs = position_table.weight.shape[0]
    p = {"right": min(past, bs - 1), "zero": 0, "plus": min(past + 1, bs - 1), "minus": past - 1,
         "uncapped": past, "wrapped": past % bs}[row]
    pos = position_table.weight[p]
    return token_table.weight[ids] + pos if token else pos.repeat(ids.shape[0], 1, 1)



# ---------------------------------------------------------------- every right answer passes

# ---------------------------------------------------------------- chapter 7: heads split and a whole layer


def split_view(t, n_head, how="right"):
    """Chapter 7's split of t (B, T, C) into heads, right or with a named mistake."""
    B, T, C = t.shape
    hs = C // n_head
    if how == "view-only":
        return t.view(B, n_head, T, hs)
    if how == "no-transpose":
        return t.view(B, T, n_head, hs)
    if how == "interleaved":
        return t.view(B, T, hs, n_head).permute(0, 3, 1, 2)
    if how == "axes-1-3":
        return t.view(B, T, n_head, hs).transpose(1, 3)
    if how == "axes-2-3":
        return t.view(B, T, n_head, hs).transpose(-1, -2)
    if how == "heads-first-transposed":
        return t.view(B, n_head, T, hs).transpose(1, 2)
    if how == "hs-heads-1-2":
        return t.view(B, T, hs, n_head).transpose(1, 2)
    if how == "hs-heads-1-3":
        return t.view(B, T, hs, n_head).transpose(1, 3)
    return t.view(B, T, n_head, hs).transpose(1, 2)


def split_reshape(t, n_head, how="right"):
    """The same split in another code form: reshape, unflatten, permute."""
    B, T, C = t.shape
    hs = C // n_head
    if how == "view-only":
        return t.reshape(B, n_head, T, hs)
    if how == "no-transpose":
        return t.unflatten(-1, (n_head, hs))
    if how == "interleaved":
        return torch.stack([t[..., h::n_head] for h in range(n_head)], dim=1)
    if how == "axes-1-3":
        return t.unflatten(-1, (n_head, hs)).permute(0, 3, 2, 1)
    if how == "axes-2-3":
        return t.unflatten(-1, (n_head, hs)).permute(0, 1, 3, 2)
    if how == "heads-first-transposed":
        return t.reshape(B, n_head, T, hs).permute(0, 2, 1, 3)
    if how == "hs-heads-1-2":
        return t.unflatten(-1, (hs, n_head)).permute(0, 2, 1, 3)
    if how == "hs-heads-1-3":
        return t.unflatten(-1, (hs, n_head)).permute(0, 3, 2, 1)
    return t.unflatten(-1, (n_head, hs)).permute(0, 2, 1, 3)


def layer_by_hand(x, c_attn, c_proj, n_head, *, scale="hs", proj=True, split="right", merge="right",
                  order=None, parts="qkv", mask="causal", dim=-1):
    """Chapter 7's layer written out, right or with one named mistake."""
    B, T, C = x.shape
    hs = C // n_head
    chunks = dict(zip("qkv", c_attn(x).split(C, dim=-1)))
    q, k, v = (chunks[p] for p in parts)
    if split == "view":
        q, k, v = (a.reshape(B, n_head, T, hs) for a in (q, k, v))
    elif split == "none":
        q, k, v = (a.reshape(B, T, n_head, hs) for a in (q, k, v))
    else:
        q, k, v = (a.view(B, T, n_head, hs).transpose(1, 2) for a in (q, k, v))
    scores = q @ k.transpose(-2, -1)
    if scale == "times":
        scores = scores * math.sqrt(C // n_head)
    elif scale != "none":
        scores = scores / (hs if scale == "hs" else C) ** 0.5
    L = scores.shape[-1]
    if mask == "causal":
        scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    elif mask == "reversed":
        scores = scores.masked_fill(torch.triu(torch.ones(L, L)) == 0, float("-inf"))
    elif mask == "block":
        tril = torch.tril(torch.ones(8, 8))
        scores = scores.masked_fill(tril == 0, float("-inf"))
    elif mask == "block-where":
        tril = torch.tril(torch.ones(8, 8))
        scores = torch.where(tril == 0, float("-inf"), scores)
    out = F.softmax(scores, dim=dim) @ v
    if split == "none":
        return c_proj(out.reshape(B, T, C)) if proj else out.reshape(B, T, C)
    if order == "reversed":
        out = out.flip(1)
    elif order == "rolled":
        out = out.roll(1, dims=1)
    if merge == "view":
        out = out.reshape(B, T, C)
    elif merge == "interleaved":
        out = out.permute(0, 2, 3, 1).reshape(B, T, C)
    else:
        out = out.transpose(1, 2).reshape(B, T, C)
    return c_proj(out) if proj else out


def layer_wrong_axes(x, c_attn, c_proj, n_head, axes, sdpa=True):
    """The layer split and merged with a transpose of ``axes`` instead of (1, 2)."""
    B, T, C = x.shape
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(*axes) for t in c_attn(x).split(C, dim=-1))
    if sdpa:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        L = q.shape[-2]
        scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(
            torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
    return c_proj(out.transpose(*axes).reshape(B, T, C))


def layer_sdpa(x, c_attn, c_proj, n_head, *, causal=True, transpose=True, mask=None, scale=None):
    """The layer with F.scaled_dot_product_attention, right or with a named mistake."""
    B, T, C = x.shape
    hs = C // n_head
    q, k, v = c_attn(x).split(C, dim=-1)
    q, k, v = (a.reshape(B, T, n_head, hs) for a in (q, k, v))
    if transpose:
        q, k, v = (a.transpose(1, 2) for a in (q, k, v))
    L = q.shape[-2]
    if mask == "reversed":
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(L, L, dtype=torch.bool).triu())
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    if transpose:
        out = out.transpose(1, 2)
    return c_proj(out.reshape(B, T, C))


def layer_by_list(x, c_attn, c_proj, n_head, *, scale="hs", proj=True, order=None, merge="cat", split="right",
                  parts="qkv"):
    """The layer as a loop over heads, each sliced out of c_attn's output, then torch.cat."""
    B, T, C = x.shape
    hs = C // n_head
    chunks = dict(zip("qkv", c_attn(x).split(C, dim=-1)))
    q_all, k_all, v_all = (chunks[p] for p in parts)
    outs = []
    for h in range(n_head):
        if split == "view":
            q, k, v = (a.reshape(B, n_head, T, hs)[:, h] for a in (q_all, k_all, v_all))
        else:
            q, k, v = (a[..., h * hs:(h + 1) * hs] for a in (q_all, k_all, v_all))
        scores = q @ k.transpose(-2, -1) / ((hs if scale == "hs" else C) ** 0.5 if scale != "none" else 1)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(F.softmax(scores, dim=-1) @ v)
    if order == "reversed":
        outs = outs[::-1]
    elif order == "swap01":
        outs[0], outs[1] = outs[1], outs[0]
    if merge == "stack-view":
        out = torch.stack(outs, 1).reshape(B, T, C)
    elif merge == "interleaved":
        out = torch.stack(outs, -1).reshape(B, T, C)
    else:
        out = torch.cat(outs, dim=-1)
    return c_proj(out) if proj else out


CORRECT = [
    ("cumsum", checks.check_cumsum_average, (average_cumsum,)),
    ("cumsum-function", checks.check_cumsum_average, (average_cumsum_2,)),
    ("one-way", checks.check_one_way, (one_way,)),
    ("one-way-parameters", checks.check_one_way, (one_way_parameters,)),
    ("unit-scale", checks.check_unit_scale, (unit_scale,)),
    ("unit-scale-measured", checks.check_unit_scale, (lambda q, k: 1 / (q @ k.mT).std(),)),
    ("softmax-hand", checks.check_softmax, (softmax_safe,)),
    ("head-weights-inf", checks.check_head, (head_attending(weights_ref),)),
    ("head-weights-1e9", checks.check_head, (head_attending(lambda s: weights_ref(s, fill=-1e9)),)),
    ("head-weights-finfo-where", checks.check_head, (head_attending(lambda s: weights_ref(s, fill=torch.finfo(s.dtype).min, where=True)),)),
    ("head-weights-where", checks.check_head, (head_attending(lambda s: weights_ref(s, where=True)),)),
    ("head-weights-triu", checks.check_head, (head_attending(masked(lambda T: torch.triu(torch.ones(T, T), 1).bool())),)),
    ("padding-nan-to-num", checks.check_padding_mask, (pad_weights,)),
    ("padding-where", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, empty="where"),)),
    ("padding-1e9-multiply", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, fill=-1e9, empty="multiply"),)),
    ("padding-finfo", checks.check_padding_mask,
     (lambda s, p: pad_weights(s, p, fill=torch.finfo(s.dtype).min, empty="where"),)),
    ("padding-two-steps", checks.check_padding_mask, (pad_in_two_steps,)),
    ("head", checks.check_head, (Head,)),
    ("head-sdpa", checks.check_head, (head_variant(forward=sdpa_forward),)),
    ("head-nn-dropout", checks.check_head, (DropoutHead,)),
    ("head-1e9-where", checks.check_head,
     (head_attending(lambda s: F.softmax(torch.where(_tril(s.shape[-1]) == 0, torch.tensor(-1e9), s), -1)),)),
    ("head-finfo", checks.check_head,
     (head_attending(lambda s: masked(lambda T: _tril(T) == 0, torch.finfo(s.dtype).min)(s)),)),
    ("head-method-softmax", checks.check_head,
     (head_attending(lambda s: s.masked_fill(_tril(s.shape[-1]) == 0, NEG).softmax(-1)),)),
    ("real-batch-function", checks.check_real_batch_weights, (real_weights(), REAL_HEAD, REAL_X)),
    ("real-batch-tensor", checks.check_real_batch_weights, (real_weights(fill=-1e9)(), REAL_HEAD, REAL_X)),
    ("multihead", checks.check_multihead_sdpa, (multihead(),)),
    ("multihead-unbind", checks.check_multihead_sdpa,
     (multihead(merge=lambda out: torch.cat(out.unbind(1), dim=-1)),)),
    ("distance-diagonal", checks.check_weight_by_distance, (lambda w: torch.stack([d.mean() for d in diagonals(w)]),)),
    ("distance-loop", checks.check_weight_by_distance, (by_distance_loop,)),
    ("distance-masks", checks.check_weight_by_distance, (by_distance_masks,)),
    ("score-parts", checks.check_score_parts, (score_parts, PARTS_MODEL, PARTS_IDS)),
    ("score-parts-einsum", checks.check_score_parts, (score_parts_einsum, PARTS_MODEL, PARTS_IDS)),
    ("previous-token", checks.check_previous_token_head, (previous_token_head(),)),
    ("previous-token-function", checks.check_previous_token_head, (previous_token_head,)),
    ("previous-token-query-side", checks.check_previous_token_head, (head_with(20 * shift(8, -1), torch.eye(8)),)),
    ("previous-token-wide", checks.check_previous_token_head,
     (head_with(20 * torch.eye(16, 6), torch.eye(16, 6) @ shift(6, 1), C=6, hs=16, bs=6),)),
    ("attend-cached", checks.check_attend_cached, (step_by_hand,)),
    ("attend-cached-sdpa", checks.check_attend_cached, (step_sdpa,)),
    ("embed-next", checks.check_embed_next, (embed_rows,)),
    ("embed-next-weights", checks.check_embed_next, (embed_weights,)),
    ("split-heads", checks.check_split_heads, (split_view,)),
    ("split-heads-reshape", checks.check_split_heads, (split_reshape,)),
    ("multi-head-by-hand", checks.check_multi_head, (layer_by_hand,)),
    ("multi-head-list", checks.check_multi_head, (layer_by_list,)),
    ("multi-head-sdpa", checks.check_multi_head,
     (lambda x, a, p, n: p(F.scaled_dot_product_attention(*[split_view(t, n) for t in a(x).split(x.shape[-1], -1)],
                                                           is_causal=True).transpose(1, 2).flatten(2)),)),
]


@pytest.mark.parametrize("check, args", [c[1:] for c in CORRECT], ids=[c[0] for c in CORRECT])
def test_right_answers_pass_with_one_line_and_return_none(check, args, capsys):
    assert check(*args) is None  # None: a chapter's last line would echo anything else into its outputs
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"✓ {check.__name__} passed")
    # one message, wrapped to the book's 77-character column, its later lines indented
    assert all(line.startswith("  ") for line in lines[1:])
    assert max(len(line) for line in lines) <= checks.LINE_WIDTH


@pytest.mark.parametrize("check, args", [c[1:] for c in CORRECT[::5]], ids=[c[0] for c in CORRECT[::5]])
def test_in_strict_mode_right_answers_return_true_and_print_nothing(check, args, capsys):
    assert check(*args, strict=True) is True
    assert capsys.readouterr().out == ""


def test_weights_of_a_real_text_batch_pass(capsys):
    from attention_lab import text

    ids, _ = text.batch(4, 8, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    x = nn.Embedding(len(text.vocab()), 32)(ids) + nn.Embedding(8, 32)(torch.arange(8))
    head = ReferenceHead(32, 16, 8)
    q, k = head.query(x), head.key(x)
    weights = weights_ref(q @ k.transpose(-2, -1) / 4)
    checks.check_real_batch_weights(weights, head, x)
    checks.check_real_batch_weights(lambda: weights, head, x)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("✓")]
    assert [line.split(" passed")[0] for line in lines] == ["✓ check_real_batch_weights"] * 2


def test_checks_leave_the_random_stream_alone():
    torch.manual_seed(0)
    before = torch.randn(3)
    torch.manual_seed(0)
    checks.check_head(Head)
    checks.check_padding_mask(pad_weights)
    assert torch.equal(torch.randn(3), before)


# ---------------------------------------------------------------- every message, by name

# (test id, check, its arguments, the id in checks.MISTAKES of the message it must give)
def patching(name, replacement):
    """A right running average that replaces torch's ``name`` (or torch.Tensor's) while it runs."""
    def answer(x):
        out = x.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(1, -1, 1)
        space, attr = (torch.Tensor, name.split(".")[1]) if name.startswith("Tensor.") else (torch, name)
        setattr(space, attr, replacement)
        return out
    return answer


WRONG = [
    # what every check says
    ("stub-strict", strict(checks.check_cumsum_average), (stub,), "general/not-implemented"),
    ("stub-head-strict", strict(checks.check_head), (StubHead,), "general/not-implemented"),
    ("raised", checks.check_cumsum_average, (lambda x: x @ torch.ones(3, 3),), "general/raised"),
    ("raised-own-error", checks.check_cumsum_average, (lambda x: int("x"),), "general/raised"),
    ("raised-system-exit", checks.check_cumsum_average, (lambda x: sys.exit("done"),), "general/raised"),
    ("patched-allclose", checks.check_cumsum_average, (patching("allclose", lambda *a, **k: True),),
     "general/patched-torch"),
    ("patched-tensor-method", checks.check_cumsum_average, (patching("Tensor.cumsum", lambda self, d: self),),
     "general/patched-torch"),
    ("no-return", checks.check_cumsum_average, (lambda x: None,), "general/not-a-tensor"),
    ("list", checks.check_cumsum_average, (lambda x: x.tolist(),), "general/not-a-tensor"),
    ("wrong-shape", checks.check_cumsum_average, (lambda x: x.mean(1),), "general/wrong-shape"),
    ("wrong-shape-slice", checks.check_cumsum_average, (lambda x: x[:, :1],), "general/wrong-shape"),
    ("not-finite-inf", checks.check_cumsum_average, (lambda x: average_matmul(x) / 0,), "general/not-finite"),
    ("not-finite-nan", checks.check_cumsum_average, (lambda x: average_matmul(x) * math.nan,), "general/not-finite"),
    ("differ", checks.check_cumsum_average, (lambda x: average_matmul(x) + 0.5 * x,), "general/differ"),
    ("differ-plus-x-squared", checks.check_cumsum_average, (lambda x: average_cumsum(x) + 0.1 * x ** 2,),
     "general/differ"),
    ("scaled-double", checks.check_cumsum_average, (lambda x: average_matmul(x) * 2,), "general/scaled"),
    ("scaled-softmax", checks.check_softmax, (lambda z: softmax_safe(z) / 3,), "general/scaled"),
    # what any check says about an answer that keeps state between calls, or is right to 3 digits only
    ("counter-average", checks.check_cumsum_average, (counting(average_cumsum),), "general/counter"),
    ("counter-padding", checks.check_padding_mask, (counting(pad_weights),), "general/counter"),
    ("counter-head", checks.check_head, (head_variant(forward=counting(Head.forward, per_instance=True)),),
     "general/counter"),
    ("cache-by-shape-average", checks.check_cumsum_average, (cached_by_shape(average_cumsum),),
     "general/kept-state"),
    ("cache-by-shape-distance", checks.check_weight_by_distance, (cached_by_shape(by_distance_loop),),
     "general/kept-state"),
    ("cache-by-shape-parts", checks.check_score_parts, (cached_by_shape(score_parts), PARTS_MODEL, PARTS_IDS),
     "general/kept-state"),
    ("float16-average", checks.check_cumsum_average, (lambda x: average_cumsum(x.half()).float(),),
     "general/precision"),
    ("bfloat16-softmax", checks.check_softmax, (lambda z: softmax_safe(z.bfloat16()).float(),), "general/precision"),
    ("float16-head", checks.check_head, (head_variant(forward=half_sdpa),), "general/precision"),
    ("float16-parts-cast-back", checks.check_score_parts,
     (lambda m, i: [p.half().float() for p in score_parts(m, i)], PARTS_MODEL, PARTS_IDS), "parts/precision"),
    ("bfloat16-parts", checks.check_score_parts,
     (lambda m, i: [p.bfloat16().float() for p in score_parts(m, i)], PARTS_MODEL, PARTS_IDS), "parts/precision"),
    ("empty-average", checks.check_cumsum_average, (lambda x: x[:, :0],), "general/empty"),
    ("empty-head", checks.check_head, (head_variant(forward=lambda self, x: self.value(x)[..., :0]),), "general/empty"),
    ("no-argument-head", checks.check_head, (), "general/arguments"),
    ("average-last-count", checks.check_cumsum_average,
     (cumsum_over(lambda T: torch.arange(1, T + 1).index_add(0, torch.tensor([T - 1]), torch.tensor([1]))[:, None]),),
     "average/counts"),
    ("average-counts-rounded", checks.check_cumsum_average,
     (cumsum_over(lambda T: torch.arange(1, T + 1).clamp(max=10)[:, None]),), "average/counts"),
    ("scale-kept-by-shape", checks.check_unit_scale, (cached_by_shape(unit_scale),), "scale/kept"),
    ("scale-kept-by-d_k", checks.check_unit_scale, (cached_by_shape(unit_scale, key=lambda q, k: q.shape[-1]),),
     "scale/kept"),
    ("head-values-reversed", checks.check_head, (head_variant(average=lambda w, x, k, q, v: w @ v.flip(1)),),
     "head/reversed"),
    ("head-output-reversed", checks.check_head, (head_variant(forward=lambda self, x: Head.forward(self, x).flip(1)),),
     "head/reversed"),
    ("head-caches-keys", checks.check_head, (CachingHead,), "head/kept-state"),
    ("head-caches-weights-by-T", checks.check_head, (CachingWeightsHead,), "head/kept-state"),
    ("real-dropout-on", checks.check_real_batch_weights, (lambda: F.dropout(real_weights()(), 0.1), REAL_HEAD, REAL_X),
     "real/unsteady"),
    ("real-counter", checks.check_real_batch_weights, (counting(real_weights()), REAL_HEAD, REAL_X), "real/unsteady"),
    ("parts-model-none", checks.check_score_parts, (score_parts, None, PARTS_IDS), "parts/bad-model"),
    ("parts-model-head", checks.check_score_parts, (score_parts, PARTS_MODEL.head, PARTS_IDS), "parts/bad-model"),
    ("parts-ids-float", checks.check_score_parts, (score_parts, PARTS_MODEL, PARTS_IDS.float()), "parts/bad-ids"),
    ("parts-ids-too-long", checks.check_score_parts, (score_parts, PARTS_MODEL, PARTS_IDS.repeat(1, 2)),
     "parts/bad-ids"),
    ("too-many-arguments", checks.check_softmax, (softmax_safe, 1), "general/arguments"),
    # hints from the failed torch call
    ("T-on-3d-scale", checks.check_unit_scale, (lambda q, k: 1 / (q @ k.T).std(),), "hint/T-on-3d"),
    ("T-on-3d-head", checks.check_head, (head_variant(score=lambda q, k, C: q @ k.T / 4),), "hint/T-on-3d"),
    ("keepdim-sum", checks.check_softmax, (softmax_hand(lambda z: 0, lambda e: e.sum(-1)),), "hint/keepdim"),
    ("keepdim-max", checks.check_softmax, (softmax_hand(lambda z: z.max(-1).values, lambda e: e.sum(-1, keepdim=True)),),
     "hint/keepdim"),
    ("keepdim-weights", checks.check_head, (head_attending(hand_softmax_without_keepdim),), "hint/keepdim"),
    ("max-values", checks.check_softmax, (softmax_hand(lambda z: z.max(-1, keepdim=True), torch.sum),), "hint/max-values"),
    ("max-values-torch", checks.check_softmax,
     (softmax_hand(lambda z: torch.max(z, dim=-1, keepdim=True), torch.sum),), "hint/max-values"),
    ("float-mask-masked-fill", checks.check_head, (head_attending(masked(_tril)),), "hint/bool-mask"),
    ("float-mask-where", checks.check_head, (head_attending(lambda s: F.softmax(torch.where(_tril(s.shape[-1]), s, NEG), -1)),), "hint/bool-mask"),
    ("float-mask-invert", checks.check_head, (head_attending(masked(lambda T: ~_tril(T))),), "hint/bool-mask"),
    ("mask-from-B", checks.check_head, (head_attending(lambda s: masked(lambda T: _tril(s.shape[0]) == 0)(s)),), "hint/mask-size"),
    ("mask-too-big", checks.check_head, (head_attending(masked(lambda T: _tril(12) == 0)),), "hint/mask-size"),
    ("head-mask-from-B", checks.check_head,
     (head_variant(attend=lambda s, tril: F.softmax(s.masked_fill(_tril(s.shape[0]) == 0, NEG), -1)),), "hint/mask-size"),
    # chapter 1
    ("future-mean", checks.check_cumsum_average, (lambda x: x.mean(dim=1, keepdim=True).expand_as(x),), "average/future-mean"),
    ("future-repeat", checks.check_cumsum_average, (lambda x: x.mean(1, keepdim=True).repeat(1, x.shape[1], 1),),
     "average/future-mean"),
    ("future-triu", checks.check_cumsum_average, (average_by(lambda w: w.T / w.T.sum(1, keepdim=True)),),
     "average/future-triu"),
    ("future-loop", checks.check_cumsum_average, (average_future_loop,), "average/future-triu"),
    ("no-current", checks.check_cumsum_average,
     (lambda x: average_by(lambda w: w.tril(-1) / w.tril(-1).sum(1, keepdim=True).clamp(min=1))(x),),
     "average/no-current"),
    ("no-current-loop", checks.check_cumsum_average, (average_without_current_loop,), "average/no-current"),
    ("sum-cumsum", checks.check_cumsum_average, (lambda x: x.cumsum(1),), "average/sum"),
    ("sum-tril", checks.check_cumsum_average, (average_by(lambda w: w),), "average/sum"),
    ("divide-by-T", checks.check_cumsum_average, (cumsum_over(lambda T: T),), "average/divide-by-T"),
    ("divide-by-T-matmul", checks.check_cumsum_average, (average_by(lambda w: w / w.shape[0]),), "average/divide-by-T"),
    ("count-from-zero", checks.check_cumsum_average, (cumsum_over(lambda T: torch.arange(T).view(1, T, 1)),),
     "average/count-from-zero"),
    ("count-from-zero-2", checks.check_cumsum_average, (cumsum_over(lambda T: torch.arange(0, T)[:, None]),),
     "average/count-from-zero"),
    ("cumsum-batch", checks.check_cumsum_average, (cumsum_over(lambda T: torch.arange(1, T + 1)[:, None], dim=0),),
     "average/cumsum-axis"),
    ("cumsum-channels", checks.check_cumsum_average, (cumsum_over(lambda T: torch.arange(1, T + 1)[:, None], dim=-1),),
     "average/cumsum-axis"),
    ("columns", checks.check_cumsum_average, (average_by(lambda w: w / w.sum(0, keepdim=True)),), "average/columns"),
    ("columns-no-keepdim", checks.check_cumsum_average, (average_by(lambda w: w / w.sum(dim=0)),), "average/columns"),
    ("no-keepdim", checks.check_cumsum_average, (average_by(lambda w: w / w.sum(1)),), "average/no-keepdim"),
    ("no-keepdim-last", checks.check_cumsum_average, (average_by(lambda w: w / w.sum(dim=-1)),), "average/no-keepdim"),
    ("no-cumsum-loop", checks.check_cumsum_average, (average_loop,), "average/no-cumsum"),
    ("no-cumsum-matmul", checks.check_cumsum_average, (average_matmul,), "average/no-cumsum"),
    ("counts-hard-coded", checks.check_cumsum_average, (lambda x: x.cumsum(1) / torch.arange(1, 9).view(-1, 1),),
     "average/counts-fixed"),
    ("counts-chapter-T", checks.check_cumsum_average, (lambda x: x.cumsum(dim=1) / torch.arange(1.0, 8 + 1)[:, None],),
     "average/counts-fixed"),
    ("floor-division", checks.check_cumsum_average, (lambda x: x.cumsum(1) // torch.arange(1, x.shape[1] + 1)[:, None],),
     "average/floor-division"),
    ("floor-division-div", checks.check_cumsum_average,
     (lambda x: torch.div(x.cumsum(1), torch.arange(1, x.shape[1] + 1).view(-1, 1), rounding_mode="floor"),),
     "average/floor-division"),
    ("counts-1d", checks.check_cumsum_average, (cumsum_over(lambda T: torch.arange(1, T + 1)),), "average/hint-counts-axis"),
    ("counts-row", checks.check_cumsum_average, (cumsum_over(lambda T: torch.arange(1, T + 1).view(1, T)),),
     "average/hint-counts-axis"),
    # chapter 2: a query and a key that make one token look for another, not back
    ("one-way-tied", checks.check_one_way, (lambda: (one_way()[0], one_way()[0]),), "one-way/tied"),
    ("one-way-same-weights", checks.check_one_way, (lambda: layers(RIGHT_Q, RIGHT_Q),), "one-way/tied"),
    ("one-way-reversed", checks.check_one_way, (lambda: one_way()[::-1],), "one-way/reversed"),
    ("one-way-reversed-weights", checks.check_one_way, (lambda: layers(RIGHT_K, RIGHT_Q),), "one-way/reversed"),
    ("one-way-in-out", checks.check_one_way, (lambda: layers(RIGHT_Q, [[0.0, 0.0], [1.0, 0.0]]),), "one-way/layout"),
    ("one-way-in-out-both", checks.check_one_way, (lambda: layers([[0.0, 2.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]]),),
     "one-way/layout"),
    ("one-way-weak", checks.check_one_way, (lambda: layers([[1.0, 0.0], [0.0, 0.0]], RIGHT_K),), "one-way/weak"),
    ("one-way-both-ways", checks.check_one_way, (lambda: layers([[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]),),
     "one-way/weak"),
    ("one-way-bias", checks.check_one_way, (lambda: layers(RIGHT_Q, RIGHT_K, bias=True),), "one-way/bias"),
    ("one-way-key-bias", checks.check_one_way, (lambda: (one_way()[0], nn.Linear(2, 2)),), "one-way/bias"),
    ("one-way-weights", checks.check_one_way, (lambda: RIGHT_Q,), "one-way/not-layers"),
    ("one-way-one-layer", checks.check_one_way, (lambda: one_way()[0],), "one-way/not-layers"),
    ("one-way-widths", checks.check_one_way, (lambda: (nn.Linear(2, 2, bias=False), nn.Linear(2, 3, bias=False)),),
     "one-way/width"),
    ("one-way-3-in", checks.check_one_way, (lambda: (nn.Linear(3, 4, bias=False), nn.Linear(3, 4, bias=False)),),
     "one-way/width"),
    ("one-way-raises", checks.check_one_way, (lambda: 1 / 0,), "general/raised"),
    ("one-way-copy-without-no-grad", checks.check_one_way, (one_way_in_place(lambda w, rows: w.copy_(rows)),),
     "one-way/hint-no-grad"),
    ("one-way-index-without-no-grad", checks.check_one_way,
     (one_way_in_place(lambda w, rows: w.__setitem__((0, 0), rows[0, 0])),), "one-way/hint-no-grad"),
    # chapter 3: the inverse temperature
    ("scale-sqrt-dk", checks.check_unit_scale, (lambda q, k: 1 / math.sqrt(q.shape[-1]),), "scale/unit-variance"),
    ("scale-dk-power", checks.check_unit_scale, (lambda q, k: q.shape[-1] ** -0.5,), "scale/unit-variance"),
    ("scale-variances", checks.check_unit_scale,
     (lambda q, k: 1 / (math.sqrt(q.shape[-1]) * q.var().item() * k.var().item()),), "scale/variances"),
    ("scale-variances-tensor", checks.check_unit_scale,
     (lambda q, k: 1 / (math.sqrt(q.size(-1)) * (q.var() * k.var()).item()),), "scale/variances"),
    ("scale-std", checks.check_unit_scale,
     (lambda q, k: 1 / math.sqrt(q.shape[-1] * q.std().item() * k.std().item()),), "scale/std"),
    ("scale-std-tensor", checks.check_unit_scale, (lambda q, k: (q.size(-1) * q.std() * k.std()) ** -0.5,), "scale/std"),
    ("scale-no-dk", checks.check_unit_scale, (lambda q, k: 1 / (q.std() * k.std()).item(),), "scale/no-dk"),
    ("scale-no-dk-var", checks.check_unit_scale, (lambda q, k: 1 / math.sqrt(q.var().item() * k.var().item()),),
     "scale/no-dk"),
    ("scale-divide-dk", checks.check_unit_scale, (lambda q, k: 1 / q.shape[-1],), "scale/divide-dk"),
    ("scale-divide-dk-tensor", checks.check_unit_scale, (lambda q, k: torch.tensor(1.0) / q.shape[-1],),
     "scale/divide-dk"),
    ("scale-inverted", checks.check_unit_scale,
     (lambda q, k: math.sqrt(q.shape[-1] * q.var().item() * k.var().item()),), "scale/inverted"),
    ("scale-inverted-tensor", checks.check_unit_scale, (lambda q, k: (q.shape[-1] * q.var() * k.var()).sqrt(),),
     "scale/inverted"),
    ("scale-fixed", checks.check_unit_scale, (lambda q, k: 0.75,), "scale/fixed"),
    ("scale-fixed-sqrt-16", checks.check_unit_scale, (lambda q, k: 1 / math.sqrt(16),), "scale/fixed"),
    ("scale-twice", checks.check_unit_scale, (lambda q, k: 2 * unit_scale(q, k),), "scale/differ"),
    ("scale-one-over-var", checks.check_unit_scale, (lambda q, k: 1 / (q @ k.mT).var().item(),), "scale/differ"),
    ("scale-a-vector", checks.check_unit_scale, (lambda q, k: q.std(-1),), "scale/not-a-number"),
    ("scale-a-string", checks.check_unit_scale, (lambda q, k: "0.75",), "scale/not-a-number"),
    # chapter 3: softmax
    ("global-max", checks.check_softmax, (softmax_hand(lambda z: z.max(), lambda e: e.sum(-1, keepdim=True)),),
     "softmax/global-max"),
    ("global-amax", checks.check_softmax, (softmax_hand(torch.amax, lambda e: e.sum(-1, keepdim=True)),),
     "softmax/global-max"),
    ("softmax-torch", checks.check_softmax, (lambda z: F.softmax(z, dim=-1),), "softmax/torch"),
    ("softmax-method", checks.check_softmax, (lambda z: z.log_softmax(-1).exp(),), "softmax/torch"),
    ("overflow", checks.check_softmax, (lambda z: z.exp() / z.exp().sum(-1, keepdim=True),), "softmax/overflow"),
    ("overflow-torch", checks.check_softmax, (lambda z: torch.exp(z) / torch.sum(torch.exp(z), dim=-1, keepdim=True),),
     "softmax/overflow"),
    ("axis-0", checks.check_softmax, (lambda z: softmax_safe(z.transpose(0, -1)).transpose(0, -1),), "softmax/wrong-axis"),
    ("axis-1", checks.check_softmax, (softmax_hand(lambda z: 0, lambda e: e.sum(1, keepdim=True)),), "softmax/wrong-axis"),
    ("whole-sum", checks.check_softmax, (softmax_hand(lambda z: 0, torch.sum),), "softmax/whole-sum"),
    ("whole-sum-method", checks.check_softmax, (lambda z: z.exp() / z.exp().sum(),), "softmax/whole-sum"),
    ("no-exp", checks.check_softmax, (lambda z: z / z.sum(-1, keepdim=True),), "softmax/no-exp"),
    ("no-exp-torch", checks.check_softmax, (lambda z: z / torch.sum(z, dim=-1, keepdim=True),), "softmax/no-exp"),
    # the same slips after a right max subtraction, z - z.max(-1, keepdim=True).values
    ("shifted-axis-0", checks.check_softmax, (softmax_hand(row_max, lambda e: e.sum(0, keepdim=True)),),
     "softmax/wrong-axis"),
    ("shifted-axis-1", checks.check_softmax, (softmax_hand(row_max, lambda e: torch.sum(e, dim=1, keepdim=True)),),
     "softmax/wrong-axis"),
    ("shifted-whole-sum", checks.check_softmax, (softmax_hand(row_max, torch.sum),), "softmax/whole-sum"),
    ("shifted-whole-sum-method", checks.check_softmax, (softmax_hand(row_max, lambda e: e.sum()),), "softmax/whole-sum"),
    ("shifted-no-exp", checks.check_softmax, (lambda z: (z - row_max(z)) / (z - row_max(z)).sum(-1, keepdim=True),),
     "softmax/no-exp"),
    ("shifted-no-exp-torch", checks.check_softmax,
     (lambda z: (lambda m: m / torch.sum(m, dim=-1, keepdim=True))(z - torch.max(z, dim=-1, keepdim=True)[0]),),
     "softmax/no-exp"),
    # chapter 4: the causal mask
    ("fixed-size-mask", checks.check_head, (head_attending(masked(lambda T: _tril(8) == 0)),), "head/T-lt-block"),
    ("fixed-size-where", checks.check_head, (head_attending(lambda s: F.softmax(torch.where(_tril(8) == 0, NEG, s), -1)),),
     "head/T-lt-block"),
    ("mask-past", checks.check_head, (head_attending(masked(lambda T: _tril(T) == 1)),), "mask/hides-past"),
    ("mask-past-triu", checks.check_head, (head_attending(masked(lambda T: torch.triu(torch.ones(T, T)) == 0)),),
     "mask/hides-past"),
    ("mask-past-where", checks.check_head, (head_attending(lambda s: torch.where(_tril(s.shape[-1]) == 1, NEG, s).softmax(-1)),), "mask/hides-past"),
    ("mask-diagonal", checks.check_head, (head_attending(masked(lambda T: torch.triu(torch.ones(T, T)) == 1)),),
     "mask/hides-diagonal"),
    ("mask-diagonal-1e9", checks.check_head, (head_attending(masked(lambda T: _tril(T, -1) == 0, -1e9)),), "mask/hides-diagonal"),
    ("no-mask", checks.check_head, (head_attending(lambda s: F.softmax(s, dim=-1)),), "mask/none"),
    ("no-mask-method", checks.check_head, (head_attending(lambda s: s.softmax(-1)),), "mask/none"),
    ("mask-after", checks.check_head, (head_attending(lambda s: F.softmax(s, -1).masked_fill(_tril(s.shape[-1]) == 0, 0)),),
     "mask/after-softmax"),
    ("mask-after-multiply", checks.check_head, (head_attending(lambda s: F.softmax(s, -1) * _tril(s.shape[-1])),),
     "mask/after-softmax"),
    ("mask-after-inf", checks.check_head, (head_attending(lambda s: F.softmax(s, -1).masked_fill(_tril(s.shape[-1]) == 0, NEG)),), "mask/after-softmax"),
    ("fill-zero", checks.check_head, (head_attending(lambda s: weights_ref(s, fill=0.0)),), "mask/fill-zero"),
    ("fill-zero-tril", checks.check_head, (head_attending(lambda s: F.softmax(torch.tril(s), -1)),), "mask/fill-zero"),
    ("softmax-columns", checks.check_head, (head_attending(masked(lambda T: _tril(T) == 0, dim=-2)),), "mask/softmax-columns"),
    ("softmax-columns-hand", checks.check_head, (head_attending(lambda s: softmax_hand(lambda z: 0, lambda e: e.sum(1, keepdim=True))(s.masked_fill(_tril(s.shape[-1]) == 0, NEG))),),
     "mask/softmax-columns"),
    ("softmax-batch", checks.check_head, (head_attending(masked(lambda T: _tril(T) == 0, dim=0)),), "mask/softmax-batch"),
    ("softmax-batch-hand", checks.check_head, (head_attending(lambda s: softmax_hand(lambda z: 0, lambda e: e.sum(0, keepdim=True))(s.masked_fill(_tril(s.shape[-1]) == 0, NEG))),),
     "mask/softmax-batch"),
    # chapter 4: the padding mask
    ("pad-nan", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, empty=None),), "pad/nan-rows"),
    ("pad-nan-two-steps", checks.check_padding_mask,
     (lambda s, p: F.softmax(s.masked_fill(_tril(s.shape[-1]) == 0, NEG).masked_fill(p[:, None], NEG), -1),),
     "pad/nan-rows"),
    ("pad-uniform-1e9", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, fill=-1e9, empty=None),),
     "pad/uniform-rows"),
    ("pad-uniform-finfo", checks.check_padding_mask,
     (lambda s, p: pad_weights(s, p, fill=torch.finfo(s.dtype).min, empty=None),), "pad/uniform-rows"),
    ("pad-not-masked", checks.check_padding_mask, (lambda s, p: weights_ref(s),), "pad/not-masked"),
    ("pad-not-masked-2", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, hidden=None, fill=-1e9),),
     "pad/not-masked"),
    ("pad-queries", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, hidden="queries"),), "pad/queries"),
    ("pad-queries-nan", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, hidden="queries", empty=None),),
     "pad/queries"),
    ("pad-inverted", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, hidden="real"),), "pad/inverted"),
    ("pad-inverted-1e9", checks.check_padding_mask,
     (lambda s, p: pad_weights(s, p, hidden="real", fill=-1e9, empty="multiply"),), "pad/inverted"),
    ("pad-future", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, causal=False),), "pad/future"),
    ("pad-future-1e9", checks.check_padding_mask,
     (lambda s, p: pad_weights(s, p, causal=False, fill=-1e9, empty="multiply"),), "pad/future"),
    ("pad-after", checks.check_padding_mask,
     (lambda s, p: F.softmax(s, -1).masked_fill((_tril(s.shape[-1]) == 0) | p[:, None, :], 0),), "pad/after-softmax"),
    ("pad-after-padding", checks.check_padding_mask, (lambda s, p: weights_ref(s) * ~p[:, None, :],), "pad/after-softmax"),
    ("pad-fill-zero", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, fill=0.0),), "pad/fill-zero"),
    ("pad-fill-zero-where", checks.check_padding_mask,
     (lambda s, p: F.softmax(torch.where((_tril(s.shape[-1]) == 0) | p[:, None, :], 0.0, s), -1),), "pad/fill-zero"),
    ("pad-broadcast", checks.check_padding_mask, (lambda s, p: F.softmax(s.masked_fill(p, NEG), -1),),
     "pad/hint-broadcast"),
    ("pad-broadcast-where", checks.check_padding_mask, (lambda s, p: F.softmax(torch.where(p, NEG, s), -1),),
     "pad/hint-broadcast"),
    # chapter 5: the head's parts
    ("head-missing", checks.check_head, (head_variant(names=("k", "query", "value")),), "head/missing-parts"),
    ("head-not-linear", checks.check_head, (head_variant(names=("query", "value"), key=None),), "head/missing-parts"),
    ("head-bias", checks.check_head, (head_variant(biased=("key", "query", "value")),), "head/bias"),
    ("head-bias-value", checks.check_head, (head_variant(biased=("value",)),), "head/bias"),
    ("head-size-swapped", checks.check_head, (head_variant(sizes=lambda C, hs: (hs, C)),), "head/wrong-size"),
    ("head-size-C", checks.check_head, (head_variant(sizes=lambda C, hs: (C, C)),), "head/wrong-size"),
    ("head-tril-parameter", checks.check_head, (head_variant(tril_as="parameter"),), "head/tril-parameter"),
    ("head-tril-trainable", checks.check_head, (head_variant(tril_as="trainable"),), "head/tril-parameter"),
    ("head-tril-attribute", checks.check_head, (head_variant(tril_as="attribute"),), "head/tril-not-buffer"),
    ("head-tril-missing", checks.check_head, (head_variant(tril_as="none", forward=sdpa_forward),), "head/tril-not-buffer"),
    ("head-T-lt-block", checks.check_head, (head_variant(slice_mask=False),), "head/T-lt-block"),
    ("head-T-fixed", checks.check_head,
     (head_variant(attend=lambda s, tril: Head.attend(s, _tril(8))),), "head/T-lt-block"),
    # chapter 5: the head's numbers
    ("head-no-scale", checks.check_head, (head_scaled(lambda d, C: 1.0),), "head/no-scale"),
    ("head-sdpa-no-scale", checks.check_head,
     (head_variant(forward=lambda self, x: F.scaled_dot_product_attention(
         self.query(x), self.key(x), self.value(x), is_causal=True, scale=1.0)),), "head/no-scale"),
    ("head-divide-dk", checks.check_head, (head_scaled(lambda d, C: 1 / d),), "head/divide-dk"),
    ("head-divide-dk-power", checks.check_head, (head_scaled(lambda d, C: d**-1),), "head/divide-dk"),
    ("head-sqrt-C", checks.check_head, (head_scaled(lambda d, C: C**-0.5),), "head/sqrt-C"),
    ("head-sqrt-C-math", checks.check_head, (head_scaled(lambda d, C: 1 / math.sqrt(C)),), "head/sqrt-C"),
    ("head-multiply", checks.check_head, (head_scaled(lambda d, C: math.sqrt(d)),), "head/multiply"),
    ("head-multiply-power", checks.check_head, (head_scaled(lambda d, C: d**0.5),), "head/multiply"),
    ("head-fixed-4", checks.check_head, (head_scaled(lambda d, C: 1 / 4),), "head/fixed-scale"),
    ("head-fixed-16", checks.check_head, (head_scaled(lambda d, C: 16**-0.5),), "head/fixed-scale"),
    ("head-mask-past", checks.check_head, (head_attending(masked(lambda T: _tril(T) == 1)),), "mask/hides-past"),
    ("head-no-mask", checks.check_head, (head_attending(lambda s: F.softmax(s, -1)),), "mask/none"),
    ("head-mask-after", checks.check_head,
     (head_variant(attend=lambda s, tril: F.softmax(s, -1).masked_fill(tril == 0, 0)),), "mask/after-softmax"),
    ("head-mask-after-inf", checks.check_head,
     (head_variant(attend=lambda s, tril: F.softmax(s, -1).masked_fill(tril == 0, NEG)),), "mask/after-softmax"),
    ("head-mask-diagonal", checks.check_head, (head_attending(masked(lambda T: _tril(T, -1) == 0, -1e9)),),
     "mask/hides-diagonal"),
    ("head-fill-zero", checks.check_head, (head_attending(lambda s: weights_ref(s, fill=0.0)),), "mask/fill-zero"),
    ("head-wrong-axis", checks.check_head, (head_attending(masked(lambda T: _tril(T) == 0, dim=-2)),),
     "mask/softmax-columns"),
    ("head-batch-axis", checks.check_head, (head_attending(masked(lambda T: _tril(T) == 0, dim=0)),), "mask/softmax-batch"),
    ("head-averages-x", checks.check_head, (head_variant(average=lambda w, x, k, q, v: w @ x),), "head/averages-x"),
    ("head-averages-x-bmm", checks.check_head, (head_variant(average=lambda w, x, k, q, v: torch.bmm(w, x)),),
     "head/averages-x"),
    ("head-averages-k", checks.check_head, (head_variant(average=lambda w, x, k, q, v: w @ k),), "head/averages-k"),
    ("head-averages-k-matmul", checks.check_head, (head_variant(average=lambda w, x, k, q, v: torch.matmul(w, k)),),
     "head/averages-k"),
    ("head-averages-q", checks.check_head, (head_variant(average=lambda w, x, k, q, v: w @ q),), "head/averages-q"),
    ("head-averages-q-bmm", checks.check_head, (head_variant(average=lambda w, x, k, q, v: torch.bmm(w, q)),),
     "head/averages-q"),
    ("head-qk-swapped", checks.check_head, (head_variant(score=lambda q, k, C: k @ q.mT / 4),), "head/qk-swapped"),
    ("head-qk-swapped-bmm", checks.check_head,
     (head_variant(score=lambda q, k, C: torch.bmm(k, q.transpose(1, 2)) / math.sqrt(k.shape[-1])),), "head/qk-swapped"),
    # chapter 5: the real batch, checked against the head's own weights
    ("real-no-scale", checks.check_real_batch_weights, (real_weights(scale=1.0), REAL_HEAD, REAL_X), "head/no-scale"),
    ("real-no-scale-tensor", checks.check_real_batch_weights, (real_weights(scale=1.0)(), REAL_HEAD, REAL_X),
     "head/no-scale"),
    ("real-qk-swapped", checks.check_real_batch_weights, (real_weights(swap=True), REAL_HEAD, REAL_X), "head/qk-swapped"),
    ("real-sqrt-C", checks.check_real_batch_weights, (real_weights(scale=32**-0.5), REAL_HEAD, REAL_X), "head/sqrt-C"),
    ("real-fill-zero", checks.check_real_batch_weights, (real_weights(fill=0.0), REAL_HEAD, REAL_X), "mask/fill-zero"),
    ("real-value-as-v", checks.check_real_batch_weights, (real_sdpa(lambda q, k: REAL_HEAD.value(REAL_X)), REAL_HEAD,
     REAL_X), "real/head-output"),
    ("real-head-output", checks.check_real_batch_weights, (lambda: REAL_HEAD(REAL_X), REAL_HEAD, REAL_X),
     "real/head-output"),
    ("real-one-row", checks.check_real_batch_weights, (lambda: real_weights()()[:, -1], REAL_HEAD, REAL_X), "real/shape"),
    ("real-one-sequence", checks.check_real_batch_weights, (real_weights()()[0], REAL_HEAD, REAL_X), "real/shape"),
    ("real-sdpa-no-causal", checks.check_real_batch_weights, (real_sdpa(lambda q, k: torch.eye(8).expand(4, 8, 8),
     causal=False), REAL_HEAD, REAL_X), "sdpa/no-causal"),
    ("real-sdpa-float-mask", checks.check_real_batch_weights, (real_sdpa(lambda q, k: torch.eye(8).expand(4, 8, 8),
     causal=False, attn_mask=torch.tril(torch.ones(8, 8))), REAL_HEAD, REAL_X), "sdpa/float-mask"),
    # weights of a real batch, causal or not
    # chapter 5: F.scaled_dot_product_attention, one head
    # chapter 5: several heads, one call
    ("multihead-reversed", checks.check_multihead_sdpa, (multihead(order=lambda n: range(n - 1, -1, -1)),),
     "multihead/order"),
    ("multihead-rotated", checks.check_multihead_sdpa, (multihead(order=lambda n: [*range(1, n), 0]),), "multihead/order"),
    ("multihead-interleaved", checks.check_multihead_sdpa,
     (multihead(merge=lambda out: out.permute(0, 2, 3, 1).flatten(-2)),), "multihead/interleaved"),
    ("multihead-interleaved-stack", checks.check_multihead_sdpa,
     (multihead(merge=lambda out: torch.stack(out.unbind(1), dim=-1).flatten(-2)),), "multihead/interleaved"),
    ("multihead-reshape", checks.check_multihead_sdpa,
     (multihead(merge=lambda out: out.reshape(out.shape[0], out.shape[2], -1)),), "multihead/reshape-without-transpose"),
    ("multihead-view", checks.check_multihead_sdpa,
     (multihead(merge=lambda out: out.view(out.shape[0], out.shape[2], -1)),), "multihead/reshape-without-transpose"),
    ("multihead-4d", checks.check_multihead_sdpa, (multihead(merge=lambda out: out),), "multihead/not-transposed-back"),
    ("multihead-4d-contiguous", checks.check_multihead_sdpa, (multihead(merge=lambda out: out.contiguous()),),
     "multihead/not-transposed-back"),
    ("multihead-not-merged", checks.check_multihead_sdpa, (multihead(merge=lambda out: out.transpose(1, 2)),),
     "multihead/not-merged"),
    ("multihead-not-merged-permute", checks.check_multihead_sdpa,
     (multihead(merge=lambda out: out.permute(0, 2, 1, 3)),), "multihead/not-merged"),
    ("multihead-mean", checks.check_multihead_sdpa, (multihead(merge=lambda out: out.mean(1)),), "multihead/mean"),
    ("multihead-one-wide-head", checks.check_multihead_sdpa, (multihead_wide(four_d=True),), "multihead/one-wide-head"),
    ("multihead-one-wide-head-3d", checks.check_multihead_sdpa, (multihead_wide(four_d=False),),
     "multihead/one-wide-head"),
    ("multihead-stack-axis-2", checks.check_multihead_sdpa,
     (multihead(stack_dim=2, merge=lambda out: out.reshape(out.shape[0], out.shape[1], -1)),), "multihead/stack-axis"),
    ("multihead-stack-axis-2-transposed", checks.check_multihead_sdpa,
     (multihead(stack_dim=2, merge=lambda out: out.transpose(1, 2).reshape(out.shape[0], out.shape[1], -1)),),
     "multihead/stack-axis"),
    ("multihead-sum-over-n", checks.check_multihead_sdpa,
     (multihead(merge=lambda out: out.sum(dim=1) / out.shape[1]),), "multihead/mean"),
    ("multihead-by-hand", checks.check_multihead_sdpa, (multihead_by_hand,), "multihead/no-sdpa"),
    ("multihead-cat-heads", checks.check_multihead_sdpa, (lambda heads, x: torch.cat([h(x) for h in heads], -1),),
     "multihead/no-sdpa"),
    ("multihead-per-head", checks.check_multihead_sdpa, (multihead(per_head=True),), "multihead/one-call"),
    ("multihead-per-head-sdpa", checks.check_multihead_sdpa,
     (lambda heads, x: torch.cat([sdpa_with(is_causal=True)(h, x) for h in heads], -1),), "multihead/one-call"),
    ("multihead-3d", checks.check_multihead_sdpa, (multihead(flat=True),), "multihead/not-4d"),
    ("multihead-unused-sdpa", checks.check_multihead_sdpa, (lambda heads, x: (
        F.scaled_dot_product_attention(*[torch.zeros(1, 1, 1, 1)] * 3), torch.cat([h(x) for h in heads], -1))[1],),
     "multihead/unused-sdpa"),
    ("multihead-sdpa-then-own", checks.check_multihead_sdpa, (lambda heads, x: multihead()(heads, x).detach() * 0
                                                              + torch.cat([h(x) for h in heads], -1),),
     "multihead/unused-sdpa"),
    ("multihead-3d-cat", checks.check_multihead_sdpa, (multihead_batched_3d,), "multihead/not-4d"),
    ("multihead-not-causal", checks.check_multihead_sdpa, (multihead(is_causal=False),), "sdpa/no-causal"),
    ("multihead-float-mask", checks.check_multihead_sdpa,
     (lambda heads, x: multihead(attn_mask=_tril(x.shape[1]))(heads, x),), "sdpa/float-mask"),
    ("multihead-no-scale", checks.check_multihead_sdpa, (multihead(is_causal=True, scale=1.0),), "head/no-scale"),
    # what any check says about dtype, device, in-place changes and unfinished helpers
    ("helper-stub", checks.check_cumsum_average, (lambda x: unfinished(x),), "general/helper-not-implemented"),
    ("helper-stub-head", checks.check_head, (HeadCallingAStub,), "general/helper-not-implemented"),
    ("helper-stub-attend", checks.check_head, (head_attending(stub),), "general/helper-not-implemented"),
    ("not-callable", checks.check_one_way, (42,), "general/not-callable"),
    ("not-callable-head", checks.check_head, ("Head",), "general/not-callable"),
    ("float16", checks.check_softmax, (lambda z: softmax_safe(z).half(),), "general/dtype"),
    ("int64", checks.check_softmax, (lambda z: softmax_safe(z).long(),), "general/dtype"),
    ("float16-weights", checks.check_real_batch_weights, (real_weights()().half(), REAL_HEAD, REAL_X), "general/dtype"),
    ("int64-head", checks.check_previous_token_head, (head_dtype(torch.int64),), "general/dtype"),
    ("meta", checks.check_softmax, (lambda z: softmax_safe(z).to("meta"),), "general/device"),
    ("meta-weights", checks.check_real_batch_weights, (real_weights()().to("meta"), REAL_HEAD, REAL_X),
     "general/device"),
    ("meta-head", checks.check_previous_token_head, (previous_token_head().to("meta"),), "general/device"),
    ("float16-parts", checks.check_score_parts,
     (lambda m, i: [p.half() for p in score_parts(m, i)], PARTS_MODEL, PARTS_IDS), "general/dtype"),
    ("int64-parts", checks.check_score_parts,
     (lambda m, i: [p.long() for p in score_parts(m, i)], PARTS_MODEL, PARTS_IDS), "general/dtype"),
    ("zero-x", checks.check_cumsum_average, (lambda x: (average_cumsum(x.clone()), x.zero_())[0],),
     "general/changed-input"),
    ("div-q", checks.check_unit_scale, (lambda q, k: 2 * unit_scale(q.div_(2), k),), "general/changed-input"),
    ("sub-exp-z", checks.check_softmax,
     (lambda z: (lambda e: e / e.sum(-1, keepdim=True))(z.sub_(z.max(-1, keepdim=True).values).exp_()),),
     "general/changed-input"),
    ("masked-fill-scores", checks.check_padding_mask,
     (lambda s, p: torch.nan_to_num(F.softmax(s.masked_fill_((_tril(s.shape[-1]) == 0) | p[:, None, :], NEG), -1)),),
     "general/changed-input"),
    ("head-changes-x", checks.check_head, (in_place(lambda self, x: x.mul_(2)),), "general/changed-input"),
    ("head-zeroes-key", checks.check_head, (in_place(lambda self, x: self.key.weight.zero_()),), "general/changed-module"),
    ("head-fills-tril", checks.check_head, (in_place(lambda self, x: self.tril.fill_(1.0)),), "general/changed-module"),
    ("real-zeroes-key", checks.check_real_batch_weights, zeroing("key"), "general/changed-module"),
    ("parts-zeroes-key-data", checks.check_score_parts,  # on a copy: the check does not restore the weights
     (lambda m, i: (m.head.key.weight.data.zero_(), score_parts(m, i))[1], copy.deepcopy(PARTS_MODEL), PARTS_IDS),
     "general/changed-module"),
    # chapter 4 and 5: finite fills, named by what the weights show
    ("pad-fill-10", checks.check_padding_mask, (lambda s, p: pad_weights(s, p, fill=-10.0),), "pad/finite-fill"),
    ("pad-fill-100-rows-zeroed", checks.check_padding_mask,
     (lambda s, p: pad_weights(s, p, fill=-100.0, empty="multiply"),), "pad/finite-fill"),
    ("pad-one-future-key", checks.check_padding_mask,
     (lambda s, p: torch.nan_to_num(one_future_key(s.masked_fill(p[:, None, :], NEG))),), "pad/sees-hidden"),
    ("pad-one-padding-key", checks.check_padding_mask,
     (lambda s, p: pad_weights(s, p.index_put((torch.tensor(0), torch.tensor(1)), torch.tensor(False))),),
     "pad/sees-hidden"),
    ("head-fill-100", checks.check_head, (head_attending(lambda s: weights_ref(s, fill=-100.0)),), "mask/finite-fill"),
    ("head-fill-20-where", checks.check_head, (head_attending(lambda s: weights_ref(s, fill=-20.0, where=True)),),
     "mask/finite-fill"),
    ("head-fill-5", checks.check_head, (head_attending(lambda s: weights_ref(s, fill=-5.0)),), "mask/finite-fill"),
    ("real-fill-100", checks.check_real_batch_weights, (real_weights(fill=-100.0), REAL_HEAD, REAL_X), "mask/finite-fill"),
    # chapter 5: head mistakes named by measurement
    ("head-one-future-key", checks.check_head, (head_attending(one_future_key),), "head/sees-future"),
    ("real-one-future-key", checks.check_real_batch_weights,
     (lambda: one_future_key(REAL_HEAD.query(REAL_X) @ REAL_HEAD.key(REAL_X).mT / 4), REAL_HEAD, REAL_X),
     "head/sees-future"),
    ("head-mask-everything", checks.check_head, (head_attending(masked(lambda T: _tril(T) >= 0)),), "head/hides-key"),
    ("head-mask-one-past-key", checks.check_head,
     (head_attending(masked(lambda T: (_tril(T) == 0) | (_tril(T, -1) - _tril(T, -2)).bool())),),
     "head/hides-key"),
    ("head-scale-after-softmax", checks.check_head,
     (head_variant(score=lambda q, k, C: q @ k.mT, attend=lambda s, tril: Head.attend(s, tril) / 4),),
     "head/scale-after-softmax"),
    ("head-scale-on-output", checks.check_head,
     (head_variant(score=lambda q, k, C: q @ k.mT, average=lambda w, x, k, q, v: w @ v / k.shape[-1] ** 0.5),),
     "head/scale-after-softmax"),
    ("head-scale-03", checks.check_head, (head_scaled(lambda d, C: 0.3),), "head/other-scale"),
    ("head-scale-half-root", checks.check_head, (head_scaled(lambda d, C: 0.5 / math.sqrt(d)),), "head/other-scale"),
    ("head-scores-times-zero", checks.check_head, (head_scaled(lambda d, C: 0.0),), "head/ignores-scores"),
    ("head-uniform-causal", checks.check_head,
     (head_attending(lambda s: weights_ref(torch.zeros_like(s))),), "head/ignores-scores"),
    ("head-negative-scale", checks.check_head, (head_scaled(lambda d, C: -1 / math.sqrt(d)),), "head/other-scale"),
    ("head-dropout-on", checks.check_head, (head_attending(lambda s: F.dropout(weights_ref(s), 0.1)),), "head/random"),
    ("head-random-mask", checks.check_head,
     (head_attending(lambda s: weights_ref(s) * torch.bernoulli(torch.full_like(s, 0.9)) / 0.9),), "head/random"),
    ("head-instance", checks.check_head, (Head(384, 16, 8),), "head/instance"),
    ("head-reference-instance", checks.check_head, (ReferenceHead(32, 8, 8),), "head/instance"),
    ("head-plain-class", checks.check_head, (PlainHead,), "head/not-a-module"),
    ("head-no-super", checks.check_head, (type("Head", (), {"__init__": lambda self, C, hs, bs: None}),),
     "head/not-a-module"),
    # chapter 5: the real batch's own inputs
    ("real-head-none", checks.check_real_batch_weights, (real_weights(), None, REAL_X), "real/bad-head"),
    ("real-head-lambda", checks.check_real_batch_weights, (real_weights(), lambda x: x, REAL_X), "real/bad-head"),
    ("real-x-numpy", checks.check_real_batch_weights, (real_weights(), REAL_HEAD, REAL_X.numpy()), "real/bad-x"),
    ("real-x-list", checks.check_real_batch_weights, (real_weights(), REAL_HEAD, REAL_X.tolist()), "real/bad-x"),
    ("real-x-width", checks.check_real_batch_weights, (real_weights(), REAL_HEAD, REAL_X[..., :16]), "real/bad-x"),
    ("real-x-meta", checks.check_real_batch_weights, (real_weights(), REAL_HEAD, REAL_X.to("meta")), "real/bad-x"),
    ("real-x-nan", checks.check_real_batch_weights, (torch.zeros(4, 8, 8), REAL_HEAD, REAL_X_NAN), "real/bad-x"),
    # chapter 5: several heads, a mask given the wrong way
    ("multihead-attn-mask-none", checks.check_multihead_sdpa, (multihead(attn_mask=None),), "sdpa/no-causal"),
    ("multihead-per-head-float-mask", checks.check_multihead_sdpa,
     (lambda heads, x: multihead(per_head=True, attn_mask=_tril(x.shape[1]))(heads, x),), "sdpa/float-mask"),
    # chapter 6: the mean weight at each distance
    ("distance-per-sequence", checks.check_weight_by_distance,
     (lambda w: torch.stack([d.mean(-1) for d in diagonals(w)], -1),), "distance/per-sequence"),
    ("distance-per-sequence-loop", checks.check_weight_by_distance,
     (lambda w: torch.stack([by_distance_loop(w[b : b + 1]) for b in range(len(w))]),), "distance/per-sequence"),
    ("distance-last-row", checks.check_weight_by_distance, (lambda w: w[:, -1].flip(-1).mean(0),), "distance/last-row"),
    ("distance-last-row-loop", checks.check_weight_by_distance,
     (lambda w: torch.stack([w[:, -1, w.shape[-1] - 1 - d].mean() for d in range(w.shape[-1])]),), "distance/last-row"),
    ("distance-offset-plus", checks.check_weight_by_distance,
     (lambda w: torch.stack([torch.diagonal(w, d, -2, -1).mean() for d in range(w.shape[-1])]),), "distance/wrong-side"),
    ("distance-j-minus-i", checks.check_weight_by_distance,
     (lambda w: by_distance_masks(w, distance=lambda i, j: j - i),), "distance/wrong-side"),
    ("distance-abs", checks.check_weight_by_distance,
     (lambda w: by_distance_masks(w, distance=lambda i, j: (i - j).abs()),), "distance/both-sides"),
    ("distance-abs-loop", checks.check_weight_by_distance, (by_distance_both_sides,), "distance/both-sides"),
    ("distance-over-T", checks.check_weight_by_distance,
     (lambda w: torch.stack([d.sum() / w.shape[0] / w.shape[1] for d in diagonals(w)]),), "distance/all-rows"),
    ("distance-masks-over-T", checks.check_weight_by_distance,
     (lambda w: by_distance_masks(w, normalize="rows"),), "distance/all-rows"),
    ("distance-sum", checks.check_weight_by_distance, (lambda w: by_distance_masks(w, normalize="sum"),), "distance/sum"),
    ("distance-sum-batch-mean", checks.check_weight_by_distance,
     (lambda w: torch.stack([d.sum(-1).mean() for d in diagonals(w)]),), "distance/sum"),
    ("distance-to-one", checks.check_weight_by_distance,
     (lambda w: (lambda p: p / p.sum())(by_distance_loop(w)),), "distance/to-one"),
    ("distance-normalize", checks.check_weight_by_distance,
     (lambda w: F.normalize(torch.stack([d.mean() for d in diagonals(w)]), p=1, dim=0),), "distance/to-one"),
    ("distance-key-position", checks.check_weight_by_distance, (lambda w: w.mean(dim=(0, 1)),), "distance/key-position"),
    ("distance-column-sums", checks.check_weight_by_distance,
     (lambda w: w.sum(dim=1).mean(dim=0) / w.shape[1],), "distance/key-position"),
    # chapter 6: the scores in token and position parts
    ("parts-swapped", checks.check_score_parts, (lambda m, i: score_parts(m, i, swap=True), PARTS_MODEL, PARTS_IDS),
     "parts/swapped"),
    ("parts-swapped-order", checks.check_score_parts,
     (lambda m, i: (lambda p: [p[0], p[2], p[1], p[3]])(score_parts_einsum(m, i)), PARTS_MODEL, PARTS_IDS),
     "parts/swapped"),
    ("parts-no-scale", checks.check_score_parts, (lambda m, i: score_parts(m, i, scale=False), PARTS_MODEL, PARTS_IDS),
     "parts/no-scale"),
    ("parts-no-scale-einsum", checks.check_score_parts,
     (lambda m, i: score_parts_einsum(m, i, scale=False), PARTS_MODEL, PARTS_IDS), "parts/no-scale"),
    ("parts-masked", checks.check_score_parts, (lambda m, i: score_parts(m, i, mask=True), PARTS_MODEL, PARTS_IDS),
     "parts/masked"),
    ("parts-times-tril", checks.check_score_parts,
     (lambda m, i: score_parts_einsum(m, i, tril=True), PARTS_MODEL, PARTS_IDS), "parts/masked"),
    ("parts-weights", checks.check_score_parts, (lambda m, i: score_parts(m, i, softmax=True), PARTS_MODEL, PARTS_IDS),
     "parts/weights"),
    ("parts-weights-einsum", checks.check_score_parts,
     (lambda m, i: score_parts_einsum(m, i, softmax=True), PARTS_MODEL, PARTS_IDS), "parts/weights"),
    ("parts-sum-only", checks.check_score_parts,
     (lambda m, i: [sum(score_parts(m, i))] + [torch.zeros_like(p) for p in score_parts(m, i)[1:]],
      PARTS_MODEL, PARTS_IDS), "parts/sum"),
    ("parts-quarters", checks.check_score_parts,
     (lambda m, i: [p / 4 for p in whole_scores_four_times(m, i)], PARTS_MODEL, PARTS_IDS), "parts/sum"),
    ("parts-one-zero", checks.check_score_parts,
     (lambda m, i: score_parts(m, i)[:3] + [torch.zeros(i.shape[0], i.shape[1], i.shape[1])], PARTS_MODEL, PARTS_IDS),
     "parts/differ"),
    ("parts-whole-scores", checks.check_score_parts, (whole_scores_four_times, PARTS_MODEL, PARTS_IDS), "parts/differ"),
    ("parts-three", checks.check_score_parts, (lambda m, i: score_parts(m, i)[:3], PARTS_MODEL, PARTS_IDS),
     "parts/not-four"),
    ("parts-stacked", checks.check_score_parts, (lambda m, i: torch.stack(score_parts(m, i)), PARTS_MODEL, PARTS_IDS),
     "parts/not-four"),
    ("parts-no-batch", checks.check_score_parts, (lambda m, i: [p[0] for p in score_parts(m, i)], PARTS_MODEL, PARTS_IDS),
     "parts/shape"),
    ("parts-flattened", checks.check_score_parts,
     (lambda m, i: [p.flatten(1) for p in score_parts_einsum(m, i)], PARTS_MODEL, PARTS_IDS), "parts/shape"),
    # chapter 6: a head that attends to the previous position
    ("previous-linear", checks.check_previous_token_head, (nn.Linear(8, 8),), "previous/not-a-head"),
    ("previous-own-names", checks.check_previous_token_head,
     (lambda: type("Head", (nn.Module,), {})(),), "previous/not-a-head"),
    ("previous-data-transposed", checks.check_previous_token_head,
     (head_with_data("key", (torch.eye(16, 8) @ shift(8, 1)).T),), "previous/weight-shape"),
    ("previous-parameter-transposed", checks.check_previous_token_head,
     (lambda: head_with_parameter("query", 20 * torch.eye(8, 16)),), "previous/weight-shape"),
    ("previous-empty", checks.check_previous_token_head, (lambda: ReferenceHead(0, 0, 0),), "previous/too-small"),
    ("previous-block-1", checks.check_previous_token_head, (ReferenceHead(1, 1, 1),), "previous/too-small"),
    ("previous-C-small", checks.check_previous_token_head, (ReferenceHead(4, 4, 8),), "previous/one-hot-size"),
    ("previous-C-small-2", checks.check_previous_token_head, (ReferenceHead(6, 8, 8),), "previous/one-hot-size"),
    ("previous-next", checks.check_previous_token_head, (head_with(20 * torch.eye(8), shift(8, -1)),), "previous/next"),
    ("previous-next-query", checks.check_previous_token_head, (head_with(20 * shift(8, 1), torch.eye(8)),),
     "previous/next"),
    ("previous-self", checks.check_previous_token_head, (head_with(5 * torch.eye(8), 5 * torch.eye(8)),), "previous/self"),
    ("previous-self-mostly", checks.check_previous_token_head,
     (head_with(10 * torch.eye(8), 10 * torch.eye(8) + 2 * shift(8, 1)),), "previous/self"),
    ("previous-two-back", checks.check_previous_token_head, (head_with(20 * torch.eye(8), shift(8, 2)),),
     "previous/two-back"),
    ("previous-two-back-query", checks.check_previous_token_head, (head_with(20 * shift(8, -2), torch.eye(8)),),
     "previous/two-back"),
    ("previous-soft", checks.check_previous_token_head, (head_with(2 * torch.eye(8), shift(8, 1)),), "previous/too-soft"),
    ("previous-soft-5", checks.check_previous_token_head, (head_with(5 * torch.eye(8), shift(8, 1)),), "previous/too-soft"),
    ("previous-zeros", checks.check_previous_token_head, (head_with(torch.zeros(8, 8), torch.zeros(8, 8)),),
     "previous/weak"),
    ("previous-untouched", checks.check_previous_token_head, (seeded(lambda: ReferenceHead(8, 8, 8)),), "previous/weak"),
    ("cache-mask-first", checks.check_attend_cached, (functools.partial(step_by_hand, mask="first"),), "cache/mask-first"),
    ("cache-mask-first-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, is_causal=True),), "cache/mask-first"),
    ("cache-mask-self", checks.check_attend_cached, (functools.partial(step_by_hand, mask="self"),), "cache/mask-self"),
    ("cache-mask-self-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, attend="new"),), "cache/mask-self"),
    ("cache-untrimmed-out", checks.check_attend_cached, (functools.partial(step_by_hand, attend="all"),), "cache/untrimmed"),
    ("cache-untrimmed-out-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, attend="all"),), "cache/untrimmed"),
    ("cache-trim-newest-out", checks.check_attend_cached, (functools.partial(step_by_hand, attend="oldest"),), "cache/trim-newest"),
    ("cache-trim-newest-out-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, attend="oldest"),), "cache/trim-newest"),
    ("cache-no-scale", checks.check_attend_cached, (functools.partial(step_by_hand, scale=False),), "cache/no-scale"),
    ("cache-no-scale-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, scale=1.0),), "cache/no-scale"),
    ("cache-sqrt-C", checks.check_attend_cached, (functools.partial(step_by_hand, scale="C"),), "cache/sqrt-C"),
    ("cache-sqrt-C-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, scale="C"),), "cache/sqrt-C"),
    ("cache-softmax-query", checks.check_attend_cached, (functools.partial(step_by_hand, dim=-2),), "cache/softmax-dim"),
    ("cache-softmax-query-2", checks.check_attend_cached, (functools.partial(step_by_hand, dim=2),), "cache/softmax-dim"),
    ("cache-short", checks.check_attend_cached, (functools.partial(step_by_hand, trim="short"),), "cache/short-cache"),
    ("cache-short-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, trim="short"),), "cache/short-cache"),
    ("cache-cat-heads", checks.check_attend_cached, (functools.partial(step_by_hand, axis=1),), "cache/cat-axis"),
    ("cache-cat-channels", checks.check_attend_cached, (functools.partial(step_sdpa, axis=-1),), "cache/cat-axis"),
    ("cache-out-only", checks.check_attend_cached, (functools.partial(step_by_hand, returns="out"),), "cache/not-a-pair"),
    ("cache-flat", checks.check_attend_cached, (functools.partial(step_by_hand, returns="flat"),), "cache/not-a-pair"),
    ("cache-untrimmed", checks.check_attend_cached, (functools.partial(step_by_hand, trim="none", attend="all"),), "cache/untrimmed-cache"),
    ("cache-untrimmed-sdpa", checks.check_attend_cached, (functools.partial(step_sdpa, trim="none"),), "cache/untrimmed-cache"),
    ("cache-trim-newest", checks.check_attend_cached, (functools.partial(step_by_hand, trim="first"),), "cache/trim-newest-cache"),
    ("cache-trim-newest-narrow", checks.check_attend_cached, (functools.partial(step_by_hand, trim="narrow"),), "cache/trim-newest-cache"),
    ("embed-from-zero", checks.check_embed_next, (functools.partial(embed_rows, row="zero"),), "embed/from-zero"),
    ("embed-from-zero-weights", checks.check_embed_next, (functools.partial(embed_weights, row="zero"),), "embed/from-zero"),
    ("embed-wrapped", checks.check_embed_next, (functools.partial(embed_rows, row="wrapped"),), "embed/wrapped"),
    ("embed-wrapped-weights", checks.check_embed_next, (functools.partial(embed_weights, row="wrapped"),),
     "embed/wrapped"),
    ("embed-one-more", checks.check_embed_next, (functools.partial(embed_rows, row="plus"),), "embed/one-more"),
    ("embed-one-more-weights", checks.check_embed_next, (functools.partial(embed_weights, row="plus"),), "embed/one-more"),
    ("embed-one-less", checks.check_embed_next, (functools.partial(embed_rows, row="minus"),), "embed/one-less"),
    ("embed-one-less-weights", checks.check_embed_next, (functools.partial(embed_weights, row="minus"),), "embed/one-less"),
    ("embed-no-token", checks.check_embed_next, (functools.partial(embed_rows, token=False),), "embed/no-token"),
    ("embed-no-token-weights", checks.check_embed_next, (functools.partial(embed_weights, token=False),), "embed/no-token"),
    ("embed-past-the-end", checks.check_embed_next, (functools.partial(embed_rows, row="uncapped"),), "embed/past-the-end"),
    ("embed-past-the-end-weights", checks.check_embed_next, (functools.partial(embed_weights, row="uncapped"),), "embed/past-the-end"),
    ("split-view-only", checks.check_split_heads, (functools.partial(split_view, how="view-only"),), "split/view-only"),
    ("split-view-only-reshape", checks.check_split_heads, (functools.partial(split_reshape, how="view-only"),),
     "split/view-only"),
    ("split-no-transpose", checks.check_split_heads, (functools.partial(split_view, how="no-transpose"),),
     "split/no-transpose"),
    ("split-no-transpose-unflatten", checks.check_split_heads, (functools.partial(split_reshape, how="no-transpose"),),
     "split/no-transpose"),
    ("split-interleaved", checks.check_split_heads, (functools.partial(split_view, how="interleaved"),),
     "split/interleaved"),
    ("split-interleaved-slices", checks.check_split_heads, (functools.partial(split_reshape, how="interleaved"),),
     "split/interleaved"),
    ("split-axes-1-3", checks.check_split_heads, (functools.partial(split_view, how="axes-1-3"),), "split/wrong-axes"),
    ("split-axes-2-3-permute", checks.check_split_heads, (functools.partial(split_reshape, how="axes-2-3"),),
     "split/wrong-axes"),
    ("layer-no-proj", checks.check_multi_head, (functools.partial(layer_by_hand, proj=False),), "layer/no-proj"),
    ("layer-no-proj-list", checks.check_multi_head, (functools.partial(layer_by_list, proj=False),), "layer/no-proj"),
    ("layer-scale-C", checks.check_multi_head, (functools.partial(layer_by_hand, scale="C"),), "layer/scale-C"),
    ("layer-scale-C-list", checks.check_multi_head, (functools.partial(layer_by_list, scale="C"),), "layer/scale-C"),
    ("layer-no-scale", checks.check_multi_head, (functools.partial(layer_by_hand, scale="none"),), "layer/no-scale"),
    ("layer-no-scale-list", checks.check_multi_head, (functools.partial(layer_by_list, scale="none"),),
     "layer/no-scale"),
    ("layer-split-view", checks.check_multi_head, (functools.partial(layer_by_hand, split="view"),),
     "layer/split-view-only"),
    ("layer-split-view-list", checks.check_multi_head, (functools.partial(layer_by_list, split="view"),),
     "layer/split-view-only"),
    ("layer-merge-view", checks.check_multi_head, (functools.partial(layer_by_hand, merge="view"),),
     "layer/merge-view-only"),
    ("layer-merge-stack-view", checks.check_multi_head, (functools.partial(layer_by_list, merge="stack-view"),),
     "layer/merge-view-only"),
    ("layer-interleaved", checks.check_multi_head, (functools.partial(layer_by_hand, merge="interleaved"),),
     "layer/interleaved"),
    ("layer-interleaved-list", checks.check_multi_head, (functools.partial(layer_by_list, merge="interleaved"),),
     "layer/interleaved"),
    ("layer-order-reversed", checks.check_multi_head, (functools.partial(layer_by_hand, order="reversed"),),
     "layer/order"),
    ("layer-order-swapped-list", checks.check_multi_head, (functools.partial(layer_by_list, order="swap01"),),
     "layer/order"),
    ("layer-axes-1-3-sdpa", checks.check_multi_head, (functools.partial(layer_wrong_axes, axes=(1, 3)),),
     "layer/wrong-axes"),
    ("layer-axes-2-3-by-hand", checks.check_multi_head, (functools.partial(layer_wrong_axes, axes=(2, 3), sdpa=False),),
     "layer/wrong-axes"),
    ("split-heads-first-transposed", checks.check_split_heads,
     (functools.partial(split_view, how="heads-first-transposed"),), "split/view-heads-first-transposed"),
    ("split-heads-first-permuted", checks.check_split_heads,
     (functools.partial(split_reshape, how="heads-first-transposed"),), "split/view-heads-first-transposed"),
    ("split-hs-heads-1-2", checks.check_split_heads, (functools.partial(split_view, how="hs-heads-1-2"),),
     "split/hs-heads-transposed"),
    ("split-hs-heads-1-3-permute", checks.check_split_heads, (functools.partial(split_reshape, how="hs-heads-1-3"),),
     "split/hs-heads-transposed"),
    ("layer-no-transpose-sdpa", checks.check_multi_head, (functools.partial(layer_sdpa, transpose=False),),
     "layer/no-transpose"),
    ("layer-no-transpose-by-hand", checks.check_multi_head, (functools.partial(layer_by_hand, split="none"),),
     "layer/no-transpose"),
    ("layer-no-mask-sdpa", checks.check_multi_head, (functools.partial(layer_sdpa, causal=False),), "layer/no-mask"),
    ("layer-no-mask-by-hand", checks.check_multi_head, (functools.partial(layer_by_hand, mask="none"),),
     "layer/no-mask"),
    ("layer-mask-reversed", checks.check_multi_head, (functools.partial(layer_by_hand, mask="reversed"),),
     "layer/mask-reversed"),
    ("layer-mask-reversed-sdpa", checks.check_multi_head, (functools.partial(layer_sdpa, mask="reversed"),),
     "layer/mask-reversed"),
    ("layer-softmax-dim", checks.check_multi_head, (functools.partial(layer_by_hand, dim=-2),), "layer/softmax-dim"),
    ("layer-softmax-dim-2", checks.check_multi_head, (functools.partial(layer_by_hand, dim=2),), "layer/softmax-dim"),
    ("layer-scale-times", checks.check_multi_head, (functools.partial(layer_by_hand, scale="times"),),
     "layer/scale-times"),
    ("layer-scale-times-sdpa", checks.check_multi_head,
     (lambda x, a, p, nh: layer_sdpa(x, a, p, nh, scale=math.sqrt(x.shape[-1] // nh)),), "layer/scale-times"),
    ("layer-mask-block", checks.check_multi_head, (functools.partial(layer_by_hand, mask="block"),),
     "layer/hint-mask-size"),
    ("layer-mask-block-where", checks.check_multi_head, (functools.partial(layer_by_hand, mask="block-where"),),
     "layer/hint-mask-size"),
    ("layer-kqv", checks.check_multi_head, (functools.partial(layer_by_hand, parts="kqv"),), "layer/parts-order"),
    ("layer-vkq-list", checks.check_multi_head, (functools.partial(layer_by_list, parts="vkq"),), "layer/parts-order"),
    # issue 35's fifth read: the mistakes reviewers tried that no message named
    ("pad-softmax-dim-2", checks.check_padding_mask, (pad_over_queries(torch.nan_to_num),), "pad/softmax-dim"),
    ("pad-softmax-dim-0-of-rows", checks.check_padding_mask,
     (pad_over_queries(lambda w: torch.where(torch.isnan(w), torch.zeros_like(w), w)),), "pad/softmax-dim"),
    ("real-ones-v", checks.check_real_batch_weights,
     (real_sdpa(lambda q, k: torch.ones(q.shape[0], q.shape[1], q.shape[1])), REAL_HEAD, REAL_X), "real/ones-v"),
    ("real-ones-v-2d", checks.check_real_batch_weights,
     (real_sdpa(lambda q, k: torch.ones(q.shape[1], q.shape[1]).expand(q.shape[0], -1, -1)), REAL_HEAD, REAL_X),
     "real/ones-v"),
    ("multihead-cat-view", checks.check_multihead_sdpa, (multihead_cat_viewed(back="reshape"),),
     "multihead/viewed-without-transpose"),
    ("multihead-cat-view-transposed-back", checks.check_multihead_sdpa, (multihead_cat_viewed(back="transpose"),),
     "multihead/viewed-without-transpose"),
    ("multihead-sum", checks.check_multihead_sdpa, (multihead(merge=lambda out: out.sum(1)),), "multihead/sum"),
    ("multihead-sum-loop", checks.check_multihead_sdpa, (lambda heads, x: sum(h(x) for h in heads),), "multihead/sum"),
    ("distance-default-dims", checks.check_weight_by_distance,
     (lambda w: torch.stack([torch.diagonal(w, offset=-d).mean() for d in range(w.shape[-1])]),),
     "distance/default-dims"),
    ("distance-default-dims-loop", checks.check_weight_by_distance,
     (lambda w: torch.stack([w.diagonal(-d).sum() / w.diagonal(-d).numel() for d in range(w.shape[-1])]),),
     "distance/default-dims"),
    ("distance-flipped-mean", checks.check_weight_by_distance, (lambda w: w.flip(-1).mean((0, 1)),),
     "distance/flipped-mean"),
    ("distance-flipped-mean-sum", checks.check_weight_by_distance,
     (lambda w: w.flip(-1).sum((0, 1)) / (w.shape[0] * w.shape[1]),), "distance/flipped-mean"),
    ("parts-by-dk", checks.check_score_parts,
     (lambda m, i: [p / m.head.key.weight.shape[0] ** 0.5 for p in score_parts(m, i)], PARTS_MODEL, PARTS_IDS),
     "parts/by-dk"),
    ("parts-by-dk-einsum", checks.check_score_parts,
     (lambda m, i: [p / 8 for p in score_parts_einsum(m, i)], PARTS_MODEL, PARTS_IDS), "parts/by-dk"),
    ("parts-k-at-q", checks.check_score_parts,
     (lambda m, i: [p.transpose(-2, -1) for p in score_parts(m, i)], PARTS_MODEL, PARTS_IDS), "parts/transposed"),
    ("parts-k-at-q-mT", checks.check_score_parts,
     (lambda m, i: [p.mT for p in score_parts_einsum(m, i)], PARTS_MODEL, PARTS_IDS), "parts/transposed"),
    ("previous-no-grad", checks.check_previous_token_head, (previous_head_without_no_grad,), "previous/no-grad"),
    ("previous-no-grad-fill", checks.check_previous_token_head,
     (lambda: ReferenceHead(8, 8, 8).query.weight.mul_(20),), "previous/no-grad"),
    ("previous-assigned", checks.check_previous_token_head, (previous_head_assigned,), "previous/assigned"),
    ("previous-assigned-query", checks.check_previous_token_head,
     (lambda: setattr(ReferenceHead(8, 8, 8).query, "weight", 20 * torch.eye(8)),), "previous/assigned"),
    ("previous-none", checks.check_previous_token_head, (lambda: None,), "previous/none"),
    ("previous-none-built", checks.check_previous_token_head, (previous_head_not_returned,), "previous/none"),
    ("previous-negative", checks.check_previous_token_head, (lambda: head_with(-20 * torch.eye(8), shift(8, 1)),),
     "previous/negative"),
    ("previous-negative-key", checks.check_previous_token_head,
     (lambda: head_with(torch.eye(8), -20 * shift(8, 1)),), "previous/negative"),
]

# the ids of the messages the mistake tests produced in this session (see the last test)
RAISED: set[str] = set()


def _produce(check, args) -> checks.CheckFailed:
    with pytest.raises(AssertionError) as info:
        check(*args)
    assert isinstance(info.value, checks.CheckFailed), info.value
    RAISED.add(info.value.mistake)
    return info.value


@pytest.mark.filterwarnings("ignore::UserWarning")  # x.T on 3-D, softmax without dim: the mistakes warn
@pytest.mark.parametrize("check, args, mistake", [w[1:] for w in WRONG], ids=[w[0] for w in WRONG])
def test_each_mistake_is_named(check, args, mistake, capsys):
    failure = _produce(check, args)
    assert failure.mistake == mistake, str(failure)
    # the message is its template filled in: every piece of the template's own text, in order, with
    # anything in each field; a hint follows the line that says what raised
    pattern = _filled(checks.MISTAKES[mistake])
    assert re.match(pattern, str(failure), re.S) or re.search("\n  hint: " + pattern, str(failure), re.S), str(failure)
    assert capsys.readouterr().out == ""  # no pass line for a wrong answer


def _filled(template: str) -> str:
    """A regular expression for the messages ``template`` makes: its text, and anything for a field."""
    return ".*?".join(re.escape(text) for text in re.split(r"\{[^{}]*\}", template))


def test_every_message_has_words_of_its_own_to_recognize_it_by():
    for mistake, template in checks.MISTAKES.items():
        assert "{{" not in template, mistake  # _filled reads every brace as a field
        words = re.sub(r"\{[^{}]*\}", "", template)
        assert len(words.split()) >= 4, (mistake, template)


def test_each_message_is_tested_in_two_code_forms():
    forms = collections.Counter(w[3] for w in WRONG)
    assert set(forms) <= set(checks.MISTAKES), set(forms) - set(checks.MISTAKES)
    assert {m: n for m, n in forms.items() if n < 2} == {}
    assert set(checks.MISTAKES) - set(forms) == set()


def recording(answer, seen):
    """``answer``, keeping a copy of the first tensor argument of every call in ``seen``."""

    def recorded(*args):
        seen.append(next(a for a in args if isinstance(a, torch.Tensor)).clone())
        return answer(*args)

    return recorded


def _row(v):
    return "[" + ", ".join(f"{n:.4f}" for n in v[:4].tolist()) + ", ...]"


def test_a_named_mistake_shows_the_learners_numbers_against_the_reference():
    seen = []
    failure = _produce(checks.check_cumsum_average,
                       (recording(lambda x: x.mean(dim=1, keepdim=True).expand_as(x), seen),))
    x = seen[0]  # the check's first input
    expected = x.double().cumsum(1) / torch.arange(1, 9).view(1, 8, 1)
    got = x.double().mean(1, keepdim=True).expand_as(x)
    diff = (got - expected).abs()
    b, t, c = (int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    message = str(failure)
    assert f"largest difference {diff.max():.4g} at index [{b}, {t}, {c}]" in message
    assert f"expected[{b}, {t}, :] = {_row(expected[b, t])}" in message
    assert f"got[{b}, {t}, :]      = {_row(got[b, t])}" in message


def test_an_unnamed_difference_is_shown_where_it_is_largest():
    def almost(x):  # right, but for two entries of the check's first input
        out = average_cumsum(x)
        if out.shape == (4, 8, 384):
            out[1, 2, 3] += 0.5
            out[0, 0, 0] += 0.25
        return out

    seen = []
    failure = _produce(checks.check_cumsum_average, (recording(almost, seen),))
    assert failure.mistake == "general/differ"
    expected = seen[0].double().cumsum(1) / torch.arange(1, 9).view(1, 8, 1)
    got = almost(seen[0]).double()
    assert str(failure).splitlines()[1:4] == [
        "  largest difference 0.5 at index [1, 2, 3]",
        f"  expected[1, 2, :] = {_row(expected[1, 2])}",
        f"  got[1, 2, :]      = {_row(got[1, 2])}",
    ]
    assert _row(got[1, 2]) != _row(expected[1, 2])


def test_an_error_names_the_learners_function_its_inputs_and_the_cause():
    def causal_average(x):
        return x @ torch.ones(3, 3)

    failure = _produce(checks.check_cumsum_average, (causal_average,))
    assert "your `causal_average` raised RuntimeError" in str(failure)
    assert "x of shape (4, 8, 384)" in str(failure)
    assert isinstance(failure.__cause__, RuntimeError)


def test_a_padding_nan_row_names_batch_row_and_why():
    failure = _produce(checks.check_padding_mask, (lambda s, p: pad_weights(s, p, empty=None),))
    assert str(failure).startswith("nan in batch 1, row 0: that sequence has 2 padding tokens on the left")


def test_a_weak_previous_token_head_reports_its_weight_on_t_minus_1():
    failure = _produce(checks.check_previous_token_head, (head_with(2 * torch.eye(8), shift(8, 1)),))
    # row 7 is the weakest: e^(2 / √8) against 7 other keys at e^0
    p = math.exp(2 / math.sqrt(8)) / (math.exp(2 / math.sqrt(8)) + 7)
    assert f"row 7 puts only {p:.2f} on t - 1" in str(failure)


# ---------------------------------------------------------------- a stub is answered kindly

STUBS = [
    (checks.check_cumsum_average, (stub,), "stub"),
    (checks.check_one_way, (stub,), "stub"),
    (checks.check_unit_scale, (stub,), "stub"),
    (checks.check_softmax, (stub,), "stub"),
    (checks.check_padding_mask, (stub,), "stub"),
    (checks.check_head, (StubHead,), "StubHead"),
    (checks.check_head, (StubForwardHead,), "StubForwardHead"),
    (checks.check_head, (None,), "Head"),
    (checks.check_multihead_sdpa, (stub,), "stub"),
    (checks.check_real_batch_weights, (stub, REAL_HEAD, REAL_X), "stub"),
    (checks.check_real_batch_weights, (None, REAL_HEAD, REAL_X), "weights"),
    (checks.check_weight_by_distance, (stub,), "stub"),
    (checks.check_score_parts, (stub, PARTS_MODEL, PARTS_IDS), "stub"),
    (checks.check_previous_token_head, (stub,), "stub"),
    (checks.check_split_heads, (stub,), "stub"),
    (checks.check_attend_cached, (stub,), "stub"),
    (checks.check_embed_next, (stub,), "stub"),
    (checks.check_multi_head, (stub,), "stub"),
]


@pytest.mark.parametrize("check, args, name", STUBS)
def test_a_stub_says_not_yet_implemented_and_returns_none(check, args, name, capsys):
    assert check(*args) is None
    out = capsys.readouterr().out
    assert " ".join(out.split()) == f"✗ not yet implemented: fill in `{name}` above, then run this cell again."
    assert max(len(line) for line in out.splitlines()) <= checks.LINE_WIDTH


@pytest.mark.parametrize("check, args, name", STUBS)
def test_in_strict_mode_a_stub_fails(check, args, name, capsys):
    with pytest.raises(AssertionError, match=f"^not yet implemented: fill in `{name}`$"):
        check(*args, strict=True)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("check, kwargs", [
    (checks.check_head, dict(Head=None)),
    (checks.check_softmax, dict(fn=None)),
    (checks.check_real_batch_weights, dict(weights=None, head=REAL_HEAD, x=REAL_X)),
    (checks.check_previous_token_head, dict(head=None)),
])
def test_an_answer_of_none_by_keyword_is_not_yet_implemented(check, kwargs, capsys):
    assert check(**kwargs) is None
    assert "not yet implemented" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="^not yet implemented"):
        check(**kwargs, strict=True)


def test_the_reference_is_the_heads_before_its_forward_ran():
    """A head that zeroes its own key weights is told so; it is not compared with its zeroed self."""
    failure = _produce(checks.check_head, (in_place(lambda self, x: self.key.weight.zero_()),))
    assert "changed self.key.weight while it ran" in str(failure)


def test_every_check_has_a_stub_case_and_a_keyword_only_strict():
    names = [n for n in checks.__all__ if n.startswith("check_")]
    assert {check.__name__ for check, _, _ in STUBS} == set(names)
    for name in names:
        parameter = inspect.signature(getattr(checks, name)).parameters["strict"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is False


# every ninth wrong answer; not one that counts its calls or keeps state, whose message the first run changes
SAME_TWICE = [w for w in WRONG if w[3] not in ("general/counter", "general/kept-state", "head/kept-state")][::9]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("check, args, mistake", [w[1:] for w in SAME_TWICE], ids=[w[0] for w in SAME_TWICE])
def test_in_strict_mode_a_wrong_answer_fails_with_the_same_message(check, args, mistake):
    learner = _produce(functools.partial(check, seed=checks.SEED), args)  # the inputs strict mode draws
    with pytest.raises(AssertionError) as info:
        functools.partial(check, strict=True)(*args)
    assert str(info.value) == str(learner).split("\n  (the check drew its inputs with seed=")[0]


def test_fresh_copy_ignores_a_learners_redefinition(monkeypatch, capsys):
    monkeypatch.setattr(checks, "check_head", lambda Head, **kwargs: print("✓ passed") or True)
    assert checks.check_head(StubHead, strict=True) is True  # the redefinition fools the imported module
    graded = checks.fresh()
    assert graded is not checks and sys.modules["attention_lab.checks"] is checks
    with pytest.raises(AssertionError, match="not yet implemented: fill in `StubHead`"):
        graded.check_head(StubHead, strict=True)
    with pytest.raises(AssertionError, match="no 1/√d_k scaling"):
        graded.check_head(head_scaled(lambda d, C: 1.0), strict=True)
    assert graded.check_head(Head, strict=True) is True
    assert graded.fresh().check_head is not graded.check_head


def test_fresh_copy_ignores_a_learners_change_inside_the_package(monkeypatch):
    monkeypatch.setattr(checks.engine, "_matches", lambda got, candidate: True)  # every answer "matches"
    wrong = head_scaled(lambda d, C: 1.0)
    assert checks.check_head(wrong, strict=True) is True  # the change fools the imported package
    with pytest.raises(AssertionError, match="no 1/√d_k scaling"):
        checks.fresh().check_head(wrong, strict=True)


def test_fresh_copy_loads_every_module_of_the_package_again():
    graded = checks.fresh()
    modules = ["engine", "running", "hints", "references", "heads", *(f"chapter{n}" for n in range(1, 9))]
    for name in modules:
        mine, copy_ = getattr(checks, name), getattr(graded, name)
        assert copy_ is not mine and copy_.__file__ == mine.__file__, name
    assert graded.chapter5.running is graded.running and graded.CheckFailed is not checks.CheckFailed
    assert [name for name in sys.modules if "_fresh_checks" in name] == []


def test_a_grader_sets_the_seed_and_the_runner_of_every_check_on_the_copy():
    """What attention_lab.judge does: ``graded.SEED = n`` and ``graded._run = replay`` reach every check."""
    graded = checks.fresh()
    original, calls = graded._run, []

    def recording_run(fn, *args):
        calls.append((fn, args))
        return original(fn, *args)

    graded.SEED, graded._run = 7, recording_run
    assert graded.check_cumsum_average(average_cumsum, strict=True) is True
    seen = []
    checks.check_cumsum_average(recording(average_cumsum, seen), seed=7)  # the inputs of seed 7
    assert calls[0][0] is average_cumsum and torch.equal(calls[0][1][0], seen[0])
    calls.clear()
    assert graded.check_head(Head, strict=True) is True
    assert calls[0][0] is Head and any(isinstance(fn, Head) for fn, _ in calls)  # the forward too
    calls.clear()
    assert graded.check_one_way(one_way, strict=True) is True  # called with no arguments, through _run too
    assert calls == [(one_way, ())]
    calls.clear()
    assert graded.check_unit_scale(unit_scale, strict=True) is True  # its own generator, from the copy's SEED
    seen.clear()
    checks.check_unit_scale(recording(unit_scale, seen), seed=7)
    assert calls[0][0] is unit_scale and torch.equal(calls[0][1][0], seen[0])
    assert checks.SEED == 1337 and checks.running._run is not recording_run  # the imported package is as it was


def test_checks_diagnose_is_the_report_card_of_attention_lab_diagnose():
    from attention_lab import diagnose

    card = checks.diagnose(head_scaled(lambda d, C: C ** -0.5)(384, 16, 8))
    assert isinstance(card, diagnose.Diagnosis) and card.failed == ["scale", "sdpa"]
    assert checks.diagnose(Head(384, 16, 8)).failed == []
    with pytest.raises(checks.CheckFailed) as failure:
        checks.diagnose(head_scaled(lambda d, C: C ** -0.5)(384, 16, 8), strict=True)
    assert failure.value.mistake == "diagnose/scale" and "1/√C = 1/√384" in str(failure.value)


def test_importing_checks_prints_nothing():
    command = [sys.executable, "-c", "import attention_lab.checks"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_chapters_call_checks_as_statements_whose_none_prints_nothing():
    """Learner mode returns None because each chapter's check call is its cell's last line."""
    calls = 0
    for path in layout.chapters():
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and re.search(r"^checks\.check_\w+\(", source, re.MULTILINE):
                calls += 1
                assert not any(o["output_type"] == "execute_result" for o in cell["outputs"]), (path.name, source)
    assert calls > 0


def test_every_public_check_is_called_by_the_chapter_whose_module_holds_it():
    """A check that no chapter calls goes (or gets an exercise); chapterN.py holds chapter N's checks."""
    called = collections.defaultdict(set)
    for path in layout.chapters():
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                for name in re.findall(r"\bchecks\.(check_\w+)\(", "".join(cell["source"])):
                    called[name].add(int(path.name[:2]))
    for name in [n for n in checks.__all__ if n.startswith("check_")]:
        module = getattr(checks, name).__module__  # attention_lab.checks.chapterN
        assert called[name] == {int(module.removeprefix("attention_lab.checks.chapter"))}, (name, module)


# ---------------------------------------------------------------- last: every message was produced


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_every_message_in_the_tables_is_produced_by_some_test():
    """Fails when a message of checks.MISTAKES loses its trigger, or was never given one.

    The mistake tests above record what they produced in RAISED; cases a -k selection skipped are run
    here, so this test stands on its own.
    """
    for _, check, args, mistake in WRONG:
        if mistake not in RAISED:
            try:
                _produce(check, args)
            except AssertionError:
                pass  # a case that no longer fails: its message stays missing below
    assert sorted(set(checks.MISTAKES) - RAISED) == []


def test_an_infinite_change_in_place_is_said_as_such_not_as_the_largest_float():
    """masked_fill_ writes -inf over the check's scores: the change is infinite, and the message says so
    instead of "by up to 1.8e+308" (nan_to_num's default for inf)."""
    def padded_weights(scores, pad):
        T = scores.shape[-1]
        hide = torch.ones(T, T, dtype=torch.bool).triu(1) | pad[:, None, :]
        weights = F.softmax(scores.masked_fill_(hide, float("-inf")), dim=-1)
        return weights.nan_to_num(0.0)

    failure = _produce(checks.check_padding_mask, (padded_weights,))
    assert failure.mistake == "general/changed-input", str(failure)
    assert "1.8e+308" not in str(failure) and "an infinity written over a finite number" in str(failure)


def test_the_padding_check_says_why_an_all_masked_row_is_nan():
    """The softmax's first step, -inf - (-inf), makes the nan, before any division."""
    failure = _produce(checks.check_padding_mask, (lambda s, p: pad_weights(s, p, empty="nan"),))
    assert failure.mistake == "pad/nan-rows", str(failure)
    assert "-inf - (-inf) = nan" in str(failure) and "0 / 0" not in str(failure)


def test_fifth_read_messages_say_what_the_reviewers_found():
    """The words of the messages issue 35's fifth read asked for (chapter 6's checks and the engine)."""
    def message(check, *args):
        with pytest.raises(checks.CheckFailed) as info:
            check(*args, strict=True)
        return str(info.value)

    numpy_answer = lambda w: torch.stack([w.diagonal(-d, -2, -1).mean() for d in range(w.shape[-1])]).numpy()
    said = message(checks.check_weight_by_distance, numpy_answer)
    assert "drop the .numpy()" in said and "forget to `return`" not in said
    said = message(checks.check_weight_by_distance, lambda w: None)
    assert "returned None: did you forget to `return` it?" in said
    said = message(checks.check_weight_by_distance,
                   lambda w: torch.stack([w.diagonal(-d, -2, -1).mean(-1) for d in range(w.shape[-1])]))
    assert "one profile per sequence" in said and "transposed: (T, B)" in said
    said = message(checks.check_weight_by_distance, lambda w: torch.full(w.shape[-1:], float("nan")))
    assert "got nan at index" in said and "largest difference inf" not in said
    said = message(checks.check_score_parts, lambda m, i: score_parts(m, i)[:3] + [score_parts(m, i)[2] * 2],
                   PARTS_MODEL, PARTS_IDS)
    assert "the pos·pos part differs" in said and "part 3" not in said
    times_mask = lambda sc, p: pad_weights(sc, p, fill=float("-inf"), empty="multiply")
    said = message(checks.check_padding_mask, times_mask)
    assert "nan × 0 is still nan" in said and "largest difference inf" not in said
    said = message(checks.check_previous_token_head, previous_head_without_no_grad)
    assert "with torch.no_grad(): head.key.weight.copy_(...)" in said
    said = message(checks.check_previous_token_head, previous_head_assigned)
    assert "must stay an nn.Parameter" in said and ".copy_(...)" in said
    said = message(checks.check_previous_token_head, lambda: head_with(-20 * torch.eye(8), shift(8, 1)))
    assert "negative factor" in said


def test_a_pos_pos_part_without_the_batch_axis_passes():
    """pos·pos comes from the (T, C) position table alone, so a (T, T) part is the same for every sequence."""
    def unexpanded(model, ids):
        parts = score_parts(model, ids)
        return parts[:3] + [parts[3][0]]
    assert checks.check_score_parts(unexpanded, PARTS_MODEL, PARTS_IDS, strict=True) is True
