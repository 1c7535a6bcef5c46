"""Tests of attention_lab.diagnose: a head in each common style, right and with each mistake, gets
exactly the verdicts it should; odd input gives a card, never an exception."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab.checks import CheckFailed
from attention_lab.diagnose import Diagnosis, Verdict, diagnose

NEG = float("-inf")
C, HS, BS = 64, 16, 8
SCALES = {
    "1/sqrt(d_k)": lambda C, hs: hs ** -0.5,
    "1/sqrt(C)": lambda C, hs: C ** -0.5,
    "1/d_k": lambda C, hs: 1 / hs,
    "none": lambda C, hs: 1.0,
    "0.3": lambda C, hs: 0.3,
    "temperature 1.5": lambda C, hs: hs ** -0.5 / 1.5,
    "3 % high": lambda C, hs: 1.03 * hs ** -0.5,
}


def weigh(scores, keep, how, C, hs, dropout=None):
    """The lesson's steps from raw scores q @ k^T to weights, with the mistakes ``how`` names."""
    T, block_size = scores.shape[-1], keep.shape[-1]
    scores = scores * SCALES[how.get("scale", "1/sqrt(d_k)")](C, hs)
    if how.get("slice", True):
        keep = keep[:T, :T]
    if "leak" in how and T > max(how["leak"]):  # one entry above the diagonal left open
        keep = keep.clone()
        keep[how["leak"]] = True
    if how.get("alibi"):  # ALiBi's bias: -0.5 for each position back
        scores = scores - 0.5 * (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0)
    if how.get("only_at_block_size") and T < block_size:
        keep = torch.ones_like(keep)  # the mask is applied only when T == block_size
    mask = how.get("mask", "before")
    if mask == "before":
        scores = scores.masked_fill(~keep, how.get("fill", NEG))
    elif mask == "float":  # a float 0/1 tril added, as SDPA does with a float attn_mask
        scores = scores + keep.to(scores.dtype)
    weights = F.softmax(scores.half() if how.get("half") else scores, dim=how.get("dim", -1)).to(scores.dtype)
    if mask == "after":
        weights = weights.masked_fill(~keep, 0.0)
    weights = weights * how.get("factor", 1.0)  # a factor after the softmax, as on the output
    if how.get("dropout_on"):
        weights = F.dropout(weights, p=0.2)  # training=True unless told: on in eval() too
    elif dropout is not None:
        weights = dropout(weights)
    return weights


def clip_in_place(x, how):
    if how.get("inplace"):
        x.masked_fill_(x.abs() > 2, 0.0)  # changes the caller's x


# ---------------------------------------------------------------- the styles


class Head(nn.Module):
    """(a) the lesson's head: key, query, value and a tril buffer."""

    def __init__(self, C, head_size, block_size, how):
        super().__init__()
        self.how, self.C = how, C
        self.key = nn.Linear(C, head_size, bias=False)
        self.query = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        clip_in_place(x, self.how)
        k, q, v = self.key(x), self.query(x), self.value(x)  # (B, T, hs)
        scores = q @ k.transpose(-2, -1)  # (B, T, T)
        return weigh(scores, self.tril == 1, self.how, self.C, k.shape[-1]) @ v


class CausalSelfAttention(nn.Module):
    """(b) nanoGPT's: fused c_attn, heads split out, c_proj, mask named bias, n_head = 1."""

    def __init__(self, n_embd, n_head, block_size, how):
        super().__init__()
        self.how, self.n_head, self.n_embd = how, n_head, n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.1), nn.Dropout(0.1)
        ones = torch.ones(block_size, block_size)
        self.register_buffer("bias", torch.tril(ones).view(1, 1, block_size, block_size))

    def forward(self, x):
        clip_in_place(x, self.how)
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = weigh(q @ k.transpose(-2, -1), self.bias[0, 0] == 1, self.how, C, k.size(-1),
                    self.attn_dropout)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MultiHeadAttention(nn.Module):
    """(c) a multi-head module (heads in a ModuleList, an output projection), here with one head."""

    def __init__(self, C, n_head, head_size, block_size, how):
        super().__init__()
        self.heads = nn.ModuleList([Head(C, head_size, block_size, how) for _ in range(n_head)])
        self.proj = nn.Linear(n_head * head_size, C)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)  # (B, T, n_head * hs)
        return self.dropout(self.proj(out))


class CausalAttention(nn.Module):
    """(d) W_query/W_key/W_value, a triu mask, dropout on the weights (as in "LLMs from scratch")."""

    def __init__(self, d_in, d_out, context_length, dropout, how):
        super().__init__()
        self.how, self.d_in = how, d_in
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.dropout = nn.Dropout(dropout)
        ones = torch.ones(context_length, context_length)
        self.register_buffer("mask", torch.triu(ones, diagonal=1))

    def forward(self, x):
        clip_in_place(x, self.how)
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_weights = weigh(attn_scores, self.mask == 0, self.how, self.d_in, keys.shape[-1],
                             self.dropout)
        return attn_weights @ values


def attention_of_qkv(block_size, how, C=C):
    """(e) a function of (q, k, v), closing over its mask."""
    tril = torch.tril(torch.ones(block_size, block_size))

    def attention(q, k, v):
        if how.get("inplace"):
            q *= q.shape[-1] ** -0.5  # scales the caller's q
            return weigh(q @ k.transpose(-2, -1), tril == 1, dict(how, scale="none"), C,
                         q.shape[-1]) @ v
        return weigh(q @ k.transpose(-2, -1), tril == 1, how, C, q.shape[-1]) @ v

    return attention


def head_of_x(C, head_size, block_size, how):
    """(f) a function of x, closing over its layers and mask."""
    key, query, value = (nn.Linear(C, head_size, bias=False) for _ in range(3))
    tril = torch.tril(torch.ones(block_size, block_size))

    def head(x):
        clip_in_place(x, how)
        k, q, v = key(x), query(x), value(x)
        return weigh(q @ k.transpose(-2, -1), tril == 1, how, C, head_size) @ v

    return head


STYLES = {
    "lesson": lambda how: (Head(C, HS, BS, how), {}),
    "nanogpt": lambda how: (CausalSelfAttention(C, 1, BS, how), {}),
    "multihead": lambda how: (MultiHeadAttention(C, 1, HS, BS, how), {}),
    "W_query": lambda how: (CausalAttention(C, HS, BS, 0.2, how), {}),
    "qkv-function": lambda how: (attention_of_qkv(BS, how), dict(C=C, head_size=HS)),
    "x-function": lambda how: (head_of_x(C, HS, BS, how), {}),
}

# mistake -> (how, the verdicts that fail, the verdicts not measured, words the card must say)
MISTAKES = {
    "scale 1/sqrt(C)": (dict(scale="1/sqrt(C)"), {"scale", "sdpa"}, set(), "1/√C = 1/√64"),
    "scale 1/d_k": (dict(scale="1/d_k"), {"scale", "sdpa"}, set(), "not by head_size"),
    "no scale": (dict(scale="none"), {"scale", "sdpa"}, set(), "multiply them by head_size ** -0.5"),
    "softmax over queries": (dict(dim=-2), {"causal", "softmax_axis", "sdpa"}, set(), "dim=-1"),
    "mask after softmax": (dict(mask="after"), {"causal", "mask_order", "sdpa"}, set(),
                           "fill the scores with -inf, then take the softmax"),
    "no mask": (dict(mask="none"), {"causal", "sdpa"}, {"mask_order", "exact_mask"},
                "tril[:T, :T] == 0"),
    "fill -20": (dict(fill=-20.0), {"exact_mask"}, set(), "fill with float('-inf')"),
    "fill -1e9": (dict(fill=-1e9), set(), set(), ""),
    "dropout on in eval": (dict(dropout_on=True), {"eval_dropout"}, set(), "training=self.training"),
    "mask not sliced": (dict(slice=False), {"short_T"}, set(), "slice the mask with tril[:T, :T]"),
    "in place": (dict(inplace=True), {"in_place"}, set(), "in place"),
    "row 5 sees key 6": (dict(leak=(5, 6)), {"causal", "sdpa"}, set(), "row 5 sees key 6"),
    # what else a head may do, each named even where the scale is read at the same time
    "fill -5": (dict(fill=-5.0), {"causal", "exact_mask", "sdpa"}, set(), "the mask fills about -5"),
    "ALiBi bias": (dict(alibi=True), {"extras", "sdpa"}, set(), "ALiBi's linear bias, -0.5 × (i − j)"),
    "float16 softmax": (dict(half=True), {"extras", "sdpa"}, set(), "a float16 softmax: every weight is a float16"),
    "softmax over the batch": (dict(dim=0, fill=-1e9), {"causal", "softmax_axis", "sdpa"},
                               {"mask_order", "exact_mask"}, "softmax over the batch (dim=0)"),
    "float 0/1 mask": (dict(mask="float"), {"causal", "extras", "sdpa"}, {"mask_order", "exact_mask"},
                       "a float 0/1 mask added to the scores"),
    "mask only at T = block_size": (dict(only_at_block_size=True), {"causal"}, set(),
                                    "not causal at T=4 < block_size=8"),
    "temperature": (dict(scale="temperature 1.5"), {"scale", "sdpa"}, set(), "= 1/√d_k / 1.5"),
    "scale 3 % high": (dict(scale="3 % high"), {"scale", "sdpa"}, set(), "scale off by +3 %"),
    "output doubled": (dict(factor=2.0), {"extras", "sdpa"}, set(), "so out = 2 · weights @ v"),
}


def card_of(style, how):
    torch.manual_seed(0)
    obj, sizes = STYLES[style](how)
    return diagnose(obj, **sizes)


def assert_card(card, failing, unmeasured=frozenset()):
    got = {name: v.ok for name, v in card.verdicts().items()}
    expected = {name: (False if name in failing else None if name in unmeasured else True)
                for name in got}
    assert got == expected, str(card)


@pytest.mark.parametrize("style", STYLES)
def test_right_head_passes_everything(style):
    card = card_of(style, {})
    assert_card(card, set())
    assert card.sdpa.value <= 1e-5
    hs = C if style == "nanogpt" else HS
    assert card.scale.value == pytest.approx(hs ** -0.5, rel=1e-4)
    assert f"1/√{hs} (right)" in str(card)
    assert "✗" not in str(card) and "–" not in str(card)


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("style", STYLES)
def test_each_mistake_fails_exactly_its_verdicts(style, mistake):
    how, failing, unmeasured, words = MISTAKES[mistake]
    if style == "nanogpt" and how.get("scale") == "1/sqrt(C)":
        pytest.skip("nanoGPT with n_head = 1 has head_size = C: see test_nanogpt_sqrt_C_is_right")
    card = card_of(style, how)
    assert_card(card, failing, unmeasured)
    text = " ".join(str(card).split())  # the card wraps its lines at 77 characters
    assert words in text
    for name in failing:
        assert getattr(card, name).line().startswith("✗"), text


def test_nanogpt_sqrt_C_is_right():
    # one head of nanoGPT's is all of C wide, so 1/√C is 1/√head_size: no mistake to name
    card = card_of("nanogpt", dict(scale="1/sqrt(C)"))
    assert_card(card, set())
    assert "(C=64, head_size=64" in str(card) or "C=64, head_size=64" in str(card)


@pytest.mark.parametrize("style", ["lesson", "W_query", "qkv-function"])
def test_finite_fill_names_its_value(style):
    card = card_of(style, dict(fill=-20.0))
    assert card.exact_mask.value > 0.5  # with scores of -1e5 the future key takes the weight
    assert "fills about -20" in card.exact_mask.text


@pytest.mark.parametrize("style", ["lesson", "W_query", "qkv-function"])
def test_a_zero_fill_is_named_as_zero_not_as_a_small_number(style):
    card = card_of(style, dict(fill=0.0))
    assert not card.exact_mask.ok and card.exact_mask.text.startswith("zero fill:"), card.exact_mask.text
    assert "e^0 = 1" in card.exact_mask.text and "e-0" not in card.exact_mask.text


@pytest.mark.parametrize("style, sizes", [
    ("lesson", "C=64, head_size=16 (from its projections); block_size=8 (from its mask)"),
    ("nanogpt", "C=64, head_size=64 (from its projections); block_size=8 (from its mask)"),
    ("multihead", "C=64, head_size=16 (from its projections); block_size=8 (from its mask)"),
    ("W_query", "C=64, head_size=16 (from its projections); block_size=8 (from its mask)"),
    ("qkv-function", "head_size=16 (given); block_size=8 (from its mask)"),
    ("x-function", "C=64, head_size=16 (from its projections); block_size=8 (from its mask)"),
])
def test_sizes_are_inferred_and_said(style, sizes):
    assert card_of(style, {}).sizes == sizes


@pytest.mark.parametrize("style", ["lesson", "nanogpt", "qkv-function"])
def test_an_unexpected_scale_is_fitted(style):
    card = card_of(style, dict(scale="0.3"))
    assert_card(card, {"scale", "sdpa"})
    assert card.scale.value == pytest.approx(0.3, rel=1e-4)
    assert card.scale.text.startswith("scale with a temperature: s = 0.3 = 1/√d_k / ")


def test_weights_that_are_no_softmax_are_said_to_be():
    tril = torch.tril(torch.ones(BS, BS))

    def attention(q, k, v):
        T = q.shape[1]
        weights = torch.sigmoid(q @ k.transpose(-2, -1)) * tril[:T, :T]  # not normalized at all
        return weights @ v

    card = diagnose(attention, head_size=HS)
    # the softmax is named as missing; the scale and the mask order have no softmax to be read in; the
    # lines that need none are still measured
    assert card.softmax_axis.ok is False and "sum to one number along no axis" in card.softmax_axis.text
    assert card.scale.ok is None and card.mask_order.ok is None and card.extras.ok is None
    assert card.causal.ok and card.exact_mask.ok and card.state.ok and card.sdpa.ok is False


@pytest.mark.parametrize("style, layer", [("nanogpt", "c_proj"), ("multihead", "proj")])
def test_an_output_projection_is_read_at_its_input(style, layer):
    card = card_of(style, {})
    assert card.runs.text.endswith(f", read at the input of `{layer}`")


def test_the_future_row_is_named():
    card = card_of("lesson", dict(leak=(2, 7)))
    assert card.causal.value == (2, 7)
    assert "row 2 sees key 7" in card.causal.text


@pytest.mark.parametrize("how", [dict(dim=-2), dict(mask="after")])
def test_a_row_that_depends_on_later_positions_without_weighting_them_is_named(how):
    # the future weights are 0, yet the softmax's sum reaches later queries or keys
    card = card_of("lesson", how)
    assert card.causal.value == (0, 1)
    assert ("row 0 depends on position 1, though its weight on key 1 is 0"
            in card.causal.text)


# ---------------------------------------------------------------- odd input


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = nn.Linear(C, HS, bias=False)

    def forward(self, x):
        raise ValueError("learner's bug")


def weights_not_out(x):
    q = k = x[..., :HS]
    return F.softmax(q @ k.transpose(-2, -1), dim=-1)  # (B, T, T): forgot `@ v`


def nan_head(q, k, v):
    return v * float("nan")


@pytest.mark.parametrize("obj, sizes, words", [
    (42, {}, "not callable: diagnose takes an nn.Module, a function of x or of (q, k, v); got a int"),
    (Raises(), {}, "forward raised ValueError: learner's bug at x of shape (2, 8, 64)"),
    (weights_not_out, dict(C=C, head_size=HS, block_size=BS),
     "returns shape (2, 8, 8); expected (B, T, head_size) = (2, 8, 16) at T=8"),
    (nan_head, dict(head_size=HS), "returns nan or inf at T=8"),
    (lambda x: x, {}, "C not inferred: no nn.Linear or weight matrix found; call diagnose(obj, C=...)"),
    (Head, {}, "Head is a class: diagnose one of its heads, e.g. diagnose(Head(C, head_size, "
               "block_size))"),
])
def test_odd_input_gives_a_card(obj, sizes, words):
    card = diagnose(obj, **sizes)
    assert card.runs.ok is False and words in card.runs.text
    assert card.failed == ["runs"]
    assert all(v.ok is None for name, v in card.verdicts().items() if name != "runs")
    assert "– scale: not measured: the head did not run" in str(card).splitlines()


def test_function_of_x_without_layers_is_measured_where_it_can_be():
    card = diagnose(lambda x: torch.cumsum(x, 1)[..., :HS] / torch.arange(1, x.shape[1] + 1)[:, None],
                    C=C, head_size=HS, block_size=BS)
    assert card.causal.ok and card.short_T.ok and card.in_place.ok and card.eval_dropout.ok
    for name in ("scale", "softmax_axis", "mask_order", "exact_mask", "sdpa"):
        assert getattr(card, name).ok is None
    assert "q, k, v projections not found" in card.sizes


def test_a_bound_forward_is_read_like_its_module():
    head, _ = STYLES["W_query"](dict(scale="1/d_k"))
    card = diagnose(head.forward)
    assert card.kind == "a function of x"
    assert_card(card, {"scale", "sdpa"})


def test_a_square_weight_is_not_taken_for_the_mask():
    square = nn.Linear(C, C, bias=False)  # a (C, C) tensor in the closure, not 0/1
    key, query, value = (nn.Linear(C, HS, bias=False) for _ in range(3))
    weight = square.weight.detach()

    def head(x):
        x = x + 0 * (x @ weight)
        k, q, v = key(x), query(x), value(x)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    card = diagnose(head)
    assert card.sizes.startswith("C=64, head_size=16 (from its projections); block_size not inferred")
    assert_card(card, set())


class ParameterHead(nn.Module):
    """Projections as bare nn.Parameter matrices, read as such."""

    def __init__(self):
        super().__init__()
        self.W_k, self.W_q, self.W_v = (nn.Parameter(torch.randn(C, HS) / 8) for _ in range(3))

    def forward(self, x):
        q, k, v = x @ self.W_q, x @ self.W_k, x @ self.W_v
        return F.scaled_dot_product_attention(q, k, v, None, 0.1, is_causal=True)  # dropout on


def test_a_head_of_bare_parameter_matrices_is_read():
    card = diagnose(ParameterHead(), block_size=BS)
    assert card.sizes.startswith("C=64, head_size=16 (from its projections)")
    assert_card(card, {"eval_dropout"})  # its SDPA call has dropout_p=0.1, on in eval() too


def test_short_T_raises_name_the_error_and_T():
    card = card_of("lesson", dict(slice=False))
    assert card.short_T.value == 1
    assert card.short_T.text.startswith("forward raised RuntimeError: ")
    assert "at T=1 < block_size=8: slice the mask with tril[:T, :T]" in card.short_T.text


# ---------------------------------------------------------------- how it runs


def test_strict_raises_check_failed_with_the_first_failing_line():
    card = card_of("lesson", dict(scale="1/sqrt(C)"))
    obj, _ = STYLES["lesson"](dict(scale="1/sqrt(C)"))
    with pytest.raises(CheckFailed) as raised:
        diagnose(obj, strict=True)
    assert str(raised.value) == card.scale.line()
    assert raised.value.mistake == "diagnose/scale"
    good, _ = STYLES["lesson"]({})
    assert isinstance(diagnose(good, strict=True), Diagnosis)


def test_learners_head_and_rng_are_left_alone():
    head, _ = STYLES["nanogpt"]({})
    head.train()
    state = {k: t.clone() for k, t in head.state_dict().items()}
    torch.manual_seed(5)
    rng = torch.get_rng_state()
    diagnose(head)
    assert torch.equal(torch.get_rng_state(), rng)
    assert head.training and all(m.training for m in head.modules())
    assert not any(m._forward_hooks for m in head.modules())
    assert all(torch.equal(state[k], t) for k, t in head.state_dict().items())
    fn = head_of_x(C, HS, BS, {})
    diagnose(fn)
    layers = [c.cell_contents for c in fn.__closure__ if isinstance(c.cell_contents, nn.Module)]
    assert layers and all(m.training and not m._forward_hooks for m in layers)


def test_the_card_shows_in_a_notebook():
    card = card_of("lesson", dict(mask="after"))
    text = str(card)
    assert repr(card) == text
    lines = text.splitlines()
    assert lines[0].startswith("diagnose(Head): a module; C=64, head_size=16")
    assert [line[0] for line in lines[1:] if not line.startswith("  ")] == [
        "✓", "✗", "✓", "✓", "✗", "✓", "✓", "✓", "✓", "✓", "✓", "✗"]
    assert all(len(line) <= 77 for line in lines)

    class Printer:
        def __init__(self):
            self.out = ""

        def text(self, s):
            self.out += s

    p = Printer()
    card._repr_pretty_(p, False)
    assert p.out == text


def test_verdict_line_marks():
    assert Verdict(True, "a").line() == "✓ a"
    assert Verdict(False, "b").line() == "✗ b"
    assert Verdict(None, "c").line() == "– c"
