"""Chapter 2's explorer: d_k and T -> the raw scores q @ k.T of the chapter's own sequence."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from attention_lab.explorers.base import C, Explorer, floats, snap
from attention_lab.explorers.controls import a_kind, d_k, length, one_sequence, positive, whole


def checked_projections(x, query, key, rows: int | None = None, g: torch.Generator | None = None, needed=False):
    """(q, k) of one sequence ``x`` (T, C) through the chapter's ``query`` and ``key`` layers, in float64.

    With ``rows``, each projection has that many output rows: the layer's own, then rows drawn as
    ``nn.Linear`` draws its start (uniform on ±1/√in, from ``g``), so a head of size d_k uses the first d_k.
    A layer that is missing (``needed=False``) is all drawn rows. Arguments that do not fit are a ValueError.
    """
    x = one_sequence("x", x, "(T, C)")
    for name, layer in (("query", query), ("key", key)):
        if layer is None and needed:
            raise ValueError(f"give the chapter's {name} with x: an nn.Linear(C, head_size)")
        if layer is None:
            continue
        if not isinstance(layer, nn.Linear):
            raise ValueError(f"{name} must be the chapter's {name}, an nn.Linear(C, head_size); got {a_kind(layer)}")
        if layer.weight.is_meta:
            raise ValueError(f"{name} is on the meta device, with no numbers in its weight: give the chapter's {name}")
        if layer.in_features != x.shape[1]:
            raise ValueError(f"{name} takes {layer.in_features} numbers per position but x has {x.shape[1]}: pass the "
                             f"{name} that projects this x, an nn.Linear({x.shape[1]}, head_size), or an x of shape "
                             f"(T, {layer.in_features}).")
    if query is not None and key is not None and query.out_features != key.out_features:
        raise ValueError(f"query and key must have the same head_size; got nn.Linear(..., {query.out_features}) "
                         f"and nn.Linear(..., {key.out_features}). Pass the chapter's pair.")

    def project(layer):
        w = torch.empty(0, x.shape[1], dtype=torch.float64) if layer is None else layer.weight.detach().double()
        b = torch.zeros(len(w), dtype=torch.float64)
        if layer is not None and layer.bias is not None:
            b = layer.bias.detach().double()
        if rows is not None:
            extra = (torch.rand(max(rows - len(w), 0), x.shape[1], generator=g) * 2 - 1) / math.sqrt(x.shape[1])
            w, b = torch.cat([w, extra.double()])[:rows], torch.cat([b, torch.zeros(len(extra))])[:rows]
        return x @ w.T + b  # (T, C) @ (C, rows) -> (T, rows)

    return project(query), project(key)


class ScoresExplorer(Explorer):
    """Chapter 2: d_k and T -> the raw scores q @ k.T of one sequence ``x`` of shape (T, C).

    With the chapter's ``x[0]``, ``query`` and ``key`` it starts on the chapter's own scores (d_k =
    head_size, all T positions); other d_k use the first d_k rows of the chapter's weights, and rows
    beyond them drawn as ``nn.Linear`` draws its start. Without them: a seeded random ``x`` and layers.
    """

    name = "scores"
    kind = "scores"
    label = "raw attention scores q·k"
    caption = ("raw scores q·k for d_k={head_size}, T={T}: from {lo:.1f} to {hi:.1f} (divided by √d_k: "
               "{scaled_lo:.1f} to {scaled_hi:.1f}); colours clipped at ±{limit:g}")

    def __init__(self, x=None, query=None, key=None, max_head_size=128, limit=8.0, seed=1337):
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        x = torch.randn(8, C, generator=g) if x is None else x
        self.max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        self.limit = positive("limit", limit, "8 (the colours run from -limit to +limit)")
        # (T, max_hs) each, as the page holds them
        self.q_all, self.k_all = map(snap, checked_projections(x, query, key, self.max_head_size, g))
        d = 16 if query is None else whole("head_size", query.out_features, 1, self.max_head_size,
                                           "Raise max_head_size to at least the head_size of query.")
        T = len(self.q_all)
        super().__init__([d_k(self.max_head_size), length(T)], {"head_size": d, "T": T})

    def page(self):
        # a head of size d_k takes the first d_k columns, as compute does
        return {"q_all": floats(self.q_all), "k_all": floats(self.k_all)}

    def constants(self):
        return {"limit": self.limit}

    def compute(self, values):
        d, T = values["head_size"], values["T"]
        q, k = self.q_all[:T, :d].double(), self.k_all[:T, :d].double()  # the page's float32 numbers
        scores = q @ k.T  # (T, d_k) @ (d_k, T) -> (T, T)
        scaled = scores / math.sqrt(d)
        return {"matrix": scores.float().numpy(),
                "fields": {"lo": float(scores.min()), "hi": float(scores.max()),
                           "scaled_lo": float(scaled.min()), "scaled_hi": float(scaled.max())}}
