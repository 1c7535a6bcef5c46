"""Chapter 5's explorer: d_k, T, seed and a text -> the weights of one causal head."""

from __future__ import annotations

import torch
import torch.nn as nn

from attention_lab.explorers import learner
from attention_lab.explorers.base import (C, BadInput, Explorer, floats, head_weights, projections, text_ids,
                                          vocabulary)
from attention_lab.explorers.controls import (MAX_SEED, MESSAGES, a_kind, d_k, length, plural, say, seed_box,
                                              text_box, whole)
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
    block size, shown for the starting seed). The kernel runs a learner's ``Head`` for every setting
    (:mod:`~attention_lab.explorers.learner`); the engine draws one built as Fig. 6 builds it itself.
    """

    name = "head"
    label = "attention weights of one causal head"
    caption = "attention weights of {who}, d_k={head_size}, seed={seed}, over the {n:character} {tokens!r}"
    messages = {"kernel_only": "This explorer draws your own Head, which only a running kernel can compute: run the "
                               "chapter's notebook to move it."}
    figsize = (4.1, 3.5)

    def __init__(self, Head=None, text="First Citizen:", head_size=16, block_size=32, seed=1337, start=None,
                 max_head_size=128):
        if Head is not None and not callable(Head):
            raise ValueError(f"Head must be a class built as Head(C, head_size, block_size); got {Head!r}")
        self.Head, self.learner = Head or ReferenceHead, Head is not None
        self.start_may_fail = self.learner  # a Head that fails is a message, the learner fixes it and builds again
        self.max_head_size = whole("max_head_size", max_head_size, 1, 1024)
        seed, self._modules, self._start = whole("seed", seed, 0, MAX_SEED), {}, None
        if start is not None:
            head_size, block_size = _start_sizes(start)
            self._start = (head_size, seed)
            self._modules[self._start] = tuple(start)
        self.block_size = whole("block_size", block_size, 1, 256)
        try:
            text_ids(text, self.block_size)
        except BadInput as err:
            raise ValueError(str(err)) from None
        try:  # the engine draws a learner's Head itself when it is built as Fig. 6 builds it
            self.engine = not self.learner or learner.run(learner.like_reference, self.Head, self.block_size)
        except BadInput:  # the first picture says what is wrong
            self.engine = False
        controls = [d_k(self.max_head_size), length(self.block_size, "T (characters used)"), seed_box(),
                    text_box("type characters of Shakespeare")]
        values = {"head_size": whole("head_size", head_size, 1, self.max_head_size), "T": len(text),
                  "seed": seed, "text": text}
        super().__init__(controls, values)

    def page(self):
        config = {"block_size": self.block_size, **vocabulary(), "engine": self.engine, "kernel": self.learner}
        if self._start is not None:  # the chapter's own modules: their projections per character and position
            tok, pos, head = self._modules[self._start]
            config["start"] = {"head_size": self._start[0], "seed": str(self._start[1]),
                               **projections(tok.weight, pos.weight, head)}
        return config

    def constants(self):
        return {"who": f"a {getattr(self.Head, '__name__', 'Head')}" if self.learner else "one causal head"}

    def follow(self, name, values):
        # T follows a text the explorer can draw, so typing extends the picture
        if name == "text":
            try:
                return {"T": len(text_ids(values["text"], self.block_size))}
            except BadInput:
                pass
        return {}

    def compute(self, values):
        d, seed, T = values["head_size"], int(values["seed"]), values["T"]
        ids = text_ids(values["text"], self.block_size)
        if T > len(ids):
            raise BadInput(say(MESSAGES["T_above_text"], T=T, n=len(ids)))
        ids = ids[:T]
        if (d, seed) == self._start or not self.learner:
            with torch.no_grad():
                parts = self._reference_parts(d, seed, ids)
        else:
            parts = learner.run(learner.one_setting, self.Head, d, self.block_size, seed, ids)
        result = {"matrix": parts["weights"].numpy(), "tokens": values["text"][:T], "fields": {"n": T}}
        if self.learner:  # what the view draws for a Head the page cannot rebuild, and the trace's numbers
            result["parts"] = {name: floats(t) for name, t in parts.items()}
        return result

    def _reference_parts(self, d: int, seed: int, ids: list[int]) -> dict:
        # the chapter's own modules, or ReferenceHead's built from the seed (the last eight kept)
        if (d, seed) not in self._modules:
            kept = [k for k in self._modules if k != self._start][-7:]
            self._modules = {k: self._modules[k] for k in ([self._start] if self._start else []) + kept}
            self._modules[(d, seed)] = learner.build(ReferenceHead, d, self.block_size, seed)
        tok, pos, head = self._modules[(d, seed)]
        x = tok(torch.tensor([ids])) + pos(torch.arange(len(ids)))  # (1, T, C) + (T, C) -> (1, T, C)
        return {"weights": head_weights(head, x)[0], "q": head.query(x)[0], "k": head.key(x)[0],
                "v": head.value(x)[0]}
