"""Chapter 1's explorer: T -> the normalized ``tril`` average."""

from __future__ import annotations

import torch
from attention_lab.controls import slider, whole
from attention_lab.explorers.base import BadInput, Explorer

class AverageExplorer(Explorer):
    """Chapter 1: T -> the normalized ``tril`` matrix of Fig. 2, row t holding 1/(t+1)."""

    label = "the plain causal average: the normalized tril matrix"

    def __init__(self, T=8, max_T=16, static=None):
        self.max_T = whole("max_T", max_T, 1, 64)
        controls = {"T": slider(whole("T", T, 1, self.max_T), 1, self.max_T, "T (sequence length)")}
        super().__init__(controls, static)

    def page(self):
        return {"max_T": self.max_T}

    def compute(self, values):
        T = whole("T", values["T"], 1, self.max_T, BadInput, f"Pick T between 1 and {self.max_T}.")
        w = torch.tril(torch.ones(T, T))  # (T, T): ones on and below the diagonal
        return {"matrix": (w / w.sum(dim=1, keepdim=True)).numpy()}  # row t: 1/(t+1)

    def alt(self, values, result):
        return f"normalized tril matrix for T={values['T']}: row t holds 1/(t+1) on and left of the diagonal"
