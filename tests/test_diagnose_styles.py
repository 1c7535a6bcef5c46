"""Tests of attention_lab.diagnose on the styles the lesson's own styles (tests/test_diagnose.py) do not
cover: nn.MultiheadAttention with one head, bare nn.Parameter projections, functions returning
(out, weights), heads that keep state between calls, and modules of several heads, which the card
names in one line. Every line of every card is asserted."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab import checks
from attention_lab.diagnose import Diagnosis
from attention_lab.reference import CausalSelfAttention

NEG = float("-inf")
C, HS, BS = 48, 12, 8


def _causal_weights(q, k, scale=None, mask=True):
    T = q.shape[-2]
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if mask:
        scores = scores.masked_fill(torch.ones(T, T).triu(1).bool(), NEG)
    return F.softmax(scores, dim=-1)


class MHAHead(nn.Module):
    """A head built on nn.MultiheadAttention with one head, given the causal mask as ``attn_mask``."""

    def __init__(self, mask="bool", batch_first=True):
        super().__init__()
        self.attn = nn.MultiheadAttention(C, 1, batch_first=batch_first)
        self.mask_kind = mask
        self.register_buffer("hidden", torch.ones(BS, BS).triu(1).bool())  # True above the diagonal

    def forward(self, x):
        T = x.shape[1]
        mask = {"bool": self.hidden[:T, :T], "float": (~self.hidden[:T, :T]).float(), "none": None}[self.mask_kind]
        if not self.attn.batch_first:
            x = x.transpose(0, 1)
        out = self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
        return out if self.attn.batch_first else out.transpose(0, 1)


class ParameterHead(nn.Module):
    """Projections as bare nn.Parameter matrices, (C, hs) used as x @ W, or (hs, C) as F.linear(x, W)."""

    def __init__(self, linear=False, scale=None, mask=True):
        super().__init__()
        shape = (HS, C) if linear else (C, HS)
        self.W_q, self.W_k, self.W_v = (nn.Parameter(torch.randn(*shape) / 8) for _ in range(3))
        self.linear, self.scale, self.mask = linear, scale, mask
        self.register_buffer("tril", torch.tril(torch.ones(BS, BS)))

    def forward(self, x):
        q, k, v = (F.linear(x, W) if self.linear else x @ W for W in (self.W_q, self.W_k, self.W_v))
        return _causal_weights(q, k, self.scale, self.mask) @ v


def returns_pair(scale=None, after=False):
    """A function of x returning (out, weights), as many tutorials' heads do."""
    key, query, value = (nn.Linear(C, HS, bias=False) for _ in range(3))
    tril = torch.tril(torch.ones(BS, BS))

    def attention(x):
        T = x.shape[1]
        q, k, v = query(x), key(x), value(x)
        if after:
            w = F.softmax(q @ k.mT / HS ** 0.5, -1).masked_fill(tril[:T, :T] == 0, 0.0)
        else:
            w = _causal_weights(q, k, scale)
        return w @ v, w

    return attention


class KeepsKeys(nn.Module):
    """A head that keeps the keys of its first call and uses them for every later x."""

    def __init__(self):
        super().__init__()
        self.key, self.query, self.value = (nn.Linear(C, HS, bias=False) for _ in range(3))
        self.register_buffer("tril", torch.tril(torch.ones(BS, BS)))

    def forward(self, x):
        if not hasattr(self, "first_k") or self.first_k.shape != (x.shape[0], x.shape[1], HS):
            self.first_k = self.key(x)
        return _causal_weights(self.query(x), self.first_k) @ self.value(x)


class Counts(KeepsKeys):
    """A head whose output is multiplied by the number of calls it has had."""

    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        return self.calls * (_causal_weights(self.query(x), self.key(x)) @ self.value(x))


def cached_by_shape():
    key, query, value = (nn.Linear(C, HS, bias=False) for _ in range(3))
    tril, kept = torch.tril(torch.ones(BS, BS)), {}

    def head(x):
        if x.shape not in kept:
            kept[x.shape] = _causal_weights(query(x), key(x)) @ value(x) + 0 * tril.sum()
        return kept[x.shape]

    return head


class NanoGPT(nn.Module):
    """nanoGPT's CausalSelfAttention with n_head heads."""

    def __init__(self, n_embd=32, n_head=2):
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(BS, BS)).view(1, 1, BS, BS))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k, q, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (k, q, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, NEG).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class Heads(nn.Module):
    """Several lesson heads in a ModuleList, their outputs side by side."""

    def __init__(self, n=2):
        super().__init__()
        self.heads = nn.ModuleList([KeepsKeys() for _ in range(n)])  # (only their layers are used)

    def forward(self, x):
        return torch.cat([F.scaled_dot_product_attention(h.query(x), h.key(x), h.value(x), is_causal=True)
                          for h in self.heads], -1)


# style -> (builder, diagnose's keywords, the lines that fail, those not measured, words of each ✗ line)
CARDS = {
    "MHA in a module, bool mask": (lambda: MHAHead(), {}, set(), set(), {}),
    "MHA in a module, not batch first": (lambda: MHAHead(batch_first=False), {}, set(), set(), {}),
    "MHA alone": (lambda: nn.MultiheadAttention(C, 1, batch_first=True), {}, {"causal", "sdpa"},
                  {"mask_order", "exact_mask"}, {"causal": "nn.MultiheadAttention masks nothing by itself"}),
    "MHA given a float 0/1 mask": (lambda: MHAHead(mask="float"), {}, {"causal", "extras", "sdpa"},
                                   {"mask_order", "exact_mask"}, {"extras": "a float 0/1 mask added to the scores"}),
    "MHA without a mask": (lambda: MHAHead(mask="none"), {}, {"causal", "sdpa"}, {"mask_order", "exact_mask"},
                           {"causal": "row 0 sees key 1"}),
    "parameters x @ W": (lambda: ParameterHead(), {}, set(), set(), {}),
    "parameters F.linear": (lambda: ParameterHead(linear=True), {}, set(), set(), {}),
    "parameters scaled by 1/sqrt(C)": (lambda: ParameterHead(scale=C ** -0.5), {}, {"scale", "sdpa"}, set(),
                                       {"scale": "scale 1/√C = 1/√48"}),
    "parameters without a mask": (lambda: ParameterHead(mask=False), {}, {"causal", "sdpa"},
                                  {"mask_order", "exact_mask"}, {"causal": "sees key"}),
    "(out, weights)": (lambda: returns_pair(), {}, set(), set(), {}),
    "(out, weights) unscaled": (lambda: returns_pair(scale=1.0), {}, {"scale", "sdpa"}, set(),
                                {"scale": "the scores are not scaled"}),
    "(out, weights) masked after": (lambda: returns_pair(after=True), {}, {"causal", "mask_order", "sdpa"}, set(),
                                    {"mask_order": "mask after the softmax"}),
    "keeps its first keys": (KeepsKeys, {}, {"state"}, set(), {"state": "keeps something between calls"}),
    "counts its calls": (Counts, {}, {"state"}, set(), {"state": "scaled by 2 after one more call"}),
    "function caching by shape": (cached_by_shape, {}, {"state"},
                                  {"causal", "scale", "softmax_axis", "mask_order", "exact_mask", "extras", "sdpa"},
                                  {"state": "returns the output of the x before"}),
}


@pytest.mark.parametrize("style", CARDS)
def test_every_line_of_the_card(style):
    build, sizes, failing, unmeasured, words = CARDS[style]
    torch.manual_seed(0)
    card = checks.diagnose(build(), **sizes)
    got = {name: v.ok for name, v in card.verdicts().items()}
    expected = {name: (False if name in failing else None if name in unmeasured else True) for name in got}
    assert got == expected, str(card)
    for name, text in words.items():
        assert text in " ".join(getattr(card, name).text.split()), str(card)
    assert card.heads == 1 and len([line for line in str(card).splitlines() if line[0] in "✓✗–"]) == 12


def test_an_output_returned_with_its_weights_is_read_at_the_output():
    card = checks.diagnose(returns_pair())
    assert card.runs.text.endswith(", the first of the (out, weights) it returns")


def test_a_multihead_attention_is_read_at_the_input_of_its_out_proj():
    card = checks.diagnose(MHAHead())
    assert card.sizes.startswith("C=48, head_size=48 (from its projections); block_size=8 (from its mask)")
    assert card.runs.text.endswith(", read at the input of `attn.out_proj`")


@pytest.mark.parametrize("build, n, hs", [
    (lambda: Heads(2), 2, HS),
    (lambda: nn.MultiheadAttention(C, 3, batch_first=True), 3, 16),
])
def test_a_module_of_several_heads_is_named_in_one_line_not_read_as_one_wide_head(build, n, hs):
    card = checks.diagnose(build())
    assert f"{n} heads of size {hs}" in card.sizes
    assert str(card).endswith("\n" + card.runs.line())  # the card is its first line and this one
    assert " ".join(card.runs.line().split()).startswith(f"– {n} heads side by side (n_head = {n}), each of "
                                                         f"size {hs}: diagnose reads one head at a time")
    assert card.heads == n and card.failed == []
    assert isinstance(checks.diagnose(build(), strict=True), Diagnosis)  # nothing wrong was measured


# ---- chapter 7: several heads in nanoGPT's layout, read head by head


class OneHeadWrong(NanoGPT):
    """nanoGPT's layer whose head ``bad`` alone is scaled by √C, or left unmasked."""

    def __init__(self, n_embd, n_head, bad, how):
        super().__init__(n_embd, n_head)
        self.bad, self.how = bad, how

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        scale = torch.full((self.n_head, 1, 1), 1.0 / math.sqrt(k.size(-1)))
        if self.how == "scale":
            scale[self.bad] = 1.0 / math.sqrt(C)
        hidden = (self.bias[0, 0, :T, :T] == 0).expand(self.n_head, T, T).clone()
        if self.how == "mask":
            hidden[self.bad] = False
        att = (q @ k.transpose(-2, -1) * scale).masked_fill(hidden, NEG).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


@pytest.mark.parametrize("build, n, hs", [(lambda: NanoGPT(32, 2), 2, 16), (lambda: NanoGPT(48, 4), 4, 12),
                                          (lambda: CausalSelfAttention(64, 4), 4, 16)])
def test_several_heads_in_nanogpts_layout_are_read_head_by_head(build, n, hs):
    card = checks.diagnose(build())
    assert f"{n} heads of size {hs}" in card.sizes and card.heads == n and len(card.cards) == n
    assert card.failed == [] and all(c.failed == [] for c in card.cards)
    assert card.scale.text == f"scale 1/√d_k = 1/√{hs} (right) (each of the {n} heads)"
    assert f"(B, T, head_size) = (2, 8, {hs}), read at the input of `c_proj`" in card.runs.text
    assert isinstance(checks.diagnose(build(), strict=True), Diagnosis)


@pytest.mark.parametrize("n, bad, how, line, words", [
    (4, 2, "scale", "scale", "head 2: scale 1/√C = 1/√64"),
    (4, 0, "scale", "scale", "head 0: scale 1/√C = 1/√64"),
    (4, 1, "mask", "causal", "head 1: not causal: row 0 sees key 1"),
    (2, 1, "mask", "causal", "head 1: not causal"),
])
def test_the_card_names_the_one_head_that_is_wrong(n, bad, how, line, words):
    card = checks.diagnose(OneHeadWrong(64, n, bad, how))
    assert card.failed[0] == line and " ".join(getattr(card, line).text.split()).startswith(words), str(card)
    assert [c.failed != [] for c in card.cards] == [j == bad for j in range(n)]
    assert "(heads" not in str(card)  # one head is wrong, and only it is named
    with pytest.raises(checks.CheckFailed, match=f"head {bad}:") as info:
        checks.diagnose(OneHeadWrong(64, n, bad, how), strict=True)
    assert info.value.mistake == f"diagnose/{line}"


def test_diagnose_is_callable_from_the_package_as_from_checks():
    from attention_lab import diagnose

    head = ParameterHead(scale=C ** -0.5)
    assert str(diagnose(head)) == str(checks.diagnose(head)) == str(diagnose.diagnose(head))
    assert diagnose(head).failed == ["scale", "sdpa"]


def test_importing_the_package_imports_neither_torch_nor_diagnose():
    code = "import sys, attention_lab; print(sorted(m for m in ('torch', 'attention_lab.diagnose') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]" and result.stderr == ""
    result = subprocess.run([sys.executable, "-c", "import attention_lab.diagnose"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
