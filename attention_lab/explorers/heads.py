"""Chapter 7's explorer: a line of the play or typed text, and a head to remove -> the weights of every head
of chapter 7's trained model side by side, and its likeliest next characters after the text."""

from __future__ import annotations

import torch

from attention_lab import plots, text, training
from attention_lab.explorers.base import (Explorer, checked_lines, checked_model, follow_line,
                                         floats, text_ids, text_rows, unpack, vocabulary, weights_of)
from attention_lab.explorers.controls import Control, text_box, toggle

TOP = 3  # next characters named in the caption and listed in the panel
MODEL = {"token_table": (), "position_table": (), "attn": ("c_attn", "c_proj", "n_head"), "lm_head": ()}
WANTED = ("chapter 7's model, with a token_table, a position_table, an attn (c_attn, c_proj, n_head) and an "
          "lm_head, as attention_lab.training.load_multi() gives")


def tables(model) -> dict:
    """Each head's key, query and value per character and per position (x = tok + pos and c_attn is
    linear), then W_O and lm_head: what the page needs to compute the model on any text."""
    attn = model.attn
    C, n_head = model.token_table.weight.shape[1], attn.n_head
    hs = C // n_head
    tok, pos = model.token_table.weight.detach().double(), model.position_table.weight.detach().double()
    w = attn.c_attn.weight.detach().double()  # (3C, C): q, k, v of every head
    heads = []
    for h in range(n_head):
        out = {}
        for n, part in enumerate(("query", "key", "value")):
            rows = w[n * C + h * hs : n * C + (h + 1) * hs]  # (hs, C): head h's slice
            out[f"tok_{part}"] = floats(tok @ rows.T)
            out[f"pos_{part}"] = floats(pos @ rows.T)
        heads.append(out)
    bias = model.lm_head.bias
    return {"heads": heads, "c_proj": floats(attn.c_proj.weight.detach().double()),
            "lm_head": floats(model.lm_head.weight.detach().double()),
            "lm_bias": floats((bias if bias is not None else torch.zeros(model.lm_head.out_features)).detach())}


class HeadsExplorer(Explorer):
    """Chapter 7: a line of the play, or typed text, and a head to remove -> the weights of every head of
    chapter 7's model side by side, and the model's likeliest next characters after the text's last one.

    ``model`` is the trained :class:`~attention_lab.training.MultiHeadLM` (anything with its
    ``token_table``, ``position_table``, ``attn`` with ``c_attn``, ``c_proj`` and ``n_head``, and
    ``lm_head``; default: the shipped one, :func:`attention_lab.training.load_multi`). ``lines`` are
    offered in a menu; it starts on the first, with no head removed. Removing head h sets its columns of
    W_O to zero, as chapter 7's ablation does. ``ex.matrix`` is (n_head, T, T); ``ex.result["probs"]``
    the next-character probabilities.
    """

    name = "heads"
    label = "attention weights of the four heads of chapter 7's model, and its next character"
    figsize = (8.4, 3.0)
    # two heads a row on a wide screen, one on a phone; the numbers in the trace panel, not in the cells
    layout = {"max_cell": 1.6, "per_row": 2, "numbers_hidden": True}

    def __init__(self, model=None, lines=None):
        model = training.load_multi() if model is None else model
        self.model = checked_model("model", model, MODEL, WANTED)
        self.block_size = self.model.position_table.weight.shape[0]
        self.n_head = int(self.model.attn.n_head)
        self.lines = lines = checked_lines(lines, self.block_size, 4)
        self.vocab = text.vocab()
        self.tables = tables(self.model)
        self.unpacked = {k: unpack(self.tables[k]) for k in ("c_proj", "lm_head", "lm_bias")}
        shown = "{c1!r} {p1:.2f}, {c2!r} {p2:.2f}, {c3!r} {p3:.2f}"
        self.caption = ("removed", {
            gone: (f"attention weights of the {self.n_head} trained heads over the {{n:character}} {{tokens!r}}"
                   + ("" if gone < 0 else f", head {gone} removed")
                   + f"; the likeliest next characters after the last one: {shown}")
            for gone in range(-1, self.n_head)})
        controls = [Control("line", "select", "line", options=tuple((s, s) for s in lines) + (("(your own text)", ""),)),
                    text_box(f"up to {self.block_size} characters"),
                    toggle("removed", "remove head", [("none", -1)] + [(str(h), h) for h in range(self.n_head)])]
        super().__init__(controls, {"line": lines[0], "text": lines[0], "removed": -1})

    def page(self):
        return {"block_size": self.block_size, **vocabulary(), "n_head": self.n_head, "top": TOP,
                "panel": {"title": "next character", "alt": "the model's likeliest next characters"},
                "model": self.tables}

    follow = follow_line

    def compute(self, values):
        chars = values["line"] or values["text"]
        ids = text_ids(chars, self.block_size)
        T, u = len(ids), self.unpacked
        weights, outs = [], []
        for h, head in enumerate(self.tables["heads"]):
            q, k, v = (text_rows(head, p, ids) for p in ("query", "key", "value"))  # (T, hs) each
            w = weights_of(q, k)  # (T, T)
            out = (w.double() @ v.double()).float()  # (T, hs)
            weights.append(w)
            outs.append(out if h != values["removed"] else torch.zeros_like(out))
        side = torch.cat(outs, dim=-1)  # (T, C)
        y = (side.double() @ u["c_proj"].double().T).float()  # (T, C): W_O
        logits = (y[-1].double() @ u["lm_head"].double().T + u["lm_bias"].double()).float()  # (vocab,)
        probs = torch.softmax(logits.double(), dim=-1).float()
        order = sorted(range(len(probs)), key=lambda i: (-float(probs[i]), i))[:TOP]
        top = [(self.vocab[i], float(probs[i])) for i in order]
        fields = {"n": T}
        for n, (ch, p) in enumerate(top, start=1):
            fields[f"c{n}"], fields[f"p{n}"] = ch, p
        matrix = torch.stack(weights).numpy()  # (n_head, T, T)
        return {"matrix": matrix, "tokens": chars, "fields": fields, "probs": probs.numpy(), "top": top,
                "pictures": [{"matrix": m, "title": f"head {h}"} for h, m in enumerate(matrix)]}

    def draw_picture(self, fig, values, result):
        axes = fig.subplots(1, self.n_head)
        for h, ax in enumerate(axes):
            plots.attention_heatmap(result["matrix"][h], ax=ax, tokens=result["tokens"], title=f"head {h}",
                                    annotate=False)
