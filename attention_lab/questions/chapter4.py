"""Chapter 4's questions (masking the future), registered on import."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_lab.questions.forms import cells_question, choice_question, fmt, number_question, question


@question("ch4-row-one")
def ch4_row_one(q, k, tril, b=0, i=2, j=0):
    s = q[b] @ k[b].T / math.sqrt(q.shape[-1])  # (T, T): scaled scores, before the mask
    future = tril == 0
    masked = s.masked_fill(future, float("-inf"))
    right = F.softmax(masked, dim=-1)[i, j]
    return number_question(
        "ch4-row-one", "4.1", f"weights[{b}, {i}, {j}], the weight query {i} gives key {j}", right,
        f"the softmax of row {i}'s {i + 1} finite scores, [{', '.join(f'{v:.2f}' for v in s[i, :i + 1])}], "
        f"gives key {j} {fmt(right)}; the −inf entries add e^−inf = 0 to the sum.",
        [(F.softmax(s, dim=-1)[i, j], "the softmax ran over every key of the row, the future included: with "
                                      "no mask, or with the mask applied after the softmax (which leaves a row "
                                      "that no longer sums to one), the future keys share the weight; fill the "
                                      "scores above the diagonal with -inf, then take the softmax."),
         (F.softmax(s[i, :max(i, 1)], dim=-1)[min(j, max(i, 1) - 1)],
          f"that leaves out key {i} itself: query {i} sees keys 0 to {i}, its own included (the diagonal is "
          f"never masked), so the softmax runs over {i + 1} scores, not {i}."),
         (round(float(s[i, j]), 2), f"that is the raw score of key {j}, as printed, not its weight: the weight is e^score over the sum of "
                   f"e^score for the row's {i + 1} keys."),
         *[(near, "close, but give more decimals: three, such as 0.123.")
           for near in [round(float(right), 1)] if abs(near - float(right)) > 0.004],
         (F.softmax(s.masked_fill(future, 0.0), dim=-1)[i, j],
          "the future was filled with 0 instead of -inf: exp(0) = 1, so the future still gets weight."),
         (F.softmax(masked, dim=-2)[i, j], "softmax over the wrong axis: dim=-2 makes the columns sum to one; "
                                           "use dim=-1 (each row, over the keys)."),
         (F.softmax(masked / math.sqrt(q.shape[-1]), dim=-1)[i, j],
          f"scaled twice: the printed scores are already divided by √d_k = √{q.shape[-1]}, so dividing them "
          "again flattens the row; take the softmax of the printed numbers as they are."),
         (1 / (i + 1), f"that is 1/{i + 1}, the plain average of chapter 1: row {i} keeps {i + 1} keys, but the "
                       "softmax shares the weight by their scores, e^score over the row's sum, not evenly.")],
        {"abs": 0.003},  # two-decimal scores put the weight within 0.002; the stored numbers lie 0.006 or more apart
        none=f"Take e^score of each of row {i}'s {i + 1} printed scores and divide key {j}'s by their sum; "
             "section 4.7 prints the weights.")


@question("ch4-unmasked")
def ch4_unmasked(q, k, tril, T=3):
    s = q[0, :T] @ k[0, :T].T / math.sqrt(q.shape[-1])  # (T, T): the first T positions' scores
    future = tril[:T, :T] == 0
    masked = F.softmax(s.masked_fill(future, float("-inf")), dim=-1)
    open_ = F.softmax(s, dim=-1)  # the mask switched off
    changed = {(i, j) for i, j in (masked - open_).abs().gt(1e-6).nonzero().tolist()}
    every = {(i, j) for i in range(T) for j in range(T)}
    ahead = {(i, j) for i in range(T) for j in range(T) if j > i}
    return cells_question(
        "ch4-unmasked", "4.2", f"the weights that change when the mask is switched off, for the first "
                               f"T = {T} positions", T, changed,
        f"each row's softmax divides by the sum over the keys it sees. Switch the mask off and the future "
        f"keys join that sum, so in rows 0 to {T - 2} every weight changes, the past ones shrinking; row "
        f"{T - 1} already saw all {T} keys and stays as it was.",
        [(ahead, "the future cells gain weight, but then each row's sum grows, so the weights of its past "
                 "keys shrink too: every cell of a row the mask reached changes."),
         (every, f"the last row, {T - 1}, sees every key already: the mask hides nothing there, so switching it "
                 "off changes none of its weights."),
         (ahead | {(i, i) for i in range(T)}, "the diagonal is not masked: a position sees itself. Besides, "
                                             "a row's past weights change too, since the row's sum grows.")])


@question("ch4-all-masked")
def ch4_all_masked(row):
    hidden = torch.ones(len(row), dtype=torch.bool)
    masked = row.masked_fill(hidden, float("-inf"))
    got = F.softmax(masked, dim=-1)
    finite = F.softmax(row.masked_fill(hidden, -1e9), dim=-1)
    shifted = masked - masked.max()  # the softmax's first step: nan already
    # the same row through F.scaled_dot_product_attention, every key hidden by its boolean mask
    one = row.new_ones(1, 1, 1, 1)
    sdpa = F.scaled_dot_product_attention(one, one.expand(1, 1, len(row), 1), one.expand(1, 1, len(row), 1),
                                          attn_mask=~hidden[None, :])
    sdpa_zero = bool((sdpa == 0).all())
    n = len(row)
    right = "c" if torch.isnan(got).all() else ("b" if torch.allclose(got, finite) else "a")
    sdpa_says = ("the one F.scaled_dot_product_attention gives: it returns zeros for a row with no key left "
                 "(section 4.9 shows it)" if sdpa_zero else "the one a mask-aware function could give")
    return choice_question(
        "ch4-all-masked", "4.3", f"A row of {n} scores in which every key is masked with -inf: what does "
                                 "F.softmax give?",
        {"a": f"{n} zeros: no key is allowed, so no key gets weight.",
         "b": f"1/{n} on every key: the masked entries are all equal, and equal scores share the weight evenly.",
         "c": "nan on every key: no finite number is left in the row."},
        right,
        "the softmax first subtracts the row's largest entry, which is −inf too, and −inf − (−inf) is nan, "
        f"'not a number'{', on every key' if torch.isnan(shifted).all() else ''}: the row is nan before any "
        f"division. A finite fill such as -1e9 gives {finite[0]:.2f} everywhere instead, silently.",
        {"a": f"a sensible answer, and {sdpa_says}. F.softmax does not: it first subtracts the row's largest "
              "entry, −inf here, and −inf − (−inf) is nan, on every key.",
         "b": f"that is what a finite fill such as -1e9 gives ({finite[0]:.2f} each): equal numbers make a "
              "uniform row. With -inf no finite entry is left, and −inf − (−inf) is nan.",
         "c": "the softmax of this row is not nan here."})
