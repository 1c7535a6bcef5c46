"""Chapter 5's explorer: d_k, T, seed and a text -> the weights of one causal head."""

from __future__ import annotations

import ipywidgets as widgets
import torch
import torch.nn as nn
from attention_lab.controls import NumberBox, TextBox, a_kind, plural, slider, whole
from attention_lab.explorers.base import C, BadInput, Explorer, _projections, _text_ids
from attention_lab.explorers.learner import HANG_NOTE, _build_modules, _checked_weights, can_stop_a_hang
from attention_lab.reference import ReferenceHead
from attention_lab.text import vocab

def _start_sizes(start) -> tuple[int, int]:
    # the head_size and block_size of the chapter's (token_table, position_table, head), once checked
    wanted = "start must be the chapter's three modules (token_table, position_table, head)"
    if not isinstance(start, (tuple, list)) or len(start) != 3:
        got = plural(len(start), "item") if isinstance(start, (tuple, list)) else a_kind(start)
        raise ValueError(f"{wanted}; got {got}.")
    tok, pos, head = start
    for name, table, rows in (("token_table", tok, f"{len(vocab())}"), ("position_table", pos, "block_size")):
        if not isinstance(table, nn.Embedding) or table.embedding_dim != C:
            got = f"an nn.Embedding(..., {table.embedding_dim})" if isinstance(table, nn.Embedding) else a_kind(table)
            raise ValueError(f"{wanted}: its {name} must be an nn.Embedding({rows}, {C}); got {got}.")
    if tok.num_embeddings != len(vocab()):
        raise ValueError(f"{wanted}: its token_table must have one row per character of the vocabulary, "
                         f"nn.Embedding({len(vocab())}, {C}); got {tok.num_embeddings} rows.")
    key, tril = getattr(head, "key", None), getattr(head, "tril", None)
    if not isinstance(key, nn.Linear) or key.in_features != C or not isinstance(tril, torch.Tensor) or tril.dim() != 2:
        raise ValueError(f"{wanted}: its head must have a key, an nn.Linear({C}, head_size), and a tril buffer of "
                         f"shape (block_size, block_size), as in Fig. 6; got {a_kind(head)} without them.")
    if pos.num_embeddings < tril.shape[0]:
        raise ValueError(f"{wanted}: its position_table has {plural(pos.num_embeddings, 'row')} but the head's "
                         f"tril is for block_size={tril.shape[0]}: build both with the same block_size.")
    return key.out_features, tril.shape[0]


class HeadExplorer(Explorer):
    """Chapter 5: d_k, T, seed and a text -> the attention weights of one causal head.

    x is the text's characters through a token table plus a position table (``nn.Embedding(65, C)``
    and ``nn.Embedding(block_size, C)``), built with the head under ``torch.manual_seed(seed)``.
    ``Head`` is the learner's class, built as ``Head(C, head_size, block_size)`` (default:
    :class:`ReferenceHead`, Fig. 6); its ``forward`` must return ``weights @ value(x)``.
    ``start=(token_table, position_table, head)`` starts on the chapter's own modules (their d_k and
    block size, shown for the starting seed).

    A learner's ``Head`` that fails (raises, returns the wrong thing, runs past ``HEAD_TIME_LIMIT_S``)
    is a message in the explorer, never an exception: the learner fixes it and builds the explorer
    again. With ``static=True`` such a head draws no pictures in advance: the explorer is live only.
    """

    label = "attention weights of one causal head"
    figsize = (4.1, 3.5)

    def __init__(self, Head=None, text="First Citizen:", head_size=16, block_size=32, seed=1337, start=None,
                 max_head_size=128, static=None):
        if Head is not None and not callable(Head):
            raise ValueError(f"Head must be a class built as Head(C, head_size, block_size); got {Head!r}")
        self.Head, self.learner = Head or ReferenceHead, Head is not None
        self.max_head_size = max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        seed, self._modules, self._start = whole("seed", seed, 0, 2**63 - 1), {}, None
        if start is not None:
            head_size, block_size = _start_sizes(start)
            self._modules[(head_size, seed)] = tuple(start)
        self.block_size = whole("block_size", block_size, 1, 256)
        try:
            _text_ids(text, self.block_size)
        except BadInput as err:
            raise ValueError(str(err)) from None
        n = len(text)
        controls = {
            "head_size": slider(whole("head_size", head_size, 1, max_head_size), 1, max_head_size, "d_k (head_size)"),
            "T": slider(n, 1, self.block_size, "T (characters used)"),
            "seed": NumberBox(value=seed, description="seed", layout=widgets.Layout(width="170px")),
            "text": TextBox(value=text, description="text", placeholder="type characters of Shakespeare"),
        }
        controls["text"].observe(self._text_changed, names="value")
        self._start = (head_size, seed) if start is not None else None  # kept in _modules for good
        super().__init__(controls, static)

    def page(self):
        # the page builds a head from a seed as torch does (engine/attention.js, buildHead), in
        # ReferenceHead's order: key, query, value. A Head built otherwise has no page config: the
        # book then shows this explorer's saved picture, and says so
        probe = [_build_modules(H, 3, self.block_size, 0) for H in (self.Head, ReferenceHead)]
        parts = [[*mods[:2], mods[2].key, mods[2].query, mods[2].value] for mods in probe]
        if not all(isinstance(a, nn.Module) and torch.equal(a.weight, b.weight) for a, b in zip(*parts)):
            raise BadInput(f"{getattr(self.Head, '__name__', 'Head')} does not build its key, query and value "
                           "as ReferenceHead does (three nn.Linear(C, head_size, bias=False), in that order)")
        config = {"block_size": self.block_size, "max_head_size": self.max_head_size, "vocab": "".join(vocab()),
                  "who": self._who()}
        if self._start is not None:  # the chapter's own modules: their projections per character and position
            tok, pos, head = self._modules[self._start]
            with torch.no_grad():
                config["start"] = {"head_size": self._start[0], "seed": str(self._start[1]),
                                   **_projections(tok.weight, pos.weight, head)}
        return config

    def _who(self) -> str:
        return f"a {getattr(self.Head, '__name__', 'Head')}" if self.learner else "one causal head"

    def _text_changed(self, change):
        # T follows the text's length when the explorer can draw the text, so typing extends the
        # picture; a text it cannot draw leaves T as the picture still shown has it
        try:
            _text_ids(change["new"], self.block_size)
        except BadInput:
            return
        self.set_quietly("T", len(change["new"]))

    def compute(self, values):
        d = whole("d_k", values["head_size"], 1, self.max_head_size, BadInput, "Move the d_k slider.")
        seed = whole("seed", values["seed"], 0, 2**63 - 1, BadInput, "Type a seed of 0 or more.")
        ids = _text_ids(values["text"], self.block_size)
        T = whole("T", values["T"], 1, self.block_size, BadInput, f"Pick T from 1 to block_size={self.block_size}.")
        if T > len(ids):
            raise BadInput(f"T={T} but the text has only {plural(len(ids), 'character')}: type more text or lower T.")
        try:
            if (d, seed) not in self._modules:  # the chapter's own modules (start) stay, whatever comes after
                kept = {k: m for k, m in self._modules.items() if k != self._start}
                self._modules = {**({self._start: self._modules[self._start]} if self._start else {}),
                                 **dict(list(kept.items())[-7:]), (d, seed): _build_modules(
                                     self.Head, d, self.block_size, seed)}  # the last eight (d_k, seed)
            tok, pos, head = self._modules[(d, seed)]
            with torch.no_grad():
                x = tok(torch.tensor([ids[:T]])) + pos(torch.arange(T))  # (1, T, C) + (T, C) -> (1, T, C)
                weights = _checked_weights(head, x, self.learner)  # (1, T, T)
        except BadInput as err:
            if self.learner and not can_stop_a_hang():  # nothing stops a Head that never returns here
                raise BadInput(f"{err} {HANG_NOTE}") from None
            raise
        return {"matrix": weights[0].numpy(), "tokens": values["text"][:T]}

    def alt(self, values, result):
        return (f"attention weights of {self._who()}, d_k={values['head_size']}, seed={values['seed']}, over the "
                f"{plural(len(result['tokens']), 'character')} {result['tokens']!r}")
