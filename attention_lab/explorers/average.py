"""Chapter 1's explorer: T -> the normalized ``tril`` average."""

from __future__ import annotations

import torch

from attention_lab.explorers.base import Explorer
from attention_lab.explorers.controls import length, whole


class AverageExplorer(Explorer):
    """Chapter 1: T -> the normalized ``tril`` matrix of Fig. 2, row t holding 1/(t+1)."""

    name = "average"
    label = "the plain causal average: the normalized tril matrix"
    caption = "normalized tril matrix for T={T}: row t holds 1/(t+1) on and left of the diagonal"

    def __init__(self, T=8, max_T=16):
        self.max_T = whole("max_T", max_T, 1, 64)
        super().__init__([length(self.max_T)], {"T": whole("T", T, 1, self.max_T)})

    def compute(self, values):
        T = values["T"]
        w = torch.tril(torch.ones(T, T))  # (T, T): ones on and below the diagonal
        return {"matrix": (w / w.sum(dim=1, keepdim=True)).numpy()}  # row t: 1/(t+1)
