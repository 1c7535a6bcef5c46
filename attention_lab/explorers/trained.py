"""Chapter 6's explorer: a line of the play or typed text, trained/untrained -> the weights of chapter
6's head."""

from __future__ import annotations

import numpy as np
import torch
from attention_lab.controls import Menu, TextBox, a_kind, plural, toggle
from attention_lab.explorers.base import BadInput, Explorer, _projections, _text_ids, head_weights
from attention_lab.text import vocab

class TrainedExplorer(Explorer):
    """Chapter 6: a line of the play, or typed text, and trained/untrained -> the weights of the head
    of chapter 6's model.

    ``trained`` and ``untrained`` are the model after and before training (anything with its
    ``token_table``, ``position_table`` and ``head``; default: the shipped ones,
    :func:`attention_lab.training.load_trained`). ``lines`` are offered in a menu, in a kernel and in
    the hosted book's page (default: the first six lines of the validation text that fit the block
    size); it starts on the first line, trained. Typed text replaces the line; T is its length.
    """

    label = "attention weights of chapter 6's head, trained or untrained"
    figsize = (6.0, 5.4)  # room for 32 characters on each axis

    def __init__(self, trained=None, untrained=None, lines=None, static=None):
        from attention_lab import text, training

        shipped = training.load_trained() if trained is None or untrained is None else None
        self.models = {True: trained or shipped.trained, False: untrained or shipped.untrained}
        for name, model in (("trained", self.models[True]), ("untrained", self.models[False])):
            missing = [part for part in ("token_table", "position_table", "head") if not hasattr(model, part)]
            if hasattr(model, "head"):
                missing += [f"head.{part}" for part in ("key", "query", "tril") if not hasattr(model.head, part)]
            if missing:
                raise ValueError(f"{name} must be chapter 6's model, with a token_table, a position_table and a head "
                                 f"(key, query, tril), as attention_lab.training.load_trained() gives; got "
                                 f"{a_kind(model)} without {', '.join(missing)}.")
        self.block_size = self.models[True].position_table.weight.shape[0]
        if lines is None:
            lines = list(dict.fromkeys(text.validation_lines(self.block_size)))[:6]
        if isinstance(lines, str):
            raise ValueError(f"lines must be a list of lines, such as [{lines!r}]; got the string {lines!r}")
        lines = list(lines)
        if not lines or len(set(lines)) != len(lines):
            raise ValueError(f"lines must list at least one line, each once; got {lines!r}")
        for line in lines:
            try:
                _text_ids(line, self.block_size)
            except BadInput as err:
                raise ValueError(f"line {line!r}: {err}") from None
        controls = {"line": Menu(options=[(s, s) for s in lines] + [("(your own text)", "")],
                                 value=lines[0], description="line"),
                    "text": TextBox(value=lines[0], description="text",
                                    placeholder=f"up to {self.block_size} characters"),
                    "trained": toggle([("trained", True), ("untrained", False)], True, "head")}
        # a line chosen in the menu goes into the text box; typing there sets the menu to "(your own text)"
        controls["line"].observe(lambda c: c["new"] and self.set_quietly("text", c["new"]), names="value")
        controls["text"].observe(lambda c: c["new"] != controls["line"].value and self.set_quietly("line", ""),
                                 names="value")
        self.lines = lines
        super().__init__(controls, static)

    def page(self):
        models = {name: _projections(m.token_table.weight, m.position_table.weight, m.head)
                  for name, m in (("trained", self.models[True]), ("untrained", self.models[False]))}
        return {"block_size": self.block_size, "vocab": "".join(vocab()), "lines": self.lines, "models": models}

    def compute(self, values):
        chars = values["line"] or values["text"]
        ids, model = _text_ids(chars, self.block_size), self.models[bool(values["trained"])]
        with torch.no_grad():
            x = model.token_table(torch.tensor([ids])) + model.position_table(torch.arange(len(ids)))  # (1, T, C)
            return {"matrix": head_weights(model.head, x)[0].numpy(), "tokens": chars}  # (T, T)

    def alt(self, values, result):
        w, T = result["matrix"], len(result["tokens"])
        back = (w * np.maximum(np.subtract.outer(np.arange(T), np.arange(T)), 0)).sum(-1).mean()
        return (f"attention weights of the {'trained' if values['trained'] else 'untrained'} head over the "
                f"{plural(T, 'character')} {result['tokens']!r}: on average a row puts {np.trace(w) / T:.2f} of its "
                f"weight on its own character and looks {back:.2f} characters back")
