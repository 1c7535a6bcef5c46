"""Chapter 4's explorer: T and mask on/off -> the weights of the chapter's own q and k."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from attention_lab.controls import one_sequence, slider, toggle, whole
from attention_lab.explorers.base import BadInput, Explorer, floats

class MaskingExplorer(Explorer):
    """Chapter 4: T and mask on/off -> softmax(q k^T / √d_k) with the future masked or not.

    ``q`` and ``k`` are one sequence's (T, head_size) queries and keys: the chapter's ``q[0]`` and
    ``k[0]``, so it starts on the chapter's own weights (all T positions, unless ``T`` says fewer);
    without them, 32 seeded unit-variance ones, starting at T = 8.
    """

    label = "attention weights with and without the causal mask"

    def __init__(self, q=None, k=None, T=None, seed=1337, static=None):
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        if (q is None) != (k is None):
            raise ValueError(f"give both q and k (one sequence's queries and keys, e.g. q[0] and k[0]), or neither; "
                             f"got only {'q' if k is None else 'k'}")
        self.q = torch.randn(32, 16, generator=g) if q is None else one_sequence("q", q, "(T, head_size)")  # (T, hs)
        self.k = torch.randn(32, 16, generator=g) if k is None else one_sequence("k", k, "(T, head_size)")  # (T, hs)
        if self.q.shape != self.k.shape:
            raise ValueError(f"q and k must be one sequence's (T, head_size) queries and keys, e.g. q[0] and "
                             f"k[0]; got shapes {tuple(self.q.shape)} and {tuple(self.k.shape)}")
        n = len(self.q)
        T = whole("T", (n if q is not None else 8) if T is None else T, 1, n)
        controls = {"T": slider(T, 1, n, "T (sequence length)"),
                    "mask": toggle([("no mask", False), ("causal mask", True)], True, "mask")}
        super().__init__(controls, static)

    def page(self):
        return {"q": floats(self.q), "k": floats(self.k)}

    def compute(self, values):
        T = whole("T", values["T"], 1, len(self.q), BadInput, "Move the T slider.")
        scores = self.q[:T] @ self.k[:T].T / math.sqrt(self.q.shape[1])  # (T, hs) @ (hs, T) -> (T, T)
        if values["mask"]:
            tril = torch.tril(torch.ones(T, T))  # (T, T): 1 where key j <= query i
            scores = scores.masked_fill(tril == 0, float("-inf"))  # future -> -inf
        return {"matrix": F.softmax(scores, dim=-1).numpy()}

    def alt(self, values, result):
        return f"attention weights for T={values['T']}, {'future masked' if values['mask'] else 'no mask'}"
