"""The lesson's head (Fig. 6) and chapter 7's many heads, written once for the package's own use.

:mod:`attention_lab.checks` compares a learner's code against it and :mod:`attention_lab.explorers`
draws it when no learner's ``Head`` is given (chapter 5). The notebooks write their own, by hand.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ReferenceHead(nn.Module):
    """One causal self-attention head."""

    def __init__(self, C, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(C, head_size, bias=False)
        self.query = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        # a (block_size, block_size) lower-triangular buffer, not a parameter
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):  # x: (B, T, C)
        B, T, C = x.shape
        k = self.key(x)  # (B, T, head_size)
        q = self.query(x)  # (B, T, head_size)
        v = self.value(x)  # (B, T, head_size)
        scores = q @ k.transpose(-2, -1)  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        scores = scores / k.shape[-1] ** 0.5  # scale by 1/sqrt(d_k)
        scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        weights = F.softmax(scores, dim=-1)  # (B, T, T), rows sum to 1
        return weights @ v  # (B, T, T) @ (B, T, hs) -> (B, T, hs)


class ReferenceMultiHead(nn.Module):
    """Chapter 7: n_head causal heads side by side, laid out as nanoGPT lays them out.

    One linear layer, ``c_attn``, makes the queries, keys and values of every head at once (its
    output's first C columns are q, the next C are k, the last C are v, each split into n_head
    slices of hs = C // n_head); ``view`` and ``transpose`` put the heads on their own axis,
    (B, n_head, T, hs); each head weights its values as Fig. 6 does; the heads' outputs are put side
    by side again, head 0's first, and ``c_proj`` (W_O) mixes them into (B, T, C).
    """

    def __init__(self, C, n_head, block_size):
        super().__init__()
        if C % n_head:
            raise ValueError(f"C={C} must be a multiple of n_head={n_head}")
        self.n_head = n_head
        self.c_attn = nn.Linear(C, 3 * C, bias=False)  # q, k, v of every head
        self.c_proj = nn.Linear(C, C, bias=False)  # W_O
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def heads(self, x):  # x: (B, T, C) -> q, k, v, each (B, n_head, T, hs)
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # (B, T, C) each
        hs = C // self.n_head
        return [t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v)]

    def weights(self, x):  # (B, T, C) -> (B, n_head, T, T)
        q, k, _ = self.heads(x)
        return self._weights(q, k)

    def _weights(self, q, k):  # (B, nh, T, hs) each -> (B, nh, T, T)
        T = q.shape[-2]
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5  # (B, nh, T, T)
        scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(scores, dim=-1)

    def forward(self, x, keep=None):  # x: (B, T, C); keep: (n_head,) of 0/1, heads to keep
        B, T, C = x.shape
        q, k, v = self.heads(x)
        out = self._weights(q, k) @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
        if keep is not None:  # a removed head's output is zero
            out = out * torch.as_tensor(keep, dtype=out.dtype).view(1, -1, 1, 1)
        out = out.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C), heads side by side
        return self.c_proj(out)  # (B, T, C)


class CausalSelfAttention(nn.Module):
    """nanoGPT's causal self-attention layer, in its layout and names (``c_attn``, ``c_proj``,
    ``n_head``, ``n_embd``), without dropout and here without biases: chapter 7 shows it computes
    what the chapter's own heads compute with the same weights. It takes torch's fused path,
    ``F.scaled_dot_product_attention(..., is_causal=True)``, as nanoGPT does where torch has it."""

    def __init__(self, n_embd, n_head, bias=False):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side again
        return self.c_proj(y)
