"""Chapter 2's explorer: d_k and T -> the raw scores q @ k.T of the chapter's own sequence."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from attention_lab.controls import a_kind, one_sequence, positive, slider, whole
from attention_lab.explorers.base import C, BadInput, Explorer, floats

def _checked_layer(name: str, layer, width: int) -> None:
    # the chapter's projection must take x's width
    if layer is None:
        return
    if not isinstance(layer, nn.Linear):
        raise ValueError(f"{name} must be the chapter's {name}, an nn.Linear(C, head_size); got {a_kind(layer)}")
    if layer.in_features != width:
        raise ValueError(f"{name} takes {layer.in_features} numbers per position but x has {width}: pass the "
                         f"{name} that projects this x, an nn.Linear({width}, head_size), or an x of shape "
                         f"(T, {layer.in_features}).")


def _projection(layer: nn.Linear | None, rows: int, in_features: int, g: torch.Generator) -> torch.Tensor:
    # the layer's own weight (out, in), with more rows drawn as nn.Linear starts them, uniform on
    # ±1/sqrt(in), so that a head of size d_k uses the first d_k rows
    own = torch.empty(0, in_features) if layer is None else layer.weight.detach().float()
    extra = (torch.rand(max(rows - len(own), 0), in_features, generator=g) * 2 - 1) / math.sqrt(in_features)
    return torch.cat([own, extra])[:rows]


class ScoresExplorer(Explorer):
    """Chapter 2: d_k and T -> the raw scores q @ k.T of one sequence ``x`` of shape (T, C).

    With the chapter's ``x[0]``, ``query`` and ``key`` it starts on the chapter's own scores (d_k =
    head_size, all T positions); other d_k use the first d_k rows of the chapter's weights, and rows
    beyond them drawn as ``nn.Linear`` draws its start. Without them: a seeded random ``x`` and layers.
    """

    label = "raw attention scores q·k"
    kind = "scores"

    def __init__(self, x=None, query=None, key=None, max_head_size=128, limit=8.0, seed=1337, static=None):
        g = torch.Generator().manual_seed(whole("seed", seed, 0, 2**63 - 1))
        x = torch.randn(8, C, generator=g) if x is None else one_sequence("x", x, "(T, C)")
        for name, layer in (("query", query), ("key", key)):
            _checked_layer(name, layer, x.shape[1])
        if query is not None and key is not None and query.out_features != key.out_features:
            raise ValueError(f"query and key must have the same head_size; got nn.Linear(..., {query.out_features}) "
                             f"and nn.Linear(..., {key.out_features}). Pass the chapter's pair.")
        self.max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        self.limit = positive("limit", limit, "8 (the colours run from -limit to +limit)")
        self.q_all = x @ _projection(query, self.max_head_size, x.shape[1], g).T  # (T, max_hs)
        self.k_all = x @ _projection(key, self.max_head_size, x.shape[1], g).T  # (T, max_hs)
        d = 16 if query is None else query.out_features
        T = x.shape[0]
        raise_max = "Raise max_head_size to at least the head_size of query." if query is not None else ""
        controls = {"head_size": slider(whole("head_size", d, 1, self.max_head_size, fix=raise_max), 1,
                                        self.max_head_size, "d_k (head_size)"),
                    "T": slider(T, 1, T, "T (sequence length)")}
        super().__init__(controls, static)

    def page(self):
        # a head of size d_k takes the first d_k columns, as compute does
        return {"q_all": floats(self.q_all), "k_all": floats(self.k_all), "limit": self.limit}

    def compute(self, values):
        d = whole("d_k", values["head_size"], 1, self.max_head_size, BadInput, "Move the d_k slider.")
        T = whole("T", values["T"], 1, len(self.q_all), BadInput, "Move the T slider.")
        scores = self.q_all[:T, :d] @ self.k_all[:T, :d].T  # (T, d_k) @ (d_k, T) -> (T, T)
        return {"matrix": scores.numpy(), "scaled": (scores / math.sqrt(d)).numpy()}

    def alt(self, values, result):
        s, z = result["matrix"], result["scaled"]
        return (f"raw scores q·k for d_k={values['head_size']}, T={values['T']}: from {s.min():.1f} to "
                f"{s.max():.1f} (divided by √d_k: {z.min():.1f} to {z.max():.1f}); colours clipped at "
                f"±{self.limit:g}")
