"""The lesson's head (Fig. 6), written once for the package's own use.

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
