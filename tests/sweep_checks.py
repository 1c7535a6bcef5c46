"""Sweep: every check the chapters call, fed right answers, transforms of them, stubs, misuse and
mistakes, in learner and strict mode; counts how each verdict reads.

Each input says what a good check does with it: pass it, answer "not yet implemented", or fail it
(with the id of the message it should give, where one fits). Each run of an input in one mode is
counted once, as

- clear: the verdict is the right one and, for a failure, a named message (the expected id if given);
- generic: a failure, but only "differ", "not finite" or a bare "raised", or another id than expected;
- crash: an exception other than the check's own ``CheckFailed``;
- wrong verdict: a wrong answer passed, a right one failed, or a stub was not recognised.

``test_checks_sweep.py`` runs it and requires every input to be clear; ``course/bench/checks.py`` times the
checks on its right answers.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import warnings
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab.reference import ReferenceHead

GENERIC = {"general/differ", "general/not-finite", "general/raised"}
NEG = float("-inf")


@dataclass
class Input:
    label: str
    check: str          # the name of the check in attention_lab.checks
    args: tuple
    expect: str         # "pass", "stub" or "fail"
    mistake: str = ""   # for "fail": the id a good check gives, if one fits
    kwargs: dict = None
    runs: int = 1       # learner mode runs the check this many times on the same objects, each judged


def _tril(T):
    return torch.tril(torch.ones(T, T))


# ---------------------------------------------------------------- right answers


def cumsum_average(x):
    T = x.shape[1]
    return x.cumsum(dim=1) / torch.arange(1, T + 1).view(1, T, 1)


def one_way():
    query, key = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        query.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
        key.weight.copy_(torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    return query, key


def unit_scale(q, k):
    return 1 / math.sqrt(q.shape[-1] * q.var().item() * k.var().item())


def softmax(z):
    e = (z - z.max(dim=-1, keepdim=True).values).exp()
    return e / e.sum(dim=-1, keepdim=True)


def padding(s, pad, fill=NEG):
    T = s.shape[-1]
    hide = (_tril(T) == 0) | pad[:, None, :]
    return torch.nan_to_num(F.softmax(s.masked_fill(hide, fill), dim=-1), nan=0.0)


def by_distance(w):
    return torch.stack([torch.diagonal(w, offset=-d, dim1=-2, dim2=-1).mean() for d in range(w.shape[-1])])


def multihead(heads, x):
    B, T, _ = x.shape
    q, k, v = (torch.stack([getattr(h, n)(x) for h in heads], 1) for n in ("query", "key", "value"))
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)


def score_parts(model, ids):
    B, T = ids.shape
    tok, pos = model.token_table(ids), model.position_table(torch.arange(T)).expand(B, T, -1)  # (B, T, C) each
    head = model.head
    root = head.key.weight.shape[0] ** 0.5
    return [a @ b.mT / root for a in (head.query(tok), head.query(pos)) for b in (head.key(tok), head.key(pos))]


class Head(ReferenceHead):
    """The lesson's head (its layers and mask are ReferenceHead's), in steps that subclasses below change."""

    def scores(self, q, k):
        return q @ k.mT / k.shape[-1] ** 0.5

    def attend(self, s, T):
        return F.softmax(s.masked_fill(self.tril[:T, :T] == 0, NEG), dim=-1)

    def forward(self, x):
        T = x.shape[1]
        k, q, v = self.key(x), self.query(x), self.value(x)
        return self.attend(self.scores(q, k), T) @ v


def head_with(**methods):
    return type("Head", (Head,), methods)


class _dropout_head(Head):  # noqa: N801 - a class passed where check_head wants one
    def __init__(self, C, head_size, block_size):
        super().__init__(C, head_size, block_size)
        self.drop = nn.Dropout(0.2)

    def attend(self, s, T):
        return self.drop(Head.attend(self, s, T))


def _fill_head(fill):
    return head_with(attend=lambda self, s, T: F.softmax(s.masked_fill(self.tril[:T, :T] == 0, fill), -1))


def _stub(*args):
    raise NotImplementedError("fill me in")


def _helper_stub(*args):
    return _unfinished_helper(args[0])


def _unfinished_helper(t):
    raise NotImplementedError("write the helper")


class PlainHead:
    """A head that is no nn.Module."""

    def __init__(self, C, head_size, block_size):
        self.key = nn.Linear(C, head_size, bias=False)
        self.query = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.tril = torch.tril(torch.ones(block_size, block_size))

    def __call__(self, x):
        T = x.shape[1]
        s = self.query(x) @ self.key(x).mT / self.key.out_features ** 0.5
        return F.softmax(s.masked_fill(self.tril[:T, :T] == 0, NEG), -1) @ self.value(x)


def _zeroing_key_forward(self, x):
    with torch.no_grad():
        self.key.weight.zero_()
    return Head.forward(self, x)


def _in_place_forward(self, x):
    x.mul_(1.0)  # touches x, changes nothing
    x.add_(0.5)
    return Head.forward(self, x - 0.5)


# ---------------------------------------------------------------- inputs

def _transforms():
    """(label, transform of a right tensor answer, expected verdict, mistake id)."""
    return [
        ("float16", lambda t: t.half(), "fail", "general/dtype"),
        ("bfloat16", lambda t: t.bfloat16(), "fail", "general/dtype"),
        ("int64", lambda t: t.long(), "fail", "general/dtype"),
        ("float64", lambda t: t.double(), "pass", ""),
        ("meta", lambda t: t.to("meta"), "fail", "general/device"),
        ("numpy", lambda t: t.detach().numpy(), "fail", "general/not-a-tensor"),
        ("list", lambda t: t.tolist(), "fail", "general/not-a-tensor"),
        ("None", lambda t: None, "fail", "general/not-a-tensor"),
        ("plus 0.01", lambda t: t + 0.01, "fail", "general/differ"),
        ("unsqueezed", lambda t: t.unsqueeze(0), "fail", ""),
        ("one nan", lambda t: t.flatten().index_fill(0, torch.tensor([0]), math.nan).view_as(t), "fail",
         "general/not-finite"),
        ("requires grad", lambda t: t.detach().requires_grad_(), "pass", ""),
    ]


def _zeroing(right):
    """The right answer, computed first, then the first tensor argument zeroed in place."""

    def fn(*args):
        out = right(*args)
        next(a for a in args if isinstance(a, torch.Tensor)).zero_()
        return out

    return fn


def split_heads(t, n_head):
    """Chapter 7's split of (B, T, C) into (B, n_head, T, hs)."""
    B, T, C = t.shape
    return t.view(B, T, n_head, C // n_head).transpose(1, 2)


def multi_head(x, c_attn, c_proj, n_head):
    """Chapter 7's layer from its two linear layers, with one fused call."""
    B, T, C = x.shape
    q, k, v = (split_heads(t, n_head) for t in c_attn(x).split(C, dim=-1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
    return c_proj(out.transpose(1, 2).reshape(B, T, C))


def attend_cached(q, k, v, cache, block_size):
    """Chapter 8's decode step: append on the time axis, keep the last block_size rows, attend."""
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    k, v = k[:, :, -block_size:], v[:, :, -block_size:]
    return F.scaled_dot_product_attention(q, k, v), (k, v)


def embed_next(ids, past, token_table, position_table):
    """Chapter 8's decode input: the token's row plus the position's, the last row past the end."""
    last = position_table.weight.shape[0] - 1
    return token_table(ids) + position_table(torch.tensor([min(past, last)]))


def _function_inputs(name, right, nargs, first_of_pair=False):
    out = [Input(f"{name}: right", name, (right,), "pass"),
           Input(f"{name}: stub", name, (_stub,), "stub"),
           Input(f"{name}: None by keyword", name, (), "stub", kwargs={"fn": None}),
           Input(f"{name}: helper not implemented", name, (_helper_stub,), "fail",
                 "general/helper-not-implemented"),
           Input(f"{name}: raises ValueError", name, (lambda *a: int("x"),), "fail", "general/raised"),
           Input(f"{name}: not callable", name, (42,), "fail", "general/not-callable"),
           Input(f"{name}: zeroes its first tensor input", name, (_zeroing(right),), "fail",
                 "general/changed-input")]
    for label, t, expect, mistake in _transforms():
        if label == "plus 0.01":  # the same offset everywhere is what a bias adds; on weights, it lands on hidden keys
            mistake = {"check_padding_mask": "pad/sees-hidden"}.get(name, mistake)
        if first_of_pair:  # an answer that returns (out, cache): the transform lands on out
            answer = (lambda tr: lambda *a: (lambda got: (tr(got[0]), got[1]))(right(*a)))(t)
        else:
            answer = (lambda tr: lambda *a: tr(right(*a)))(t)
        out.append(Input(f"{name}: {label}", name, (answer,), expect, mistake))
    return out


def inputs() -> list[Input]:
    from attention_lab.reference import ReferenceHead

    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    real_head, real_x = ReferenceHead(32, 16, 8), torch.randn(4, 8, 32, generator=gen)
    real_x_nan = real_x.clone().index_put_((torch.tensor(1), torch.tensor(3), torch.tensor(0)), torch.tensor(math.nan))

    def real(head=real_head, x=real_x, fill=NEG):
        def real_batch_weights():
            q, k = head.query(x), head.key(x)
            T = x.shape[1]
            return F.softmax((q @ k.mT / 4).masked_fill(_tril(T) == 0, fill), dim=-1)

        return real_batch_weights

    def real_zeroing():
        with torch.no_grad():
            real_head.key.weight.mul_(1.0)
        return real()()

    def real_in_place():
        s = (real_head.query(real_x) @ real_head.key(real_x).mT / 4)
        s.masked_fill_(_tril(8) == 0, NEG)
        real_x.mul_(1.0)  # touching x is fine: its numbers do not change
        return F.softmax(s, -1)

    right_real = real()().detach()
    other_head = copy.deepcopy(real_head)  # zeroed by one input: the others keep theirs
    L = []
    L += _function_inputs("check_cumsum_average", cumsum_average, 1)
    L += [Input("cumsum: x.div_ in place", "check_cumsum_average",
                (lambda x: x.cumsum_(1).div_(torch.arange(1, x.shape[1] + 1).view(1, -1, 1)),), "fail",
                "general/changed-input")]
    # check_one_way: no tensor in or out, so no transforms
    O = "check_one_way"
    L += [Input("one way: right", O, (one_way,), "pass"),
          Input("one way: stub", O, (_stub,), "stub"),
          Input("one way: None by keyword", O, (), "stub", kwargs={"one_way": None}),
          Input("one way: helper not implemented", O, (lambda: _unfinished_helper(None),), "fail",
                "general/helper-not-implemented"),
          Input("one way: raises ValueError", O, (lambda: int("x"),), "fail", "general/raised"),
          Input("one way: not callable", O, (one_way(),), "fail", "general/not-callable"),
          Input("one way: tied", O, (lambda: (one_way()[0],) * 2,), "fail", "one-way/tied"),
          Input("one way: reversed", O, (lambda: one_way()[::-1],), "fail", "one-way/reversed"),
          Input("one way: a dict", O, (lambda: dict(zip("qk", one_way())),), "fail", "one-way/not-layers")]
    # check_unit_scale: a number out, so no transforms
    U = "check_unit_scale"
    L += [Input("unit scale: right", U, (unit_scale,), "pass"),
          Input("unit scale: from the scores' std", U, (lambda q, k: 1 / (q @ k.mT).std(),), "pass"),
          Input("unit scale: stub", U, (_stub,), "stub"),
          Input("unit scale: None by keyword", U, (), "stub", kwargs={"unit_scale": None}),
          Input("unit scale: helper not implemented", U, (_helper_stub,), "fail", "general/helper-not-implemented"),
          Input("unit scale: not callable", U, (0.75,), "fail", "general/not-callable"),
          Input("unit scale: q.div_ in place", U, (lambda q, k: 2 * unit_scale(q.div_(2), k),), "fail",
                "general/changed-input"),
          Input("unit scale: nan", U, (lambda q, k: math.nan,), "fail", "scale/not-a-number"),
          Input("unit scale: True", U, (lambda q, k: True,), "fail", "scale/not-a-number"),
          Input("unit scale: 1/sqrt(d_k)", U, (lambda q, k: q.shape[-1] ** -0.5,), "fail", "scale/unit-variance")]
    L += _function_inputs("check_softmax", softmax, 1)
    L += [Input("softmax: z.sub_().exp_()", "check_softmax",
                (lambda z: (lambda e: e / e.sum(-1, keepdim=True))(z.sub_(z.max(-1, keepdim=True).values).exp_()),),
                "fail", "general/changed-input")]
    L += _function_inputs("check_padding_mask", padding, 2)
    L += [Input("padding: s.masked_fill_", "check_padding_mask",
                (lambda s, p: torch.nan_to_num(F.softmax(s.masked_fill_((_tril(s.shape[-1]) == 0) | p[:, None, :], NEG), -1)),),
                "fail", "general/changed-input"),
          Input("padding: fill -1e9", "check_padding_mask",
                (lambda s, p: padding(s, p, -1e9) * (~((_tril(s.shape[-1]) == 0) | p[:, None, :])).any(-1, keepdim=True),), "pass"),
          # a fill of -10 both leaks weight to padding and leaves the rows with no key uniform: which the
          # check meets first depends on the shapes it draws, and either message names the finite fill
          Input("padding: fill -10", "check_padding_mask", (lambda s, p: padding(s, p, -10.0),), "fail"),
          Input("padding: fill -100", "check_padding_mask", (lambda s, p: padding(s, p, -100.0),), "fail",
                "pad/uniform-rows"),
          Input("padding: fill -100, empty rows zeroed", "check_padding_mask",
                (lambda s, p: padding(s, p, -100.0) * (~((_tril(s.shape[-1]) == 0) | p[:, None, :])).any(-1, keepdim=True),),
                "fail", "pad/finite-fill")]
    L += _function_inputs("check_weight_by_distance", by_distance, 1)
    L += _function_inputs("check_multihead_sdpa", multihead, 2)
    L += _function_inputs("check_split_heads", split_heads, 2)
    L += _function_inputs("check_multi_head", multi_head, 4)
    L += _function_inputs("check_attend_cached", attend_cached, 5, first_of_pair=True)
    L += _function_inputs("check_embed_next", embed_next, 4)
    L += [Input("multi head: zeroes c_attn.weight", "check_multi_head",
                (lambda x, a, p, n: (a.weight.data.zero_(), multi_head(x, a, p, n))[1],), "fail",
                "general/changed-module")]
    L += [Input("multihead: zeroes heads[0].key.weight", "check_multihead_sdpa",
                (lambda heads, x: (heads[0].key.weight.data.zero_(), multihead(heads, x))[1],), "fail",
                "general/changed-module")]
    # check_head
    H = "check_head"
    L += [Input("head: right", H, (Head,), "pass"),
          Input("head: sdpa", H, (head_with(forward=lambda self, x: F.scaled_dot_product_attention(
              self.query(x), self.key(x), self.value(x), is_causal=True)),), "pass"),
          Input("head: fill -1e9", H, (_fill_head(-1e9),), "pass"),
          Input("head: stub class", H, (type("StubHead", (nn.Module,), {"__init__": _stub}),), "stub"),
          Input("head: None by keyword", H, (), "stub", kwargs={"Head": None}),
          Input("head: an instance", H, (Head(384, 16, 8),), "fail", "head/instance"),
          Input("head: plain class", H, (PlainHead,), "fail", "head/not-a-module"),
          Input("head: not callable", H, (42,), "fail", "general/not-callable"),
          Input("head: zeroes its key.weight", H, (head_with(forward=_zeroing_key_forward),), "fail",
                "general/changed-module"),
          Input("head: changes x in place", H, (head_with(forward=_in_place_forward),), "fail",
                "general/changed-input"),
          Input("head: fill -100", H, (_fill_head(-100.0),), "fail", "mask/finite-fill"),
          Input("head: fill -20", H, (_fill_head(-20.0),), "fail", "mask/finite-fill"),
          Input("head: fill -10", H, (_fill_head(-10.0),), "fail", "mask/finite-fill"),
          Input("head: fill -5", H, (_fill_head(-5.0),), "fail", "mask/finite-fill"),
          Input("head: mask tril >= 0 (everything)", H, (head_with(
              attend=lambda self, s, T: F.softmax(s.masked_fill(self.tril[:T, :T] >= 0, NEG), -1)),), "fail", ""),
          Input("head: mask tril > 1 (nothing)", H, (head_with(
              attend=lambda self, s, T: F.softmax(s.masked_fill(self.tril[:T, :T] > 1, NEG), -1)),), "fail",
                "mask/none"),
          Input("head: mask tril.bool()", H, (head_with(
              attend=lambda self, s, T: F.softmax(s.masked_fill(self.tril[:T, :T].bool(), NEG), -1)),), "fail",
                "mask/hides-past"),
          Input("head: mask not sliced", H, (head_with(
              attend=lambda self, s, T: F.softmax(s.masked_fill(self.tril == 0, NEG), -1)),), "fail",
                "head/T-lt-block"),
          Input("head: mask torch.tril(ones(8, 8))", H, (head_with(
              attend=lambda self, s, T: F.softmax(s.masked_fill(_tril(8) == 0, NEG), -1)),), "fail", ""),
          Input("head: leaks one future key", H, (head_with(
              attend=lambda self, s, T: F.softmax(s.masked_fill((self.tril[:T, :T] == 0) & ~(
                  (torch.arange(T)[:, None] == min(6, T - 2)) & (torch.arange(T)[None, :] == min(7, T - 1))), NEG), -1)),),
                "fail", "head/sees-future"),
          Input("head: scale after the softmax", H, (head_with(
              scores=lambda self, q, k: q @ k.mT,
              attend=lambda self, s, T: Head.attend(self, s, T) / self.key.out_features ** 0.5),), "fail",
                "head/scale-after-softmax"),
          Input("head: scale on the output", H, (head_with(
              scores=lambda self, q, k: q @ k.mT,
              forward=lambda self, x: Head.forward(self, x) / self.key.out_features ** 0.5),), "fail", ""),
          Input("head: F.dropout left on", H, (head_with(
              attend=lambda self, s, T: F.dropout(Head.attend(self, s, T), 0.1)),), "fail", "head/random"),
          Input("head: nn.Dropout (off in eval)", H, (_dropout_head,), "pass"),
          Input("padding: one future key seen", "check_padding_mask",
                (lambda s, p: padding(s, p).index_put((torch.tensor(0), torch.tensor(3), torch.tensor(5)),
                                                      torch.tensor(0.2)),), "fail", "pad/sees-hidden"),
          Input("head: sqrt C", H, (head_with(scores=lambda self, q, k: q @ k.mT / self.key.in_features ** 0.5),),
                "fail", "head/sqrt-C"),
          Input("head: scale 0.3", H, (head_with(scores=lambda self, q, k: q @ k.mT * 0.3),), "fail",
                "head/other-scale"),
          ]
    # check_real_batch_weights
    R = "check_real_batch_weights"
    L += [Input("real: right function", R, (real(), real_head, real_x), "pass"),
          Input("real: right tensor", R, (right_real, real_head, real_x), "pass"),
          Input("real: stub", R, (_stub, real_head, real_x), "stub"),
          Input("real: None by keyword", R, (), "stub", kwargs=dict(weights=None, head=real_head, x=real_x)),
          Input("real: fill -100", R, (real(fill=-100.0), real_head, real_x), "fail", "mask/finite-fill"),
          Input("real: fill -1e9", R, (real(fill=-1e9), real_head, real_x), "pass"),
          Input("real: zeros for a nan x", R, (torch.zeros(4, 8, 8), real_head, real_x_nan), "fail", "real/bad-x"),
          Input("real: head None", R, (right_real, None, real_x), "fail", "real/bad-head"),
          Input("real: head a lambda", R, (right_real, lambda x: x, real_x), "fail", "real/bad-head"),
          Input("real: x numpy", R, (right_real, real_head, real_x.numpy()), "fail", "real/bad-x"),
          Input("real: x list", R, (right_real, real_head, real_x.tolist()), "fail", "real/bad-x"),
          Input("real: x wrong width", R, (right_real, real_head, torch.randn(4, 8, 16)), "fail", "real/bad-x"),
          Input("real: x on meta", R, (right_real, real_head, real_x.to("meta")), "fail", "real/bad-x"),
          Input("real: weights on meta", R, (right_real.to("meta"), real_head, real_x), "fail", "general/device"),
          Input("real: float16 weights", R, (right_real.half(), real_head, real_x), "fail", "general/dtype"),
          Input("real: masked_fill_ in place", R, (real_in_place, real_head, real_x), "pass"),
          Input("real: touches head.key", R, (real_zeroing, real_head, real_x), "pass"),
          Input("real: zeroes head.key", R, (lambda: _zero_then(other_head, right_real), other_head, real_x),
                "fail", "general/changed-module")]
    # check_previous_token_head
    P = "check_previous_token_head"

    def prev_head(dtype=None, C=8, bs=8):
        h = ReferenceHead(C, C, bs)
        with torch.no_grad():
            h.query.weight.copy_(20 * torch.eye(C))
            h.key.weight.copy_(torch.diag(torch.ones(C - 1), -1) if C > 1 else torch.zeros(C, C))
        if dtype is torch.int64:  # nn.Module.to refuses integer dtypes; a learner can still do this
            for layer in (h.query, h.key):
                layer.weight = nn.Parameter(layer.weight.detach().round().long(), requires_grad=False)
            return h
        return h.to(dtype) if dtype else h

    L += [Input("previous: right", P, (prev_head(),), "pass"),
          Input("previous: stub", P, (_stub,), "stub"),
          Input("previous: None by keyword", P, (), "stub", kwargs={"head": None}),
          Input("previous: int64 weights", P, (prev_head(torch.int64),), "fail", "general/dtype"),
          Input("previous: float16 weights", P, (prev_head(torch.float16),), "fail", "general/dtype"),
          Input("previous: Head(0, 0, 0)", P, (lambda: ReferenceHead(0, 0, 0),), "fail", "previous/too-small"),
          Input("previous: block_size 1", P, (ReferenceHead(1, 1, 1),), "fail", "previous/too-small"),
          Input("previous: meta", P, (prev_head().to("meta"),), "fail", "general/device"),
          Input("previous: a number", P, (3,), "fail", "previous/not-a-head")]
    # check_score_parts, on the shipped trained head (each input gets its own copy: one changes it)
    from attention_lab import training

    trained = training.load_trained().trained
    ids = torch.randint(0, trained.token_table.weight.shape[0], (4, 16), generator=gen)
    S = "check_score_parts"

    def parts(answer, expect, mistake=""):
        return (answer, copy.deepcopy(trained), ids), expect, mistake

    L += [Input(f"score parts: {label}", S, *parts(answer, expect, mistake)) for label, answer, expect, mistake in [
        ("right", score_parts, "pass", ""),
        ("stub", _stub, "stub", ""),
        ("helper not implemented", _helper_stub, "fail", "general/helper-not-implemented"),
        ("zeroes key weights", lambda m, i: (m.head.key.weight.data.zero_(), score_parts(m, i))[1], "fail",
         "general/changed-module"),
        ("one tensor", lambda m, i: sum(score_parts(m, i)), "fail", "parts/not-four"),
        ("nan parts", lambda m, i: [p * math.nan for p in score_parts(m, i)], "fail", "parts/masked"),
        ("cross terms swapped", lambda m, i: (lambda p: [p[0], p[2], p[1], p[3]])(score_parts(m, i)), "fail",
         "parts/swapped"),
    ]]
    return L


def _zero_then(head, answer):
    with torch.no_grad():
        head.key.weight.zero_()
    return answer


# ---------------------------------------------------------------- running


def classify(checks, item: Input, strict: bool) -> tuple[str, str]:
    """(kind, what happened) for one input in one mode: the worst of its runs (a change left in place by
    strict mode, for a grader to see, is judged on one run only)."""
    runs = [_classify_once(checks, item, strict) for _ in range(1 if strict else item.runs)]
    return min(runs, key=lambda r: ["crash", "wrong verdict", "generic", "clear"].index(r[0]))


def _classify_once(checks, item: Input, strict: bool) -> tuple[str, str]:
    check = getattr(checks, item.check)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            result = check(*item.args, strict=strict, **(item.kwargs or {}))
    except checks.CheckFailed as failure:
        mistake = failure.mistake
        said = f"CheckFailed {mistake}: {str(failure).splitlines()[0][:100]}"
        if item.expect == "stub":
            if mistake == "general/not-implemented":
                return "clear", said
            return "wrong verdict", said
        if item.expect == "pass":
            return "wrong verdict", said
        if item.mistake:
            return ("clear" if mistake == item.mistake else "generic"), said
        return ("generic" if mistake in GENERIC else "clear"), said
    except Exception as exc:  # noqa: BLE001 - counting crashes is the point
        return "crash", f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
    printed = out.getvalue()
    stub = "not yet implemented" in printed
    if item.expect == "stub":
        return ("clear" if stub or strict is False and stub else "wrong verdict"), printed.strip()[:100]
    if item.expect == "fail":
        return "wrong verdict", f"passed: {printed.strip()[:100] or result}"
    return ("clear" if not stub else "wrong verdict"), printed.strip()[:100]


def sweep(checks) -> tuple[Counter, list[str]]:
    """Counts of how the checks answer :func:`inputs`, each built again and run in learner and in strict
    mode, and a line for every input that is not clear."""
    counts, unclear = Counter(), []
    for strict in (False, True):
        for item in inputs():  # built again for each mode: some inputs change their own arguments
            with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the mistakes' own warnings (x.T on 3-D, empty layers)
                kind, said = classify(checks, item, strict)
            counts[kind] += 1
            counts["tried"] += 1
            if kind != "clear":
                unclear.append(f"{kind:13} {'strict' if strict else 'learner':7} {item.label}: {said}")
    return counts, unclear
