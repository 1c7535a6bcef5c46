"""Inputs aimed at how the checks work, as issue 33 listed them: answers right only for the inputs a
check used to try, answers that keep state between calls, side effects that must be named on every
run, lower precision cast back, and the inputs that crashed a check or got a generic message.

Each input is judged in learner and in strict mode, as in ``sweep_checks``, whose answers it builds on;
``test_checks_hostile.py`` requires every one to be clear, mode by mode.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F

from sweep_checks import (NEG, Head, Input, by_distance, cumsum_average, padding, score_parts, softmax,
                          split_heads, unit_scale)

OLD_LENGTHS = (8, 1, 5, 12, 7)  # the sequence lengths the checks used to try


def tuned(right, wrong, fits):
    """``right`` where ``fits(*args)`` (the inputs a check used to try), ``wrong`` elsewhere."""
    return lambda *args: right(*args) if fits(*args) else wrong(*args)


def in_half(right, dtype=torch.float16):
    """``right`` computed on its float inputs cast to ``dtype``, the result cast back to float32."""
    def answer(*args):
        low = [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        return right(*low).float()

    return answer


def counted(right):
    calls = [0]

    def answer(*args):
        calls[0] += 1
        return right(*args) * calls[0]

    return answer


def cached(right):
    kept = {}

    def answer(*args):
        return kept.setdefault(tuple(args[0].shape), right(*args))

    return answer


def _no_mask_attend(self, s, T):
    return F.softmax(s, -1)


class _KeepsFirstKeys(Head):
    def forward(self, x):
        if not hasattr(self, "first_k"):
            self.first_k = self.key(x)
        T = x.shape[1]
        return self.attend(self.scores(self.query(x), self.first_k[:, :T]), T) @ self.value(x)


class _CountsCalls(Head):
    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        return Head.forward(self, x) * self.calls


def inputs() -> list[Input]:
    from attention_lab import training
    from attention_lab.reference import ReferenceHead

    gen = torch.Generator().manual_seed(0)
    trained = training.load_trained().trained
    ids = torch.randint(0, trained.token_table.weight.shape[0], (4, 16), generator=gen)
    torch.manual_seed(0)
    real_head, real_x = ReferenceHead(32, 16, 8), torch.randn(4, 8, 32, generator=gen)

    def real_weights():
        q, k = real_head.query(real_x), real_head.key(real_x)
        return F.softmax((q @ k.mT / 4).masked_fill(torch.ones(8, 8).triu(1).bool(), NEG), -1)

    zeroed_head = copy.deepcopy(real_head)  # its own head: strict mode leaves the change in place

    def real_zeroing():
        out = real_weights()
        zeroed_head.key.weight.data.zero_()
        return out

    parts_model = copy.deepcopy(trained)
    H, S = "check_head", "check_score_parts"
    old_length = lambda x: x.shape[1] in OLD_LENGTHS  # noqa: E731
    return [
        # 8 wrong verdicts: right only for the inputs the checks used to try, or keeping state
        Input("head right only at the old lengths", H,
              (type("Head", (Head,), {"attend": lambda self, s, T: (Head.attend(self, s, T) if T in OLD_LENGTHS
                                                                    else _no_mask_attend(self, s, T))}),), "fail",
              "mask/none"),
        Input("padding right only at the old lengths", "check_padding_mask",
              (tuned(padding, lambda s, p: padding(s, p, 0.0), lambda s, p: s.shape[-1] in (8, 5, 1)),), "fail",
              "pad/fill-zero"),
        Input("softmax right only up to 3 axes", "check_softmax",
              (tuned(softmax, lambda z: z.exp() / z.exp().sum(), lambda z: z.dim() <= 3),), "fail",
              "softmax/whole-sum"),
        Input("average right only up to T = 12", "check_cumsum_average",
              (tuned(cumsum_average, lambda x: x.cumsum(1) / x.shape[1], lambda x: x.shape[1] <= 12),), "fail",
              "average/divide-by-T"),
        Input("score parts right only for the two old id shapes", S,
              (tuned(score_parts, lambda m, i: [p * 8 for p in score_parts(m, i)],
                     lambda m, i: i.shape[1] in (16, 5)), trained, ids), "fail", "parts/no-scale"),
        Input("average cached by length", "check_cumsum_average", (cached(cumsum_average),), "fail",
              "general/kept-state", runs=2),
        Input("head that keeps its first keys", H, (_KeepsFirstKeys,), "fail", "head/kept-state"),
        Input("unit scale as np.float32", "check_unit_scale", (lambda q, k: np.float32(unit_scale(q, k)),), "pass"),
        # side effects, named on every run
        Input("score parts zeroing model.head.key.weight", S,
              (lambda m, i: (m.head.key.weight.data.zero_(), score_parts(m, i))[1], parts_model, ids), "fail",
              "general/changed-module", runs=2),
        Input("real batch zeroing head.key.weight", "check_real_batch_weights", (real_zeroing, zeroed_head, real_x),
              "fail", "general/changed-module", runs=2),
        # 5 crashes
        Input("unit scale on meta", "check_unit_scale", (lambda q, k: torch.tensor(0.2, device="meta"),), "fail",
              "scale/not-a-number"),
        Input("head built on meta", H, (type("Head", (Head,), {"__init__": lambda self, C, hs, bs: (
            Head.__init__(self, C, hs, bs), self.to("meta"))[0]}),), "fail", "general/device"),
        Input("one way on meta", "check_one_way", (lambda: tuple(
            layer.to("meta") for layer in (torch.nn.Linear(2, 2, bias=False), torch.nn.Linear(2, 2, bias=False))),),
              "fail", "general/device"),
        Input("head with an empty output", H, (type("Head", (Head,), {"forward": lambda self, x: x[..., :0]}),),
              "fail", "general/empty"),
        Input("check_head() with no argument", H, (), "fail", "general/arguments"),
        # 15 generic messages
        *[Input(f"{check} in float16, cast back", check, (in_half(right),), "fail", "general/precision")
          for check, right in [("check_cumsum_average", cumsum_average), ("check_softmax", softmax),
                               ("check_padding_mask", padding), ("check_weight_by_distance", by_distance),
                               ("check_split_heads", split_heads)]],
        Input("multihead in bfloat16, cast back", "check_multihead_sdpa", (_multihead_low,), "fail",
              "general/precision"),
        Input("head in float16, cast back", H, (type("Head", (Head,), {"forward": lambda self, x: F.scaled_dot_product_attention(
            *(layer(x).half() for layer in (self.query, self.key, self.value)), is_causal=True).float()}),), "fail",
              "general/precision"),
        Input("score parts in float16, cast back", S, (lambda m, i: [p.half().float() for p in score_parts(m, i)],
                                                       trained, ids), "fail", "parts/precision"),
        Input("real batch weights in float16, cast back", "check_real_batch_weights",
              (real_weights().half().float(), real_head, real_x), "fail", "general/precision"),
        Input("average with the last count off by one", "check_cumsum_average",
              (lambda x: x.cumsum(1) / (torch.arange(1, x.shape[1] + 1) + (torch.arange(x.shape[1]) == x.shape[1] - 1)
                                        ).view(1, -1, 1),), "fail", "average/counts"),
        Input("head with its values reversed in time", H, (type("Head", (Head,), {
            "forward": lambda self, x: self.attend(self.scores(self.query(x), self.key(x)), x.shape[1])
            @ self.value(x).flip(1)}),), "fail", "head/reversed"),
        Input("head scaled after the softmax by a call counter", H, (_CountsCalls,), "fail", "general/counter"),
        Input("unit scale as a 0-d int tensor", "check_unit_scale", (lambda q, k: torch.tensor(0),), "fail",
              "scale/not-a-number"),
        Input("unit scale as a 0-d bool tensor", "check_unit_scale", (lambda q, k: torch.tensor(True),), "fail",
              "scale/not-a-number"),
        Input("average counted across calls", "check_cumsum_average", (counted(cumsum_average),), "fail",
              "general/counter"),
        Input("float 64 head", H, (type("Head", (Head,), {"forward": lambda self, x: Head.forward(self.double(), x.double())}),),
              "fail", "general/changed-module"),
        Input("a right head once more, sdpa", H, (type("Head", (Head,), {"forward": lambda self, x: F.scaled_dot_product_attention(
            self.query(x), self.key(x), self.value(x), is_causal=True)}),), "pass"),
        Input("softmax right, in float64", "check_softmax", (lambda z: softmax(z.double()),), "pass"),
        Input("average with math", "check_cumsum_average", (lambda x: x.cumsum(1) / torch.arange(
            1, x.shape[1] + 1).view(1, -1, 1) * math.prod([1.0]),), "pass"),
        # from the held-out inputs a red team wrote without seeing the checks (/work/redteam33 of issue 33)
        Input("average compiled with torch.jit.script", "check_cumsum_average", (_scripted_average(),), "pass"),
        Input("average that calls sys.exit()", "check_cumsum_average", (_exits,), "fail", "general/raised"),
        Input("average that raises a BaseException of its own", "check_cumsum_average", (_aborts,), "fail",
              "general/raised"),
        Input("average that replaces torch.allclose", "check_cumsum_average", (_patches_allclose,), "fail",
              "general/patched-torch"),
        Input("head with weight-normed projections", H, (_weight_normed,), "pass"),
        Input("multihead with an unused sdpa call", "check_multihead_sdpa", (_decorative_sdpa,), "fail",
              "multihead/unused-sdpa"),
    ]


def _scripted_average():
    @torch.jit.script
    def cumsum_average(x: torch.Tensor) -> torch.Tensor:
        counts = torch.arange(1, x.size(1) + 1, dtype=x.dtype).view(-1, 1)
        return x.cumsum(1) / counts

    return cumsum_average


def _exits(x):
    raise SystemExit("done")


class _Abort(BaseException):
    pass


def _aborts(x):
    raise _Abort("stop here")


def _patches_allclose(x):
    torch.allclose = lambda *a, **k: True  # the check puts torch back and names it
    return x.cumsum(1)


class _weight_normed(Head):
    def __init__(self, C, head_size, block_size):
        super().__init__(C, head_size, block_size)
        normed = torch.nn.utils.parametrizations.weight_norm
        self.key, self.query, self.value = normed(self.key), normed(self.query), normed(self.value)


def _decorative_sdpa(heads, x):
    out = torch.cat([h(x) for h in heads], -1)
    zero = torch.zeros(1, 1, 1, 1)
    F.scaled_dot_product_attention(zero, zero, zero)  # called, its result never used
    return out


def _multihead_low(heads, x):
    B, T, _ = x.shape
    q, k, v = (torch.stack([getattr(h, n)(x) for h in heads], 1).bfloat16() for n in ("query", "key", "value"))
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1).float()

