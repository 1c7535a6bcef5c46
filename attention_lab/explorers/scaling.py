"""Chapter 3's explorer: d_k and scaling on/off -> softmax weights of unit-variance q and k, and Var(q·k)."""

from __future__ import annotations

import math

import numpy as np
import torch

from attention_lab import plots
from attention_lab.explorers.base import Explorer, floats, snap, weights_of
from attention_lab.explorers.controls import d_k, toggle, whole

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128)
SCALED = "scaled by 1/√d_k = {inverse:.4g}, which acts as an inverse temperature"
SUMMARY = ": mean largest weight {mean_max:.2f}, mean entropy {mean_entropy:.2f} bits (uniform: {uniform:.2f}); "


class ScalingExplorer(Explorer):
    """Chapter 3: d_k and scaling on/off -> softmax weights of unit-variance q and k, and Var(q·k).

    On purpose the idealized setting of the variance argument: q and k with independent unit-variance
    entries (the chapter's own q and k are narrower; the chapter shows by how much).
    """

    name = "scaling"
    label = "softmax weights with and without scaling by 1/√d_k"
    # the scale multiplies every score before the softmax, as an inverse temperature does (1 unscaled)
    caption = ("scale", {True: "softmax weights for d_k={head_size}, " + SCALED + SUMMARY + "Var(q·k / √d_k) = {variance:.1f}",
                         False: "softmax weights for d_k={head_size}, not scaled (an inverse temperature of 1)"
                                + SUMMARY + "Var(q·k) = {variance:.1f}"})
    figsize = (6.6, 3.3)
    n_samples = 2000  # pairs of q, k behind the variance curve
    # chapter 3's second picture, Var(q·k) against d_k (the engine's variance panel draws it from these words)
    panel = {"title": "variance of the scores", "x": "d_k", "y": "Var(q·k)", "raw": "raw q·k", "scaled": "q·k / √d_k",
             "alt": "Var(q·k) against d_k: the raw scores' variance grows like d_k, divided by √d_k it stays near 1"}

    def __init__(self, head_size=16, T=8, seed=1337, max_head_size=128):
        self.max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        T = whole("T", T, 1, 32)
        self.q = snap(torch.randn(T, self.max_head_size, generator=g))  # (T, max_hs), as the page holds them
        self.k = snap(torch.randn(T, self.max_head_size, generator=g))  # (T, max_hs)
        pairs = torch.randn(2, self.n_samples, self.max_head_size, generator=g).double()  # (2, N, max_hs)
        # column d-1 of the running sum is q·k for d_k = d: Var(q·k) for every d_k at once
        self.variance = snap(torch.cumsum(pairs[0] * pairs[1], dim=1).var(dim=0))  # (max_hs,)
        # the d_k of the variance curve: every power of two up to the largest
        self.d_values = [p for p in POWERS_OF_TWO if p <= self.max_head_size]
        controls = [d_k(self.max_head_size), toggle("scale", "scaling", [("raw q·k", False), ("q·k / √d_k", True)])]
        super().__init__(controls, {"head_size": whole("head_size", head_size, 1, self.max_head_size), "scale": True})

    def page(self):
        return {"q": floats(self.q), "k": floats(self.k), "variance": floats(self.variance),
                "d_values": self.d_values, "panel": self.panel}

    def compute(self, values):
        d = values["head_size"]
        weights = weights_of(self.q[:, :d], self.k[:, :d], mask=False, scale=values["scale"]).numpy()  # no mask here
        variance = float(self.variance[d - 1]) / (d if values["scale"] else 1)
        p = weights.astype(float)
        entropy = -(p * np.log2(np.where(p > 0, p, 1.0))).sum(axis=1)  # bits, a row each; 0 log 0 is 0
        return {"matrix": weights, "variance": variance,
                "fields": {"mean_max": float(weights.max(axis=1).mean()), "inverse": 1 / math.sqrt(d),
                           "mean_entropy": float(entropy.mean()),
                           "uniform": math.log2(len(weights)), "variance": variance}}

    def draw_picture(self, fig, values, result):
        fig.subplots_adjust(left=0.08, right=0.97, bottom=0.2, top=0.9, wspace=0.45)
        ax, ax_var = fig.subplots(1, 2, width_ratios=[1.3, 1])
        plots.attention_heatmap(result["matrix"], ax=ax)
        variances = [float(self.variance[n - 1]) for n in self.d_values]
        plots.variance_panel(ax_var, self.d_values, variances, self.panel).set_data([values["head_size"]],
                                                                                     [result["variance"]])
