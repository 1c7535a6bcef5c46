"""Chapter 4's explorer: T and mask on/off -> the weights of the chapter's own queries and keys."""

from __future__ import annotations

import torch

from attention_lab.explorers.base import Explorer, floats, snap, weights_of
from attention_lab.explorers.controls import length, toggle, whole
from attention_lab.explorers.scores import checked_projections


class MaskingExplorer(Explorer):
    """Chapter 4: T and mask on/off -> softmax(q k^T / √d_k), the future masked or not.

    ``x`` is one sequence (T, C) and ``query``, ``key`` the chapter's projections: the explorer starts on
    the chapter's own weights, ``x[0]`` through them (all T positions, unless ``T`` says fewer). Without
    them: 32 seeded unit-variance queries and keys of size 16, starting at T = 8.
    """

    name = "masking"
    label = "attention weights with and without the causal mask"
    caption = ("mask", {True: "attention weights for T={T}, future masked",
                        False: "attention weights for T={T}, no mask"})

    def __init__(self, x=None, query=None, key=None, T=None, seed=1337):
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        if x is None:
            if query is not None or key is not None:
                raise ValueError("give x with its query and key (the chapter's x[0], query and key), or none of them")
            self.q = torch.randn(32, 16, generator=g)  # (T, hs)
            self.k = torch.randn(32, 16, generator=g)  # (T, hs)
        else:
            self.q, self.k = checked_projections(x, query, key, needed=True)
        self.q, self.k = snap(self.q), snap(self.k)  # as the page holds them
        n = len(self.q)
        T = whole("T", (n if x is not None else 8) if T is None else T, 1, n)
        super().__init__([length(n), toggle("mask", "mask", [("no mask", False), ("causal mask", True)])],
                         {"T": T, "mask": True})

    def page(self):
        return {"q": floats(self.q), "k": floats(self.k)}

    def compute(self, values):
        T = values["T"]
        return {"matrix": weights_of(self.q[:T], self.k[:T], mask=values["mask"]).numpy()}
