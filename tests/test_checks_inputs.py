"""Tests of how the checks draw their inputs (attention_lab/checks/trial.py and running.py): new ones at
every call in learner mode, with the seed printed only on a failure; a function of SEED in strict mode;
several shapes, T = 1, T < block_size and B = 1, two different inputs at least; what a check hands out
put back after a change; a cache passed as an argument allowed; a check called without its answer."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from sweep_checks import attend_cached, by_distance, embed_next, multi_head, multihead, padding, score_parts
from sweep_checks import softmax, split_heads, unit_scale
from sweep_checks import cumsum_average as average

from attention_lab import checks, training
from attention_lab.checks import running
from attention_lab.reference import ReferenceHead

NEG = float("-inf")
MODEL = training.load_trained().trained
IDS = torch.randint(0, 65, (3, 16), generator=torch.Generator().manual_seed(0))


# check, its answer, the other arguments, and which argument is the drawn input (its shape starts (B, T))
FUNCTIONS = {
    "cumsum": (checks.check_cumsum_average, average, (), 0),
    "softmax": (checks.check_softmax, softmax, (), 0),
    "padding": (checks.check_padding_mask, padding, (), 0),
    "distance": (checks.check_weight_by_distance, by_distance, (), 0),
    "multihead": (checks.check_multihead_sdpa, multihead, (), 1),
    "score parts": (checks.check_score_parts, score_parts, (MODEL, IDS), 1),
    "unit scale": (checks.check_unit_scale, unit_scale, (), 0),
    "split heads": (checks.check_split_heads, split_heads, (), 0),
    "multi head": (checks.check_multi_head, multi_head, (), 0),
    "attend cached": (checks.check_attend_cached, attend_cached, (), 0),  # q: (B, n_head, 1, hs)
    "embed next": (checks.check_embed_next, embed_next, (), 0),  # ids: (B, 1)
}


def recording(answer, seen):
    def recorded(*args):
        seen.append(tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
        return answer(*args)

    return recorded


def inputs_of(check, answer, others=(), **mode):
    seen = []
    check(recording(answer, seen), *others, **mode)
    return seen


def _tensors(seen):
    return [a for args in seen for a in args if isinstance(a, torch.Tensor)]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_learner_mode_draws_new_inputs_at_every_call_and_prints_the_same_pass(name, capsys):
    check, answer, others, _ = FUNCTIONS[name]
    first = inputs_of(check, answer, others)
    printed = capsys.readouterr().out
    second = inputs_of(check, answer, others)
    assert capsys.readouterr().out == printed and printed.startswith("✓")  # a stored pass stays the same
    assert "seed" not in printed
    drawn = list(zip(_tensors(first), _tensors(second)))
    assert drawn and any(a.shape != b.shape or not torch.equal(a, b) for a, b in drawn)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_strict_mode_draws_from_the_seed_a_grader_sets(name):
    check, answer, others, _ = FUNCTIONS[name]
    a, b = inputs_of(check, answer, others, strict=True), inputs_of(check, answer, others, strict=True)
    assert all(torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(b)))
    assert all(torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(inputs_of(check, answer, others,
                                                                                  seed=checks.SEED))))
    graded = checks.fresh()
    graded.SEED = 11
    other = inputs_of(getattr(graded, check.__name__), answer, others, strict=True)
    assert any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(other)))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_check_tries_several_shapes_with_b_1_and_two_inputs_of_one_shape(name):
    check, answer, others, drawn = FUNCTIONS[name]
    inputs = []
    for args in inputs_of(check, answer, others):  # a call again on the same numbers is not another input
        if not any(t.shape == args[drawn].shape and torch.equal(t, args[drawn]) for t in inputs):
            inputs.append(args[drawn])
    shapes = [tuple(t.shape) for t in inputs]
    assert len(set(shapes)) >= 3, shapes
    if name not in ("unit scale", "softmax"):  # a batch of one, and a sequence of one (or two)
        assert any(s[0] == 1 for s in shapes) and min(s[1] for s in shapes) <= 2, shapes
    twice = next(s for s in shapes if shapes.count(s) > 1)  # the same shape again, other numbers
    same = [t for t in inputs if tuple(t.shape) == twice]
    assert not torch.equal(same[0], same[1])


def test_check_head_builds_two_heads_and_tries_t_1_and_t_below_block_size():
    built, calls = [], []

    class Head(ReferenceHead):
        def __init__(self, C, head_size, block_size):
            super().__init__(C, head_size, block_size)
            built.append((C, head_size, block_size))

        def forward(self, x):
            calls.append((x.shape[0], x.shape[1], self.tril.shape[-1]))
            return super().forward(x)

    checks.check_head(Head)
    assert built[0] == (384, 16, 8) and len({b for b in built}) == 2
    assert any(B == 1 for B, _, _ in calls) and any(T == 1 for _, T, _ in calls)
    assert any(1 < T < bs for _, T, bs in calls) and any(T == bs for _, T, bs in calls)


def test_a_failure_in_learner_mode_gives_the_seed_that_draws_the_same_inputs_again():
    wrong = lambda x: x.cumsum(1) / x.shape[1]  # noqa: E731 - divides by T
    with pytest.raises(checks.CheckFailed) as failed:
        checks.check_cumsum_average(wrong)
    seed = int(re.search(r"add seed=(\d+) to the call", str(failed.value)).group(1))
    with pytest.raises(checks.CheckFailed) as again:
        checks.check_cumsum_average(wrong, seed=seed)
    assert str(again.value) == str(failed.value)
    with pytest.raises(checks.CheckFailed) as strict:
        checks.check_cumsum_average(wrong, strict=True)
    assert "seed=" not in str(strict.value)  # strict mode: the grader's seed, not the learner's


def test_checks_without_inputs_to_draw_print_no_seed():
    with pytest.raises(checks.CheckFailed) as failed:
        checks.check_one_way(lambda: (nn.Linear(2, 2, bias=False), nn.Linear(2, 2)))
    assert "seed=" not in str(failed.value)


def test_a_cache_passed_as_an_argument_may_change_where_a_check_says_so():
    """A later exercise (the KV cache) hands the learner a cache to fill: ``may_change`` allows it."""

    def extend(cache, x):
        cache.copy_(cache + x.sum())
        return cache

    cache, x = torch.zeros(3), torch.ones(2)
    result, _ = running._call(extend, cache, x, inputs="a cache and x", may_change=(0,))
    assert torch.equal(result, torch.full((3,), 2.0))
    with pytest.raises(checks.CheckFailed, match="changed its input `cache` in place"):
        running._call(extend, torch.zeros(3), x, inputs="a cache and x")


@pytest.mark.parametrize("check, args, missing", [
    (checks.check_head, (), "no `Head`"),
    (checks.check_cumsum_average, (), "no `fn`"),
    (checks.check_real_batch_weights, (lambda: None,), "no `head` and no `x`"),
    (checks.check_score_parts, (score_parts, MODEL), "no `ids`"),
    (checks.check_softmax, (average, 2), "too many positional arguments"),
])
def test_a_check_called_without_what_it_needs_says_how_the_chapter_calls_it(check, args, missing):
    for strict in (False, True):
        with pytest.raises(checks.CheckFailed) as failed:
            check(*args, strict=strict)
        assert failed.value.mistake == "general/arguments"
        assert missing in str(failed.value) and f"checks.{check.__name__}(" in str(failed.value)


def test_put_back_after_a_change_in_learner_mode_only():
    head = ReferenceHead(32, 16, 8)
    x = torch.randn(4, 8, 32)
    key = head.key.weight.detach().clone()

    def zeroing():
        head.key.weight.data.zero_()
        q, k = head.query(x), head.key(x)
        return F.softmax((q @ k.mT / 4).masked_fill(torch.ones(8, 8).triu(1).bool(), NEG), -1)

    for _ in range(2):  # named every time: the head is put back after each
        with pytest.raises(checks.CheckFailed, match="changed head.key.weight"):
            checks.check_real_batch_weights(zeroing, head, x)
        assert torch.equal(head.key.weight, key)
    with pytest.raises(checks.CheckFailed, match="changed head.key.weight"):
        checks.check_real_batch_weights(zeroing, head, x, strict=True)
    assert not head.key.weight.any()  # strict mode leaves it, for a grader's before-and-after digests
