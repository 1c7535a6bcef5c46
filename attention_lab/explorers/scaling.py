"""Chapter 3's explorer: d_k and scaling on/off -> softmax weights of unit-variance q and k, and Var(q·k)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from attention_lab import plots
from attention_lab.controls import slider, toggle, whole
from attention_lab.explorers.base import POWERS_OF_TWO, BadInput, Explorer, entropy_bits, floats

class ScalingExplorer(Explorer):
    """Chapter 3: d_k and scaling on/off -> softmax weights of unit-variance q and k, and Var(q·k).

    On purpose the idealized setting of the variance argument: q and k with independent unit-variance
    entries (the chapter's own q and k are narrower; the chapter shows by how much).
    """

    label = "softmax weights with and without scaling by 1/√d_k"
    figsize = (6.6, 3.3)
    n_samples = 2000  # pairs of q, k behind the variance curve

    def __init__(self, head_size=16, T=8, seed=1337, max_head_size=128, static=None):
        self.max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        T = whole("T", T, 1, 32)
        self.q = torch.randn(T, self.max_head_size, generator=g)  # (T, max_hs)
        self.k = torch.randn(T, self.max_head_size, generator=g)  # (T, max_hs)
        pairs = torch.randn(2, self.n_samples, self.max_head_size, generator=g)  # (2, N, max_hs)
        # column d-1 of the running sum is q·k for d_k = d: Var(q·k) for every d_k at once
        self.variance = torch.cumsum(pairs[0] * pairs[1], dim=1).var(dim=0).tolist()
        controls = {"head_size": slider(whole("head_size", head_size, 1, self.max_head_size), 1,
                                        self.max_head_size, "d_k (head_size)"),
                    "scale": toggle([("raw q·k", False), ("q·k / √d_k", True)], True, "scaling")}
        # the d_k of the variance curve: every power of two up to the largest
        self.d_values = [p for p in POWERS_OF_TWO if p <= self.max_head_size]
        super().__init__(controls, static)

    def page(self):
        return {"q": floats(self.q), "k": floats(self.k), "variance": floats(np.array(self.variance)),
                "d_values": self.d_values}

    def build(self, fig, stamped=True):
        fig.subplots_adjust(left=0.08, right=0.97, bottom=0.15, top=0.9, wspace=0.45)
        ax, ax_var = fig.subplots(1, 2, width_ratios=[1.3, 1])
        marker = plots.variance_panel(ax_var, self.d_values, [self.variance[n - 1] for n in self.d_values])
        return [plots.HeatmapArtist(ax, stamped=stamped)], [marker]

    def compute(self, values):
        d = whole("d_k", values["head_size"], 1, self.max_head_size, BadInput, "Move the d_k slider.")
        scores = self.q[:, :d] @ self.k[:, :d].T  # (T, d_k) @ (d_k, T) -> (T, T)
        if values["scale"]:
            scores = scores / math.sqrt(d)
        weights = F.softmax(scores, dim=-1).numpy()  # (T, T): no mask in this chapter
        return {"matrix": weights, "mean_max_weight": float(weights.max(axis=1).mean()),
                "mean_entropy_bits": float(entropy_bits(weights).mean()),
                "variance": self.variance[d - 1] / (d if values["scale"] else 1)}

    def draw(self, frame, result, values):
        frame.heatmaps[0].update(result["matrix"])
        frame.extra[0].set_data([values["head_size"]], [result["variance"]])

    def alt(self, values, result):
        T = len(result["matrix"])
        # the scale multiplies every score before the softmax, as an inverse temperature does (1 unscaled)
        d = values["head_size"]
        scaling = (f"scaled by 1/√d_k = {1 / math.sqrt(d):.4g}, which acts as an inverse temperature"
                   if values["scale"] else "not scaled (an inverse temperature of 1)")
        variance = "Var(q·k / √d_k)" if values["scale"] else "Var(q·k)"  # of the logits the softmax sees
        return (f"softmax weights for d_k={d}, {scaling}: mean largest weight "
                f"{result['mean_max_weight']:.2f}, mean entropy {result['mean_entropy_bits']:.2f} bits "
                f"(uniform: {math.log2(T):.2f}); {variance} = {result['variance']:.1f}")
