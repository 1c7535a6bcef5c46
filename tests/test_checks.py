"""Tests of attention_lab.checks: each named mistake is caught by name, each equivalent answer passes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab import checks

NEG = float("-inf")


def _tril(T, diagonal=0):
    return torch.tril(torch.ones(T, T), diagonal)


# ---------------------------------------------------------------- right answers, and wrong ones


def average_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros(B, T, C)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(dim=0)
    return xbow


def average_matmul(x):
    T = x.shape[1]
    w = _tril(T)
    return (w / w.sum(dim=1, keepdim=True)) @ x


def average_future(x):
    return x.mean(dim=1, keepdim=True).expand_as(x)


def average_triu(x):
    w = torch.triu(torch.ones(x.shape[1], x.shape[1]))
    return (w / w.sum(1, keepdim=True)) @ x


def average_without_current(x):
    w = _tril(x.shape[1], -1)
    return (w / w.sum(1, keepdim=True).clamp(min=1)) @ x  # row 0 becomes 0, not nan


def average_without_current_loop(x):
    out = torch.zeros_like(x)
    for t in range(1, x.shape[1]):
        out[:, t] = x[:, :t].mean(dim=1)
    return out


def softmax_safe(z):
    e = (z - z.max(dim=-1, keepdim=True).values).exp()
    return e / e.sum(dim=-1, keepdim=True)


def weights_ref(scores, fill=NEG, where=False):
    T = scores.shape[-1]
    tril = _tril(T)
    if where:
        scores = torch.where(tril == 0, torch.full_like(scores, fill), scores)
    else:
        scores = scores.masked_fill(tril == 0, fill)
    return F.softmax(scores, dim=-1)


class Head(nn.Module):
    """One causal self-attention head."""

    bias = False
    scale = "sqrt_dk"
    mask = "future"
    after = False
    dim = -1
    values = "v"
    swap = False
    slice_mask = True
    tril_as = "buffer"

    def __init__(self, C, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(C, head_size, bias=self.bias)
        self.query = nn.Linear(C, head_size, bias=self.bias)
        self.value = nn.Linear(C, head_size, bias=self.bias)
        tril = torch.tril(torch.ones(block_size, block_size))
        if self.tril_as == "buffer":
            self.register_buffer("tril", tril)
        elif self.tril_as == "parameter":
            self.tril = nn.Parameter(tril, requires_grad=False)
        elif self.tril_as == "attribute":
            self.tril = tril

    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        scores = k @ q.transpose(-2, -1) if self.swap else q @ k.transpose(-2, -1)
        d = k.shape[-1]
        scores = scores * {"sqrt_dk": d**-0.5, "none": 1.0, "dk": 1 / d, "sqrt_C": C**-0.5}[self.scale]
        tril = self.tril[:T, :T] if self.slice_mask else self.tril
        hidden = {"future": tril == 0, "past": tril == 1, "none": torch.zeros_like(tril, dtype=torch.bool)}[self.mask]
        if self.after:
            return F.softmax(scores, dim=-1).masked_fill(hidden, 0) @ v
        weights = F.softmax(scores.masked_fill(hidden, NEG), dim=self.dim)
        return weights @ {"v": v, "x": x}[self.values]


def head_variant(**attrs):
    return type("Head", (Head,), attrs)


class HeadSDPA(Head):
    def forward(self, x):
        return F.scaled_dot_product_attention(self.query(x), self.key(x), self.value(x), is_causal=True)


class HeadNeg1e9(Head):
    def forward(self, x):
        T = x.shape[1]
        k, q, v = self.key(x), self.query(x), self.value(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
        scores = torch.where(self.tril[:T, :T] == 0, torch.tensor(-1e9), scores)
        return F.softmax(scores, dim=-1) @ v


class HeadFinfo(Head):
    def forward(self, x):
        T = x.shape[1]
        k, q, v = self.key(x), self.query(x), self.value(x)
        scores = (q @ k.transpose(-2, -1)) * k.shape[-1] ** -0.5
        scores = scores.masked_fill(self.tril[:T, :T] == 0, torch.finfo(scores.dtype).min)
        return F.softmax(scores, dim=-1) @ v


def sdpa_swap(head, x):
    q, k, v = head.query(x), head.key(x), head.value(x)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def stub(*args):
    raise NotImplementedError("fill me in")


class StubHead(nn.Module):
    def __init__(self, C, head_size, block_size):
        super().__init__()
        raise NotImplementedError("build the head")


class StubForwardHead(nn.Module):
    def __init__(self, C, head_size, block_size):
        super().__init__()

    def forward(self, x):
        raise NotImplementedError("write forward")


# ---------------------------------------------------------------- every equivalent answer passes

CORRECT = [
    (checks.check_causal_average, average_loop),
    (checks.check_causal_average, average_matmul),
    (checks.check_causal_average, lambda x: x.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(1, -1, 1)),
    (checks.check_projection, lambda x, layer: x @ layer.weight.T),
    (checks.check_projection, lambda x, layer: layer(x)),
    (checks.check_projection, lambda x, layer: torch.einsum("btc,hc->bth", x, layer.weight)),
    (checks.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])),
    (checks.check_scaled_scores, lambda q, k: q @ k.mT * q.shape[-1] ** -0.5),
    (checks.check_softmax, softmax_safe),
    (checks.check_softmax, lambda z: F.softmax(z, dim=-1)),
    (checks.check_causal_weights, weights_ref),
    (checks.check_causal_weights, lambda s: weights_ref(s, fill=-1e9)),
    (checks.check_causal_weights, lambda s: weights_ref(s, fill=torch.finfo(s.dtype).min, where=True)),
    (checks.check_causal_weights, lambda s: weights_ref(s, where=True)),
    (checks.check_head, Head),
    (checks.check_head, HeadSDPA),
    (checks.check_head, HeadNeg1e9),
    (checks.check_head, HeadFinfo),
    (checks.check_sdpa_swap, sdpa_swap),
    (checks.check_sdpa_swap, lambda head, x: F.scaled_dot_product_attention(
        head.query(x), head.key(x), head.value(x), attn_mask=torch.tril(torch.ones(x.shape[1], x.shape[1])).bool())),
]


@pytest.mark.parametrize("check, answer", CORRECT, ids=lambda v: getattr(v, "__name__", None))
def test_equivalent_answers_pass_with_one_line(check, answer, capsys):
    assert check(answer) is None
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"✓ {check.__name__} passed")


def test_weights_are_causal_passes_real_batch_weights(capsys):
    from attention_lab import text

    ids, _ = text.batch(4, 8, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    x = nn.Embedding(len(text.vocab()), 32)(ids) + nn.Embedding(8, 32)(torch.arange(8))
    head = Head(32, 16, 8)
    q, k = head.query(x), head.key(x)
    weights = weights_ref(q @ k.transpose(-2, -1) / 4)
    checks.check_weights_are_causal(weights)
    checks.check_weights_are_causal(lambda: weights)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("✓ check_weights_are_causal passed") for line in lines)


def test_checks_leave_the_random_stream_alone():
    torch.manual_seed(0)
    before = torch.randn(3)
    torch.manual_seed(0)
    checks.check_head(Head)
    assert torch.equal(torch.randn(3), before)


# ---------------------------------------------------------------- every listed mistake, by name

WRONG = [
    # chapter 1
    ("future-mean", checks.check_causal_average, average_future, "includes the future"),
    ("future-triu", checks.check_causal_average, average_triu, "includes the future"),
    ("no-current", checks.check_causal_average, average_without_current, "leaves out the current token"),
    ("no-current-loop", checks.check_causal_average, average_without_current_loop, "leaves out the current token"),
    ("sum", checks.check_causal_average, lambda x: x.cumsum(1), "summed instead of averaging"),
    # chapter 2
    ("no-transpose", checks.check_projection, lambda x, layer: x @ layer.weight, "(out, in)"),
    ("W@x", checks.check_projection, lambda x, layer: layer.weight @ x, "wrong side"),
    ("bias-none", checks.check_projection, lambda x, layer: x @ layer.weight.T + layer.bias, "no bias"),
    ("bias-added", checks.check_projection, lambda x, layer: x @ layer.weight.T + 0.1, "adding a bias"),
    ("W@xT", checks.check_projection, lambda x, layer: layer.weight @ x.transpose(-2, -1), "axes swapped"),
    # chapter 3: scores
    ("no-scale", checks.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1), "no 1/√d_k scaling"),
    ("divide-dk", checks.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1], "dividing by d_k"),
    ("sqrt-C", checks.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(384), "√C"),
    ("fixed-head-size", checks.check_scaled_scores, lambda q, k: q @ k.transpose(-2, -1) / 4, "q.shape[-1]"),
    ("qk-swapped", checks.check_scaled_scores,
     lambda q, k: k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1]), "q and k swapped"),
    # chapter 3: softmax
    ("overflow", checks.check_softmax, lambda z: z.exp() / z.exp().sum(-1, keepdim=True), "overflows"),
    ("axis-0", checks.check_softmax, lambda z: softmax_safe(z.transpose(0, -1)).transpose(0, -1), "wrong axis"),
    ("axis-1", checks.check_softmax,
     lambda z: F.softmax(z, dim=-2) if z.dim() > 1 else F.softmax(z, dim=-1), "wrong axis"),
    ("whole-sum", checks.check_softmax, lambda z: z.exp() / z.exp().sum(), "sum of the whole tensor"),
    ("no-keepdim", checks.check_softmax, lambda z: z.exp() / z.exp().sum(-1), "keepdim=True"),
    # chapter 4
    ("no-mask", checks.check_causal_weights, lambda s: F.softmax(s, dim=-1), "no mask"),
    ("mask-past", checks.check_causal_weights,
     lambda s: F.softmax(s.masked_fill(_tril(s.shape[-1]) == 1, NEG), -1), "hides the past instead of the future"),
    ("mask-past-triu", checks.check_causal_weights,
     lambda s: F.softmax(s.masked_fill(torch.triu(torch.ones(s.shape[-1], s.shape[-1])) == 0, NEG), -1),
     "hides the past instead of the future"),
    ("mask-after", checks.check_causal_weights,
     lambda s: F.softmax(s, -1).masked_fill(_tril(s.shape[-1]) == 0, 0), "masking after the softmax"),
    ("mask-after-inf", checks.check_causal_weights,
     lambda s: F.softmax(s, -1).masked_fill(_tril(s.shape[-1]) == 0, NEG), "masking after the softmax"),
    ("fill-zero", checks.check_causal_weights, lambda s: weights_ref(s, fill=0.0), "instead of -inf"),
    ("wrong-axis", checks.check_causal_weights,
     lambda s: F.softmax(s.masked_fill(_tril(s.shape[-1]) == 0, NEG), dim=-2), "wrong axis"),
    ("fixed-size-mask", checks.check_causal_weights,
     lambda s: F.softmax(s.masked_fill(_tril(8) == 0, NEG), -1), "tril[:T, :T]"),
    # chapter 5: the head
    ("head-no-scale", checks.check_head, head_variant(scale="none"), "no 1/√d_k scaling"),
    ("head-divide-dk", checks.check_head, head_variant(scale="dk"), "dividing by d_k"),
    ("head-sqrt-C", checks.check_head, head_variant(scale="sqrt_C"), "scaling by √C"),
    ("head-mask-past", checks.check_head, head_variant(mask="past"), "hides the past instead of the future"),
    ("head-no-mask", checks.check_head, head_variant(mask="none"), "no mask"),
    ("head-mask-after", checks.check_head, head_variant(after=True), "masking after the softmax"),
    ("head-wrong-axis", checks.check_head, head_variant(dim=-2), "softmax over the wrong axis"),
    ("head-bias", checks.check_head, head_variant(bias=True), "projections with bias"),
    ("head-tril-parameter", checks.check_head, head_variant(tril_as="parameter"), "registered as a parameter"),
    ("head-tril-attribute", checks.check_head, head_variant(tril_as="attribute"), "not a buffer"),
    ("head-tril-missing", checks.check_head, head_variant(tril_as="none", forward=HeadSDPA.forward), "missing"),
    ("head-averages-x", checks.check_head, head_variant(values="x"), "averaging x instead of v"),
    ("head-qk-swapped", checks.check_head, head_variant(swap=True), "q and k swapped"),
    ("head-T-lt-block", checks.check_head, head_variant(slice_mask=False), "T < block_size"),
    # chapter 5: go deeper
    ("sdpa-not-causal", checks.check_sdpa_swap,
     lambda h, x: F.scaled_dot_product_attention(h.query(x), h.key(x), h.value(x)), "is_causal=True"),
    ("sdpa-qk-swapped", checks.check_sdpa_swap,
     lambda h, x: F.scaled_dot_product_attention(h.key(x), h.query(x), h.value(x), is_causal=True), "q and k swapped"),
    ("sdpa-not-used", checks.check_sdpa_swap, lambda h, x: h(x), "never calls F.scaled_dot_product_attention"),
]


@pytest.mark.parametrize("check, answer, words", [w[1:] for w in WRONG], ids=[w[0] for w in WRONG])
def test_each_mistake_is_named(check, answer, words, capsys):
    with pytest.raises(AssertionError) as info:
        check(answer)
    message = str(info.value)
    assert words in message
    assert capsys.readouterr().out == ""  # no pass line for a wrong answer


@pytest.mark.parametrize(
    "check, answer",
    [
        (checks.check_causal_average, average_future),
        (checks.check_head, head_variant(scale="none")),
        (checks.check_softmax, lambda z: z.exp() / z.exp().sum(-1, keepdim=True)),
    ],
)
def test_messages_give_expected_vs_got(check, answer):
    with pytest.raises(AssertionError) as info:
        check(answer)
    message = str(info.value)
    assert "expected" in message and "got" in message


def test_wrong_shape_is_reported_as_expected_vs_got():
    with pytest.raises(AssertionError, match=r"wrong shape .* expected \(4, 8, 384\), got \(4, 384\)"):
        checks.check_causal_average(lambda x: x.mean(1))


def test_forgetting_to_return_is_named():
    with pytest.raises(AssertionError, match="forget to `return`"):
        checks.check_causal_average(lambda x: None)


def test_an_unnamed_mistake_falls_back_to_expected_vs_got():
    with pytest.raises(AssertionError, match="and the reference differ") as info:
        checks.check_causal_average(lambda x: average_matmul(x) + 0.5 * x)
    assert "largest difference" in str(info.value)


def test_other_exceptions_name_the_learners_code_and_inputs():
    def causal_average(x):
        return x @ torch.ones(3, 3)

    with pytest.raises(AssertionError) as info:
        checks.check_causal_average(causal_average)
    message = str(info.value)
    assert "your `causal_average` raised RuntimeError" in message
    assert "x of shape (4, 8, 384)" in message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_weights_that_peek_at_the_future_name_batch_and_row():
    weights = weights_ref(torch.randn(2, 5, 5))
    weights[1, 2, 4] = 0.25
    with pytest.raises(AssertionError, match=r"not lower-triangular.*batch 1, row 2"):
        checks.check_weights_are_causal(weights)


def test_weights_whose_rows_do_not_sum_to_one_name_batch_and_row():
    weights = weights_ref(torch.randn(3, 4, 4))
    weights[2, 3] *= 0.5
    with pytest.raises(AssertionError, match=r"rows don't sum to one: batch 2, row 3"):
        checks.check_weights_are_causal(weights)


def test_weights_without_mask_are_not_causal():
    with pytest.raises(AssertionError, match="not lower-triangular"):
        checks.check_weights_are_causal(F.softmax(torch.randn(2, 4, 4), -1))


# ---------------------------------------------------------------- a stub is answered kindly

STUBS = [
    (checks.check_causal_average, stub, "stub"),
    (checks.check_projection, stub, "stub"),
    (checks.check_scaled_scores, stub, "stub"),
    (checks.check_softmax, stub, "stub"),
    (checks.check_causal_weights, stub, "stub"),
    (checks.check_head, StubHead, "StubHead"),
    (checks.check_head, StubForwardHead, "StubForwardHead"),
    (checks.check_sdpa_swap, stub, "stub"),
    (checks.check_weights_are_causal, stub, "stub"),
    (checks.check_weights_are_causal, None, "weights"),
]


@pytest.mark.parametrize("check, answer, name", STUBS)
def test_a_stub_says_not_yet_implemented(check, answer, name, capsys):
    assert check(answer) is None
    out = capsys.readouterr().out
    assert out == f"✗ not yet implemented: fill in `{name}` above, then run this cell again.\n"


def test_importing_checks_prints_nothing():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", "import attention_lab.checks"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
