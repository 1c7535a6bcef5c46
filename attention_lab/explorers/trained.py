"""Chapter 6's explorer: a line of the play or typed text, trained/untrained -> the weights of chapter
6's head."""

from __future__ import annotations

import numpy as np

from attention_lab import training
from attention_lab.explorers.base import (Explorer, checked_lines, checked_model, follow_line,
                                         projections, text_ids, text_rows, vocabulary, weights_of)
from attention_lab.explorers.controls import Control, text_box, toggle

MODEL = {"token_table": (), "position_table": (), "head": ("key", "query", "value", "tril")}  # what it needs
WANTED = ("chapter 6's model, with a token_table, a position_table and a head (key, query, value, tril), as "
          "attention_lab.training.load_trained() gives")


class TrainedExplorer(Explorer):
    """Chapter 6: a line of the play, or typed text, and trained/untrained -> the weights of the head
    of chapter 6's model.

    ``trained`` and ``untrained`` are the model after and before training (anything with its
    ``token_table``, ``position_table`` and ``head``; default: the shipped ones,
    :func:`attention_lab.training.load_trained`). ``lines`` are offered in a menu (default: the first six
    lines of the validation text that fit the block size); it starts on the first line, trained. Typed
    text replaces the line; T is its length.
    """

    name = "trained"
    label = "attention weights of chapter 6's head, trained or untrained"
    caption = ("trained", {
        flag: f"attention weights of the {word} head over the {{n:character}} {{tokens!r}}: on average a row puts "
              "{own:.2f} of its weight on its own character and looks {back:.2f} characters back"
        for flag, word in ((True, "trained"), (False, "untrained"))})
    figsize = (6.0, 5.4)  # room for 32 characters on each axis

    def __init__(self, trained=None, untrained=None, lines=None):
        shipped = training.load_trained() if trained is None or untrained is None else None
        self.models = {True: checked_model("trained", trained or shipped.trained, MODEL, WANTED),
                       False: checked_model("untrained", untrained or shipped.untrained, MODEL, WANTED)}
        sizes = {flag: m.position_table.weight.shape for flag, m in self.models.items()}
        if sizes[True] != sizes[False]:
            raise ValueError(f"trained and untrained must be the same model before and after training; their "
                             f"position tables differ: {tuple(sizes[True])} and {tuple(sizes[False])}.")
        self.block_size = sizes[True][0]
        self.lines = lines = checked_lines(lines, self.block_size, 6)
        controls = [Control("line", "select", "line", options=tuple((s, s) for s in lines) + (("(your own text)", ""),)),
                    text_box(f"up to {self.block_size} characters"),
                    toggle("trained", "head", [("trained", True), ("untrained", False)])]
        self.tables = {flag: projections(m.token_table.weight, m.position_table.weight, m.head)
                       for flag, m in self.models.items()}
        super().__init__(controls, {"line": lines[0], "text": lines[0], "trained": True})

    def page(self):
        return {"block_size": self.block_size, **vocabulary(),
                "models": {"trained": self.tables[True], "untrained": self.tables[False]}}

    follow = follow_line

    def compute(self, values):
        chars = values["line"] or values["text"]
        ids = text_ids(chars, self.block_size)
        q, k = (text_rows(self.tables[values["trained"]], part, ids) for part in ("query", "key"))
        w = weights_of(q, k).numpy()  # (T, T)
        T = len(ids)
        back = (w * np.maximum(np.subtract.outer(np.arange(T), np.arange(T)), 0)).sum(-1).mean()
        return {"matrix": w, "tokens": chars, "fields": {"n": T, "own": float(np.trace(w) / T), "back": float(back)}}
